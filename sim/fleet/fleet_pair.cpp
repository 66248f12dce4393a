#include "sim/fleet/fleet_pair.hpp"

#include "sim/diff/run_diff.hpp"
#include "sim/trace/input_error.hpp"
#include "sim/trace/trace_file.hpp"

namespace allocsim {
namespace {

constexpr size_t kGroupsPerPair = 3;

FleetPairRow pair_row(const Trace& a, const Trace& b, const FleetOptions& options) {
  DiffOptions diff_options;
  if (options.card_bytes) diff_options.replay.capacity = options.card_bytes;
  diff_options.replay.capacity_from_layout = options.card_bytes == 0;
  if (options.context_bytes) diff_options.replay.context_bytes = options.context_bytes;
  diff_options.replay.torch_version = options.torch_version;
  const RunDiff d = diff_runs(a, b, diff_options);
  FleetPairRow row;
  row.device = a.device;
  row.peak_reserved_a = d.peak_reserved.a;
  row.peak_reserved_b = d.peak_reserved.b;
  row.program = d.peak_reserved.program();
  row.allocator = d.peak_reserved.allocator();
  row.same_allocator = d.same_allocator;
  for (const DiffGroup& g : d.groups) {
    if (row.top_groups.size() == kGroupsPerPair || g.delta_at_peak() == 0) break;
    row.top_groups.push_back({g.label, g.delta_at_peak()});
  }
  return row;
}

}  // namespace

FleetPairResult analyze_fleet_pair(const std::string& a, const std::string& b,
                                   const FleetOptions& options) {
  FleetPairResult out{a, b, {}, std::nullopt};
  try {
    const std::vector<Trace> ta = read_trace_file_devices(a), tb = read_trace_file_devices(b);
    for (const Trace& x : ta) {
      for (const Trace& y : tb) {
        if (x.device == y.device) out.devices.push_back(pair_row(x, y, options));
      }
    }
    if (out.devices.empty()) out.error = b + ": records none of the devices " + a + " records";
  } catch (const InputError& e) {
    out.error = e.what();
  } catch (const AllocConfError& e) {
    out.error = a + " against " + b + ": allocator settings: " + e.what();
  } catch (const std::bad_alloc&) {
    out.error =
        a + " against " + b + ": out of memory: the traces do not fit in this machine's memory";
  }
  return out;
}

nlohmann::json fleet_pair_json(const FleetPairResult& pair) {
  nlohmann::json out = {{"a", pair.a}, {"b", pair.b}};
  if (pair.error) {
    out["error"] = *pair.error;
    return out;
  }
  nlohmann::json devices = nlohmann::json::array();
  for (const FleetPairRow& r : pair.devices) {
    nlohmann::json groups = nlohmann::json::array();
    for (const FleetPairGroup& g : r.top_groups)
      groups.push_back({{"label", g.label}, {"delta_at_peak", g.delta_at_peak}});
    devices.push_back({{"device", r.device},
                       {"peak_reserved_a", r.peak_reserved_a},
                       {"peak_reserved_b", r.peak_reserved_b},
                       {"difference", r.peak_reserved_b - r.peak_reserved_a},
                       {"program", r.program},
                       {"allocator", r.allocator},
                       {"same_allocator", r.same_allocator},
                       {"top_groups", std::move(groups)}});
  }
  out["devices"] = std::move(devices);
  return out;
}

}  // namespace allocsim
