#include "sim/fleet/fleet_job.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "sim/plan/plan.hpp"
#include "sim/replay/replay.hpp"
#include "sim/report/replay_report.hpp"
#include "sim/trace/input_error.hpp"
#include "sim/trace/trace_file.hpp"

namespace allocsim {
namespace {

using nlohmann::json;

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
  const json advice = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!advice.is_object() || !advice.contains("limit_bytes") ||
      !advice["limit_bytes"].is_number_unsigned())
    return std::nullopt;
  return advice["limit_bytes"].get<uint64_t>();
}

json device_row(const Trace& trace, const FleetOptions& options, std::optional<uint64_t> limit) {
  ReplayOptions replay_options;
  replay_options.torch_version = options.torch_version;
  const ReplayResult replayed = replay(trace, replay_options);
  const json report = replay_report_json(trace, replayed);
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
  const PlanResult plans = plan(trace, plan_options);
  const Plan& recorded = plans.plans.front();
  const Plan& best = plans.plans[plans.best];
  json settings = json::array();
  for (const Plan& p : plans.plans) {
    settings.push_back({{"alloc_conf", p.conf.to_string()},
                        {"min_limit_bytes", p.min_limit_bytes},
                        {"fits", p.fits}});
  }
  json sites = json::array();
  for (const json& s : report["sites"]["at_oom"]) {
    if (sites.size() == kSitesPerJob) break;
    sites.push_back({{"site", s.value("site", "")}, {"bytes", s.value("bytes", uint64_t{0})}});
  }
  const json& frag = report["fragmentation"];
  json row = {{"device", trace.device},
              {"events", trace.events.size()},
              {"alloc_conf", recorded.conf.to_string()},
              {"oom", report["recorded_ooms"].get<uint64_t>() > 0},
              {"needed_bytes", recorded.min_limit_bytes},
              {"fits", recorded.fits},
              {"margin_bytes", recorded.margin_bytes},
              {"best_alloc_conf", best.conf.to_string()},
              {"best_margin_bytes", best.margin_bytes},
              {"limit_bytes", limit ? json(*limit) : json(nullptr)},
              {"peak_reserved_bytes", report["memory_stats"]["reserved_bytes.all.peak"]},
              {"fragmentation", frag["gmlake_1_minus_peak_active_over_peak_reserved"]},
              {"reserved_unallocated_at_peak_bytes", frag["reserved_unallocated_at_peak"]},
              {"leak", report["steps"]["growing"]},
              {"growth_bytes_per_step", report["steps"]["growth_bytes_per_step"]},
              {"settings", settings},
              {"sites_at_oom", sites}};
  // The release the replays followed, where it is not the default (as replay's report names it).
  if (report.contains("torch_version")) row["torch_version"] = report["torch_version"];
  return row;
}

json analyze_file(const std::string& path, const FleetOptions& options) {
  const std::vector<Trace> traces = read_trace_file_devices(path);
  const std::optional<uint64_t> limit = advisor_limit(path);
  json devices = json::array();
  for (const Trace& trace : traces) devices.push_back(device_row(trace, options, limit));
  json warnings = json::array();
  for (const Trace& trace : traces) {
    for (const std::string& w : trace.warnings) warnings.push_back(w);
  }
  return {{"devices", devices}, {"warnings", warnings}};
}

}  // namespace

std::string fleet_job_key(const std::string& path, const std::string& content,
                          const FleetOptions& options) {
  // The path too: the result names it, and an advisor's snapshot is planned under the limit of
  // the JSON beside it.
  const std::optional<uint64_t> limit = advisor_limit(path);
  std::string salt = path + "|" + (limit ? std::to_string(*limit) : "-") + "|" +
                     std::to_string(options.card_bytes) + "|" +
                     std::to_string(options.context_bytes) + "|" +
                     (options.torch_version ? options.torch_version->to_string() : "-") +
                     "|" ALLOCSIM_FLEET_VERSION;
  for (const std::string& c : options.alloc_confs) salt += "|" + c;
  const XXH128_hash_t h =
      XXH3_128bits_withSeed(content.data(), content.size(), XXH3_64bits(salt.data(), salt.size()));
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return hex;
}

json analyze_fleet_job(const std::string& path, const FleetOptions& options) {
  json out = {{"file", path}};
  const std::optional<std::string> bytes = read_bytes(path);
  if (!bytes) {
    out["error"] = path + ": cannot open";
    return out;
  }
  const std::string key = fleet_job_key(path, *bytes, options);
  out["content_hash"] = key;
  const std::string cached =
      options.cache_dir.empty() ? "" : options.cache_dir + "/" + key + ".json";
  if (!cached.empty()) {
    if (const std::optional<std::string> text = read_bytes(cached)) {
      json result = json::parse(*text, nullptr, /*allow_exceptions=*/false);
      if (result.is_object() && (result.contains("devices") || result.contains("error"))) {
        for (auto& [k, v] : result.items()) out[k] = v;
        out["cached"] = true;
        return out;
      }
    }
  }
  json result;
  try {
    result = analyze_file(path, options);
  } catch (const InputError& e) {
    result = {{"error", e.what()}};
  } catch (const AllocConfError& e) {
    result = {{"error", path + ": allocator settings: " + e.what()}};
  } catch (const std::bad_alloc&) {
    result = {{"error", path + ": out of memory: the trace does not fit in this machine's memory"}};
  } catch (const std::exception& e) {
    // allocsim's own failure on this file: listed with the others, the rest go on.
    result = {{"error", path + ": internal error: " + e.what()}};
  }
  if (!cached.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.cache_dir, ec);
    const std::string tmp =
        cached + ".tmp" + std::to_string(getpid()) + "-" +
        std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
    std::ofstream(tmp) << result.dump() << "\n";
    std::filesystem::rename(tmp, cached, ec);  // whole or not at all, whatever runs beside
  }
  for (auto& [k, v] : result.items()) out[k] = v;
  out["cached"] = false;
  return out;
}

}  // namespace allocsim
