// allocsim plan: the smallest memory limit a trace runs in, per allocator setting, and whether a
// card fits it.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/alloc_conf.hpp"
#include "core/format_size.hpp"
#include "sim/cli/cli_args.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/empty_cache_at.hpp"
#include "sim/cli/trace_input.hpp"
#include "sim/plan/accumulation_plan.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/rank_plan.hpp"
#include "sim/plan/sweep_plan.hpp"

namespace allocsim::cli {
namespace {

// What the reading went on past (the lines printed as warnings), once each, as `replay --json`
// lists them: a program reading the plan can tell a doubtful input.
// bad_input where a setting planned for has a key the release a trace's replay follows lacks.
int settings_known_to_all(const PlanOptions& options, const std::vector<Trace>& traces) {
  for (const Trace& trace : traces) {
    for (const AllocConf& conf : options.settings) {
      if (const int rc = settings_known_to(conf, trace, options.torch_version); rc != kExitOk)
        return rc;
    }
  }
  return kExitOk;
}

void add_warnings(nlohmann::json& json, const std::vector<Trace>& traces) {
  std::vector<std::string> warnings;
  for (const Trace& t : traces) {
    for (const std::string& w : t.warnings) {
      if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
    }
  }
  if (!warnings.empty()) json["warnings"] = warnings;
}

struct PlanArgs {
  std::vector<std::string> traces;
  std::vector<int64_t> at;  // with several traces: the value each was recorded at
  int64_t max_value = 0;    // the search's bound (0: 64 times the largest recorded value)
  bool world_size = false;  // --at are world sizes: plan the fewest ranks
  int multiprocessors = kDefaultMultiprocessors;  // sizes the reductions' staging buffers
  int64_t batch = 0;  // with --at over batch sizes: the remedies at this batch
  std::vector<std::string> alloc_confs;
  std::optional<std::string> torch_version;
  uint64_t card = kDefaultCapacityBytes;
  uint64_t context = kDefaultContextBytes;
  std::optional<uint64_t> limit;
  std::string json_out;
  std::optional<int> device;
  std::string empty_cache_at;
  std::string call_times;
};

// The JSON report where asked (with the reading's warnings), and the text unless that went to
// stdout.
int write_reports(const PlanArgs& args, nlohmann::json json, const std::string& text,
                  const std::vector<Trace>& traces) {
  if (!args.json_out.empty()) {
    add_warnings(json, traces);
    const int rc = write_text(args.json_out, json.dump(1) + "\n", "the JSON report");
    if (rc != kExitOk || args.json_out == "-") return rc;
  }
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

// The most ranks plan --world-size searches unless --max says.
constexpr int64_t kDefaultMaxRanks = 1024;

// plan TRACE... --at V1,V2,...: the largest value that fits, per setting; with --batch B, the
// remedies at B.
// How far the size model can be trusted: its check on the largest recording (fitted on the others,
// with three recordings or more) and the recordings that are windows of their runs.
nlohmann::json sweep_json(const SweepSummary& s) {
  nlohmann::json out;
  out["validation"] = nullptr;
  if (s.validation) {
    out["validation"] = {{"value", s.validation->value},
                         {"exact", s.validation->exact},
                         {"requests", s.validation->requests},
                         {"bytes_error", s.validation->bytes_error}};
  }
  out["windows"] = s.windows;
  out["cached_at_start"] = nlohmann::json::array();
  for (const auto& [value, bytes] : s.cached_at_start)
    out["cached_at_start"].push_back({{"value", value}, {"bytes", bytes}});
  out["warm_starts_differ"] = s.warm_starts_differ();
  return out;
}

int run_sweep_plan(const PlanArgs& args, PlanOptions options) {
  std::vector<Trace> traces;
  for (const std::string& path : args.traces) {
    std::vector<Trace> devices = read_traces(path, args.device);
    if (const int rc = settings_known_to_all(options, devices); rc != kExitOk) return rc;
    if (devices.size() > 1) {
      return bad_input(path + ": the file records " + std::to_string(devices.size()) +
                       " devices: pick one with --device N");
    }
    traces.push_back(std::move(devices.front()));
  }
  std::vector<const Trace*> recordings;
  recordings.reserve(traces.size());
  for (const Trace& t : traces) recordings.push_back(&t);
  if (args.world_size) {
    const WorldSizeSweep sweep(recordings, args.at);
    if (!args.alloc_confs.empty()) {
      options.settings.insert(options.settings.begin(),
                              sweep.predict(sweep.ranks().back()).settings.value_or(AllocConf{}));
    }
    const RankPlanResult result =
        plan_ranks(sweep, options,
                   args.max_value > 0 ? std::min(args.max_value, kMaxWorldSize) : kDefaultMaxRanks);
    std::fputs(sweep.summary_text().c_str(), stderr);
    return write_reports(args, rank_plan_json(result), rank_plan_text(result), traces);
  }
  const SizeSweep sweep(recordings, args.at, args.multiprocessors);
  if (!args.alloc_confs.empty()) {
    options.settings.insert(options.settings.begin(),
                            sweep.predict(sweep.values().back()).settings.value_or(AllocConf{}));
  }
  if (args.batch > 0) {
    options.step_starts = step_starts(sweep.predict(args.batch));
    const AccumulationPlan result = plan_accumulation(sweep, options, args.batch);
    std::fputs(sweep.summary_text().c_str(), stderr);
    nlohmann::json json = accumulation_plan_json(result);
    json["sweep"] = sweep_json(sweep.summary());
    return write_reports(args, std::move(json), accumulation_plan_text(result), traces);
  }
  const int64_t bound =
      args.max_value > 0 ? args.max_value : std::min(kMaxValue, 64 * sweep.values().back());
  const SweepPlanResult result = plan_sweep(sweep, options, bound);
  std::fputs(sweep.summary_text().c_str(), stderr);
  nlohmann::json json = sweep_plan_json(result);
  json["sweep"] = sweep_json(sweep.summary());
  return write_reports(args, std::move(json), sweep_plan_text(result), traces);
}

int run_plan(const PlanArgs& args) {
  PlanOptions options;
  std::optional<DeviceCallTimes> call_times;
  if (!args.call_times.empty()) {
    call_times = read_device_call_times(args.call_times);
    options.call_times = &*call_times;
  }
  for (const std::string& text : args.alloc_confs)
    options.settings.push_back(parse_alloc_conf(text, kNewestTorchVersion));
  if (args.torch_version) options.torch_version = TorchVersion::parse(*args.torch_version);
  options.card_bytes = args.card;
  options.context_bytes = args.context;
  options.limit_bytes = args.limit;
  if (isatty(STDERR_FILENO)) {
    options.progress = [](size_t done, size_t total) {
      std::fprintf(stderr, "\rplanning: %zu/%zu settings searched%s", done, total,
                   done == total ? "\n" : "");
      std::fflush(stderr);
    };
  }
  if (args.world_size && args.at.empty())
    return bad_input("plan: --world-size needs recordings at several world sizes (--at)");
  if (args.world_size && args.batch > 0)
    return bad_input("plan: --batch plans recordings at several batch sizes, not world sizes");
  if (!args.at.empty()) {
    if (!args.empty_cache_at.empty()) return bad_input("plan: --empty-cache-at plans one trace");
    return run_sweep_plan(args, options);
  }
  if (args.batch > 0)
    return bad_input("plan: --batch needs recordings at several batch sizes (--at)");
  if (args.traces.size() != 1)
    return bad_input("plan: several traces are recordings at several values: give them with --at");
  const std::string& path = args.traces.front();
  const std::vector<Trace> traces = read_traces(path, args.device);
  if (const int rc = settings_known_to_all(options, traces); rc != kExitOk) return rc;
  if (!args.alloc_confs.empty()) {
    // The recorded setting always comes first, as the baseline.
    options.settings.insert(options.settings.begin(),
                            traces.front().settings.value_or(AllocConf{}));
  }
  // Each device is planned for on its own (a card each, as the process had them).
  nlohmann::json json = nlohmann::json::array();
  std::string text;
  for (const Trace& trace : traces) {
    if (!args.empty_cache_at.empty()) {
      options.empty_cache_before = empty_cache_events(trace, args.empty_cache_at);
    } else {
      options.step_starts = step_starts(trace);  // the remedy of empty_cache() every step
    }
    const PlanResult result = plan(trace, options);
    if (traces.size() == 1) {
      json = plan_json(result);
    } else {
      nlohmann::json one = plan_json(result);
      one["device"] = trace.device;
      json.push_back(std::move(one));
      text += "== device " + std::to_string(trace.device) + " ==\n";
    }
    text += plan_text(result);
  }
  if (traces.size() > 1) json = {{"trace", path}, {"devices", std::move(json)}};
  add_warnings(json, traces);
  if (!args.json_out.empty()) {
    const int rc = write_text(args.json_out, json.dump(1) + "\n", "the JSON report");
    if (rc != kExitOk || args.json_out == "-") return rc;
  }
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* plan = app.add_subcommand("plan",
                                      "The smallest memory limit a trace runs in, for each "
                                      "allocator setting, and whether a card fits it");
  plan->add_option("traces", args->traces,
                   "snapshot from torch.cuda.memory._dump_snapshot (with --at: the recordings)")
      ->required();
  plan->add_option("--at", args->at,
                   "the value each recording was made at (V1,V2[,...]): plan the largest value "
                   "that fits")
      ->delimiter(',');
  plan->add_option("--max", args->max_value,
                   "with --at: the largest value to search (default: 64 x the largest recorded; "
                   "with --world-size, 1024 ranks)")
      ->check(CLI::Range(int64_t{1}, kMaxValue));
  plan->add_option("--multiprocessors", args->multiprocessors,
                   "with --at: the GPU's multiprocessors, where the reductions' staging buffers "
                   "stop growing (default 132: an H100's or H200's; an A100 has 108)")
      ->check(CLI::Range(1, 1 << 16));
  plan->add_flag("--world-size", args->world_size,
                 "--at are world sizes (each recording one rank of a data-parallel job at that "
                 "many ranks): plan the fewest ranks on which each rank fits");
  plan->add_option("--batch", args->batch,
                   "with --at over batch sizes: the batch the job needs; plans it with every "
                   "setting, and gradient accumulation over micro-batches of B/2, B/4, B/8")
      ->check(CLI::Range(int64_t{1}, kMaxValue));
  plan->add_option("--alloc-conf", args->alloc_confs,
                   "a PYTORCH_CUDA_ALLOC_CONF to plan for (repeatable; default: a useful set)")
      ->check(AllocConfText());
  plan->add_option("--torch-version", args->torch_version,
                   "the PyTorch release whose allocator to follow, 2.11 to 2.14 (default: the "
                   "oldest that writes the snapshot's fields, else 2.11)")
      ->check(TorchVersionText());
  CLI::Option* card_option = plan->add_option("--card", args->card, "the card to answer for")
                                 ->transform(ByteSize("24GiB", /*nonzero=*/true))
                                 ->default_str(format_size(kDefaultCapacityBytes));
  CLI::Option* context =
      plan->add_option("--context", args->context, "memory the process holds outside PyTorch")
          ->transform(ByteSize("750MiB"))
          ->default_str(format_size(kDefaultContextBytes));
  plan->add_option("--limit", args->limit,
                   "a cap on reserved memory to answer for instead of a card (as "
                   "set_per_process_memory_fraction x device sets it)")
      ->transform(ByteSize("10GiB", /*nonzero=*/true))
      ->excludes(card_option)
      ->excludes(context);
  plan->add_option(
      "--empty-cache-at", args->empty_cache_at,
      "plan with torch.cuda.empty_cache() before every step after the first (\"step\") "
      "or before the events E1,E2,...");
  plan->add_option("--call-times", args->call_times,
                   "the device call times to estimate costs with, as allocsim calibrate writes "
                   "them (default: measured on an H100)");
  plan->add_option("--json", args->json_out, "write the plans as JSON to FILE, or - for stdout");
  plan->add_option("--device", args->device,
                   "plan only for this device of a file that recorded several (default: each)")
      ->check(CLI::Range(0, 1023));
  return {plan, [args] {
            return reporting_input_errors(args->traces.front(), [&] { return run_plan(*args); });
          }};
}

}  // namespace allocsim::cli
