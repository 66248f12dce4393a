#include "core/stats.hpp"

#include <algorithm>
#include <stdexcept>

namespace allocsim {
namespace {

void add_stat(std::vector<std::pair<std::string, int64_t>>& out, const std::string& prefix,
              const Stat& s) {
  out.emplace_back(prefix + ".allocated", s.allocated);
  out.emplace_back(prefix + ".current", s.current);
  out.emplace_back(prefix + ".freed", s.freed);
  out.emplace_back(prefix + ".peak", s.peak);
}

void add_array(std::vector<std::pair<std::string, int64_t>>& out, const std::string& name,
               const StatArray& a) {
  add_stat(out, name + ".all", a[kAggregate]);
  add_stat(out, name + ".large_pool", a[kLargePool]);
  add_stat(out, name + ".small_pool", a[kSmallPool]);
}

}  // namespace

void DeviceStats::reset_peaks() {
  for (StatArray* a : {&allocation, &segment, &inactive_split, &allocated_bytes, &reserved_bytes,
                       &inactive_split_bytes, &requested_bytes})
    a->reset_peak();
  for (PrivatePoolReserved& p : reserved_bytes_by_private_pools) p.reserved_bytes.reset_peak();
  deferred.reset_peak(allocation);
  deferred_bytes.reset_peak(allocated_bytes);
  oversize_allocations.reset_peak();
  oversize_segments.reset_peak();
}

void DeviceStats::reset_accumulated() {
  for (StatArray* a : {&allocation, &segment, &inactive_split, &allocated_bytes, &reserved_bytes,
                       &inactive_split_bytes, &requested_bytes})
    a->reset_accumulated();
  for (PrivatePoolReserved& p : reserved_bytes_by_private_pools)
    p.reserved_bytes.reset_accumulated();
  deferred.reset_accumulated();
  deferred_bytes.reset_accumulated();
  num_alloc_retries = num_ooms = num_sync_all_streams = num_device_alloc = num_device_free = 0;
  num_oom_rejections = 0;
  oversize_allocations.reset_accumulated();
  oversize_segments.reset_accumulated();
}

std::vector<std::pair<std::string, int64_t>> DeviceStats::flatten(TorchVersion version) const {
  std::vector<std::pair<std::string, int64_t>> out;
  out.reserve(122);
  add_array(out, "active", active());
  add_array(out, "active_bytes", active_bytes());
  add_array(out, "allocated_bytes", allocated_bytes);
  add_array(out, "allocation", allocation);
  add_array(out, "inactive_split", inactive_split);
  add_array(out, "inactive_split_bytes", inactive_split_bytes);
  out.emplace_back("max_split_size", max_split_size);
  out.emplace_back("num_alloc_retries", num_alloc_retries);
  out.emplace_back("num_device_alloc", num_device_alloc);
  out.emplace_back("num_device_free", num_device_free);
  out.emplace_back("num_ooms", num_ooms);
  if (version.has_oom_rejections()) out.emplace_back("num_oom_rejections", num_oom_rejections);
  out.emplace_back("num_sync_all_streams", num_sync_all_streams);
  add_stat(out, "oversize_allocations", oversize_allocations);
  add_stat(out, "oversize_segments", oversize_segments);
  add_array(out, "requested_bytes", requested_bytes);
  add_array(out, "reserved_bytes", reserved_bytes);
  if (version.has_private_pool_reserved_bytes()) {
    // memory_stats() flattens the pool's id, a tuple, as "first_second".
    for (const PrivatePoolReserved& p : reserved_bytes_by_private_pools) {
      add_array(out,
                "reserved_bytes_by_private_pools." + std::to_string(p.pool.first) + "_" +
                    std::to_string(p.pool.second),
                p.reserved_bytes);
    }
  }
  add_array(out, "segment", segment);
  std::sort(out.begin(), out.end());
  return out;
}

int64_t DeviceStats::get(const std::string& key) const {
  for (const auto& [k, v] : flatten(kNewestTorchVersion)) {
    if (k == key) return v;
  }
  throw std::out_of_range("no memory_stats key " + key);
}

}  // namespace allocsim
