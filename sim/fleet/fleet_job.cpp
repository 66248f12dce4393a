#include "sim/fleet/fleet_job.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/fleet/fleet_cache.hpp"
#include "sim/plan/plan.hpp"
#include "sim/replay/replay.hpp"
#include "sim/report/stack_site.hpp"
#include "sim/report/step_analysis.hpp"
#include "sim/trace/input_error.hpp"
#include "sim/trace/trace_file.hpp"

namespace allocsim {
namespace {

constexpr size_t kSitesPerJob = 5;

std::optional<std::string> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The OOM advisor writes oom-STAMP.pickle beside oom-STAMP.json with the limit it planned under.
std::optional<uint64_t> advisor_limit(const std::string& path) {
  const std::filesystem::path p(path);
  if (p.extension() != ".pickle" || p.stem().string().rfind("oom-", 0) != 0) return std::nullopt;
  const std::optional<std::string> text =
      read_bytes((p.parent_path() / p.stem()).string() + ".json");
  if (!text) return std::nullopt;
  const nlohmann::json advice = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!advice.is_object() || !advice.contains("limit_bytes") ||
      !advice["limit_bytes"].is_number_unsigned())
    return std::nullopt;
  return advice["limit_bytes"].get<uint64_t>();
}

PlanResult plan_settings(const Trace& trace, const FleetOptions& options,
                         std::optional<uint64_t> limit) {
  PlanOptions plan_options;
  plan_options.torch_version = options.torch_version;
  for (const std::string& text : options.alloc_confs)
    plan_options.settings.push_back(
        parse_alloc_conf(text, options.torch_version.value_or(kNewestTorchVersion)));
  if (!plan_options.settings.empty())
    plan_options.settings.insert(plan_options.settings.begin(),
                                 trace.settings.value_or(AllocConf{}));
  if (options.card_bytes) plan_options.card_bytes = options.card_bytes;
  if (options.context_bytes) plan_options.context_bytes = options.context_bytes;
  plan_options.limit_bytes = limit;
  return plan(trace, plan_options);
}

FleetDeviceRow device_row(const Trace& trace, const FleetOptions& options,
                          std::optional<uint64_t> limit) {
  ReplayOptions replay_options;
  replay_options.torch_version = options.torch_version;
  const ReplayResult replayed = replay(trace, replay_options);
  const PlanResult plans = plan_settings(trace, options, limit);
  const Plan& recorded = plans.plans.front();
  const Plan& best = plans.plans[plans.best];
  const StepAnalysis steps = analyze_steps(trace);
  FleetDeviceRow row;
  row.device = trace.device;
  row.events = trace.events.size();
  row.alloc_conf = recorded.conf.to_string();
  row.oom = ended_in_oom(trace);  // OOMs the job caught did not stop it
  row.needed_bytes = recorded.min_limit_bytes;
  row.fits = recorded.fits;
  row.margin_bytes = recorded.margin_bytes;
  row.best_alloc_conf = best.conf.to_string();
  row.best_margin_bytes = best.margin_bytes;
  row.limit_bytes = limit;
  row.peak_reserved_bytes = replayed.stats.reserved_bytes[kAggregate].peak;
  row.fragmentation = replayed.fragmentation.gmlake;
  row.reserved_unallocated_at_peak_bytes = replayed.fragmentation.reserved_unallocated_at_peak;
  row.leak = steps.growing;
  row.growth_bytes_per_step = steps.growth_bytes_per_step;
  for (const Plan& p : plans.plans)
    row.settings.push_back({p.conf.to_string(), p.min_limit_bytes, p.fits});
  if (replayed.outcome.oom) {
    for (const SiteUsage& s : sites_live_at(trace, replayed.outcome.oom->event_index, kSitesPerJob))
      row.sites_at_oom.push_back({s.site, s.bytes});
  }
  if (replayed.setup.torch_version_given || trace.torch_version) {
    row.torch_version = FleetTorchVersion{replayed.setup.torch_version.to_string(),
                                          replayed.setup.torch_version_given
                                              ? std::string("--torch-version")
                                              : "the snapshot: " + trace.torch_version_evidence};
  }
  return row;
}

void analyze_file(const std::string& path, const FleetOptions& options,
                  std::optional<uint64_t> limit, FleetJobResult& out) {
  const std::vector<Trace> traces = read_trace_file_devices(path);
  for (const Trace& trace : traces) out.devices.push_back(device_row(trace, options, limit));
  for (const Trace& trace : traces) {
    for (const std::string& w : trace.warnings) out.warnings.push_back(w);
  }
}

}  // namespace

FleetJobResult analyze_fleet_job(const std::string& path, const FleetOptions& options) {
  FleetJobResult out;
  out.file = path;
  const std::optional<std::string> bytes = read_bytes(path);
  if (!bytes) {
    out.error = path + ": cannot open";
    return out;
  }
  const std::optional<uint64_t> limit = advisor_limit(path);
  out.content_hash = fleet_job_key(path, *bytes, limit, options);
  const FleetCache cache(options.cache_dir);
  if (std::optional<FleetJobResult> kept = cache.load(out.content_hash)) {
    kept->file = out.file;
    kept->content_hash = out.content_hash;
    kept->cached = true;
    return *std::move(kept);
  }
  try {
    analyze_file(path, options, limit, out);
  } catch (const InputError& e) {
    out.error = e.what();
  } catch (const AllocConfError& e) {
    out.error = path + ": allocator settings: " + e.what();
  } catch (const std::bad_alloc&) {
    out.error = path + ": out of memory: the trace does not fit in this machine's memory";
  } catch (const std::exception& e) {
    // allocsim's own failure on this file: listed with the others, the rest go on.
    out.error = path + ": internal error: " + e.what();
  }
  if (out.error) {
    out.devices.clear();
    out.warnings.clear();
  }
  cache.store(out.content_hash, out);
  out.cached = false;
  return out;
}

}  // namespace allocsim
