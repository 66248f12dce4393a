#include "sim/gpu/cuda_replay.hpp"

#include <chrono>
#include <optional>

#include "core/format_size.hpp"

namespace allocsim {
namespace {

constexpr size_t kUnmodelledKept = 8;

class PatternObserver final : public BlockObserver {
 public:
  explicit PatternObserver(BlockPattern& pattern) : pattern_(pattern) {}
  void allocated(uint64_t address, uint64_t size, uint64_t event_index) override {
    pattern_.fill(address, size, event_index);
  }
  void freeing(uint64_t address, uint64_t size, uint64_t event_index) override {
    pattern_.check(address, size, event_index);
  }

 private:
  BlockPattern& pattern_;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

CapacityModelCheck check_capacity_model(const std::vector<MemoryCharge>& charges) {
  CapacityModelCheck check;
  for (const MemoryCharge& c : charges) {
    const uint64_t modelled =
        c.map ? c.size
              : (c.size + kDriverGranularity - 1) / kDriverGranularity * kDriverGranularity;
    const bool as_modelled = c.freed_by == modelled;
    (c.map ? check.maps : check.mallocs) += 1;
    (c.map ? check.maps_as_modelled : check.mallocs_as_modelled) += as_modelled;
    if (!as_modelled && check.unmodelled.size() < kUnmodelledKept) check.unmodelled.push_back(c);
  }
  return check;
}

nlohmann::json peaks_json(const ReplayResult& r) {
  return {{"ooms", r.outcome.ooms},
          {"peak_allocated_bytes", r.stats.allocated_bytes[kAggregate].peak},
          {"peak_reserved_bytes", r.stats.reserved_bytes[kAggregate].peak},
          {"events_replayed", r.outcome.events_replayed}};
}

}  // namespace

CudaReplayComparison replay_on_cuda(const Trace& trace, ReplayOptions options,
                                    const CudaReplayOptions& cuda) {
  CudaReplayComparison out;
  CudaDevice device(cuda.device);
  device.set_measure_charges(true);
  out.device = device.info();
  // Loaded before the first measurement and the first segment (see BlockPattern).
  std::optional<BlockPattern> pattern;
  std::optional<PatternObserver> observer;
  if (cuda.check_patterns) {
    pattern.emplace();
    observer.emplace(*pattern);
  }
  out.patterns_checked = cuda.check_patterns;
  out.free_at_start = device.mem_get_info().free;
  out.capacity.context_bytes_real = out.device.total - out.free_at_start;
  out.capacity.context_bytes_model = options.context_bytes.value_or(kDefaultContextBytes);

  options.capacity = out.device.total;
  if (!options.context_bytes) options.context_bytes = out.capacity.context_bytes_real;
  ReplayOptions on_gpu = options;
  on_gpu.release_all_at_end = true;
  on_gpu.record_trace = false;
  on_gpu.record_timeline = false;
  auto start = std::chrono::steady_clock::now();
  out.gpu = replay_on(device, trace, on_gpu, observer ? &*observer : nullptr);
  if (pattern) out.patterns = pattern->collect();
  out.gpu_seconds = seconds_since(start);
  out.free_at_end = device.mem_get_info().free;
  out.segments_left = device.live_segments() + device.live_pages();
  out.capacity = [&] {
    CapacityModelCheck c = check_capacity_model(device.charges());
    c.context_bytes_real = out.capacity.context_bytes_real;
    c.context_bytes_model = out.capacity.context_bytes_model;
    return c;
  }();

  start = std::chrono::steady_clock::now();
  ReplayOptions on_gpu_addresses = options;
  on_gpu_addresses.segment_addresses.emplace();
  for (const DeviceOp& op : out.gpu.device_ops) {
    if (op.kind == DeviceOpKind::kSegmentAlloc)
      on_gpu_addresses.segment_addresses->push_back({op.address, op.size});
  }
  on_gpu_addresses.reservation_addresses = device.reservations();
  out.simulated = replay(trace, on_gpu_addresses);
  out.simulated_seconds = seconds_since(start);
  out.ops = compare_device_ops(out.simulated.device_ops, out.gpu.device_ops);

  ReplayOptions as_users_run_it = options;
  as_users_run_it.record_device_ops = true;
  const ReplayResult on_trace = replay(trace, as_users_run_it);
  out.ops_on_trace_addresses = compare_device_ops(on_trace.device_ops, out.gpu.device_ops);
  out.ooms_on_trace_addresses = on_trace.outcome.ooms;
  return out;
}

nlohmann::json cuda_replay_json(const CudaReplayComparison& c) {
  nlohmann::json ops = {{"gpu", c.ops.right_count},
                        {"simulated", c.ops.left_count},
                        {"identical", c.ops.identical()},
                        {"same_addresses", c.ops.same_addresses},
                        {"first_difference", nullptr}};
  if (c.ops.first_difference) {
    const uint64_t i = *c.ops.first_difference;
    ops["first_difference"] = i;
    ops["gpu_op"] = i < c.gpu.device_ops.size() ? describe(c.gpu.device_ops[i]) : "(none)";
    ops["simulated_op"] =
        i < c.simulated.device_ops.size() ? describe(c.simulated.device_ops[i]) : "(none)";
  }
  nlohmann::json unmodelled = nlohmann::json::array();
  for (const MemoryCharge& m : c.capacity.unmodelled) {
    unmodelled.push_back({{"call", m.map ? "map" : "cudaMalloc"},
                          {"size", m.size},
                          {"free_dropped_by", m.freed_by}});
  }
  return {{"confirmed", c.confirmed()},
          {"device",
           {{"ordinal", c.device.ordinal},
            {"name", c.device.name},
            {"driver_version", c.device.driver_version},
            {"runtime_version", c.device.runtime_version},
            {"total_bytes", c.device.total}}},
          {"device_ops", ops},
          {"on_trace_addresses",
           {{"device_ops_identical", c.ops_on_trace_addresses.identical()},
            {"first_difference", c.ops_on_trace_addresses.first_difference
                                     ? nlohmann::json(*c.ops_on_trace_addresses.first_difference)
                                     : nlohmann::json(nullptr)},
            {"simulated_device_ops", c.ops_on_trace_addresses.left_count},
            {"ooms", c.ooms_on_trace_addresses}}},
          {"verdicts_equal", c.verdicts_equal()},
          {"gpu", peaks_json(c.gpu)},
          {"simulated", peaks_json(c.simulated)},
          {"patterns",
           c.patterns_checked
               ? nlohmann::json{{"fills", c.patterns.fills},
                                {"checks", c.patterns.checks},
                                {"bytes_written", c.patterns.bytes_written},
                                {"bad_words", c.patterns.bad_words},
                                {"first_bad_event", c.patterns.bad_words
                                                        ? nlohmann::json(c.patterns.first_bad_tag)
                                                        : nlohmann::json(nullptr)}}
               : nlohmann::json(nullptr)},
          {"leak",
           {{"free_at_start", c.free_at_start},
            {"free_at_end", c.free_at_end},
            {"segments_left", c.segments_left},
            {"leaked", c.leaked()}}},
          {"capacity_model",
           {{"context_bytes_real", c.capacity.context_bytes_real},
            {"context_bytes_model", c.capacity.context_bytes_model},
            {"mallocs", c.capacity.mallocs},
            {"mallocs_as_modelled", c.capacity.mallocs_as_modelled},
            {"maps", c.capacity.maps},
            {"maps_as_modelled", c.capacity.maps_as_modelled},
            {"unmodelled", unmodelled}}},
          {"seconds", {{"gpu", c.gpu_seconds}, {"simulated", c.simulated_seconds}}}};
}

std::string cuda_replay_text(const CudaReplayComparison& c) {
  std::string t = "\nGPU confirmation on " + c.device.name + " (device " +
                  std::to_string(c.device.ordinal) + ", driver " +
                  std::to_string(c.device.driver_version) +
                  "): " + (c.confirmed() ? "CONFIRMED" : "DIFFERS") + "\n";
  t += "  device operations: " + std::to_string(c.ops.right_count) + " on the GPU, " +
       std::to_string(c.ops.left_count) + " simulated, ";
  if (c.ops.identical()) {
    t += "identical (" + std::to_string(c.ops.same_addresses) + " at the same address)\n";
  } else {
    const uint64_t i = *c.ops.first_difference;
    t += "first difference at #" + std::to_string(i) + ": GPU " +
         (i < c.gpu.device_ops.size() ? describe(c.gpu.device_ops[i]) : "(none)") + ", simulated " +
         (i < c.simulated.device_ops.size() ? describe(c.simulated.device_ops[i]) : "(none)") +
         "\n";
  }
  t += "  on the trace's own addresses the simulation ";
  t += c.ops_on_trace_addresses.identical()
           ? "makes the same operations too\n"
           : "differs from operation #" +
                 std::to_string(*c.ops_on_trace_addresses.first_difference) +
                 " (this GPU placed segments elsewhere; best fit breaks ties by address)\n";
  t += "  verdict: " + std::to_string(c.gpu.outcome.ooms) + " OOMs on the GPU, " +
       std::to_string(c.simulated.outcome.ooms) + " simulated\n";
  t += "  peaks: allocated " + format_size(c.gpu.stats.allocated_bytes[kAggregate].peak) + " / " +
       format_size(c.simulated.stats.allocated_bytes[kAggregate].peak) + ", reserved " +
       format_size(c.gpu.stats.reserved_bytes[kAggregate].peak) + " / " +
       format_size(c.simulated.stats.reserved_bytes[kAggregate].peak) + " (GPU / simulated)\n";
  if (c.patterns_checked) {
    t += "  patterns: " + std::to_string(c.patterns.fills) + " blocks written (" +
         format_size(c.patterns.bytes_written) + "), " + std::to_string(c.patterns.checks) +
         " checked, " + std::to_string(c.patterns.bad_words) + " bad words";
    if (c.patterns.bad_words)
      t += " (first in the block of event " + std::to_string(c.patterns.first_bad_tag) + ")";
    t += "\n";
  }
  t += "  leak check: free " + std::to_string(c.free_at_start) + " bytes before, " +
       std::to_string(c.free_at_end) + " after empty_cache; " + std::to_string(c.segments_left) +
       " segments or pages left" + (c.leaked() ? " (LEAK)" : "") + "\n";
  t += "  capacity model: context " + format_size(c.capacity.context_bytes_real) + " real vs " +
       format_size(c.capacity.context_bytes_model) + " modelled; " +
       std::to_string(c.capacity.mallocs_as_modelled) + "/" + std::to_string(c.capacity.mallocs) +
       " cudaMallocs and " + std::to_string(c.capacity.maps_as_modelled) + "/" +
       std::to_string(c.capacity.maps) + " maps took what the 2 MiB granularity model says\n";
  char times[96];
  std::snprintf(times, sizeof times, "  time: %.2f s on the GPU, %.2f s simulated\n", c.gpu_seconds,
                c.simulated_seconds);
  return t + times;
}

}  // namespace allocsim
