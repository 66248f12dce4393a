// allocsim replay: a trace on a simulated device (or, with --backend cuda, on a real GPU too),
// reported as text, JSON, a snapshot and timelines.
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/alloc_conf.hpp"
#include "core/format_size.hpp"
#include "sim/cli/cli_args.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/empty_cache_at.hpp"
#include "sim/cli/trace_input.hpp"
#include "sim/replay/replay.hpp"
#include "sim/replay/streamed_replay.hpp"
#include "sim/report/replay_report.hpp"
#include "sim/report/replay_warnings.hpp"
#include "sim/report/snapshot_writer.hpp"
#include "sim/report/timeline_html.hpp"
#include "sim/report/timeline_moments.hpp"
#include "sim/report/timeline_svg.hpp"
#ifdef ALLOCSIM_HAVE_CUDA
#include "sim/gpu/cuda_replay.hpp"
#endif

namespace allocsim::cli {
namespace {

struct ReplayArgs {
  std::string trace;
  std::optional<std::string> alloc_conf;
  std::optional<std::string> torch_version;
  uint64_t capacity = kDefaultCapacityBytes;
  bool capacity_given = false;
  std::optional<uint64_t> context;
  double memory_fraction = -1;
  std::optional<uint64_t> memory_limit;
  bool replace_recorded_caps = false;
  std::string backend = "sim";
  std::optional<int> device;
  bool no_pattern_check = false;
  std::string json_out;
  std::string snapshot_out;
  std::string timeline_out;
  std::string compare_alloc_conf;
  std::vector<uint64_t> timeline_at;
  size_t timeline_moments = 16;
  std::string on_oom = "stop";
  std::string empty_cache_at;
  std::string segment_addresses_of;
  bool no_recorded_addresses = false;
  bool no_caching = false;
  bool check_invariants = false;
  bool quiet = false;
};

// The addresses another recording's segment_allocs got, in order, on `device`.
// The addresses the run in `path` gave the segments and reservations of `device`.
RunAddresses addresses_of(const std::string& path, int device, uint64_t capacity) {
  for (const Trace& t : read_traces(path, std::nullopt)) {
    if (t.device == device) return run_addresses(t, capacity);
  }
  return {};
}

ReplayOptions replay_options(const ReplayArgs& args) {
  ReplayOptions options;
  // Read with every key a known release accepts; the release replayed is checked once known.
  if (args.alloc_conf) options.alloc_conf = parse_alloc_conf(*args.alloc_conf, kNewestTorchVersion);
  if (args.torch_version) options.torch_version = TorchVersion::parse(*args.torch_version);
  options.capacity = args.capacity;
  options.capacity_from_layout = !args.capacity_given;
  options.context_bytes = args.context;
  if (args.memory_fraction >= 0) options.memory_fraction = args.memory_fraction;
  options.memory_limit = args.memory_limit;
  options.replace_recorded_caps = args.replace_recorded_caps;
  options.on_oom = args.on_oom == "continue" ? OnOom::kContinue : OnOom::kStop;
  options.use_recorded_addresses = !args.no_recorded_addresses;
  options.no_caching = args.no_caching;
  options.check_invariants = args.check_invariants;
  options.record_trace = !args.snapshot_out.empty();
  options.record_timeline = !args.timeline_out.empty();
  return options;
}

// The same replay on a real GPU, compared with the simulated one.
int run_replay_on_cuda(const ReplayArgs& args, const ReplayOptions& options) {
  if (!args.snapshot_out.empty() || !args.timeline_out.empty()) {
    return bad_input("--backend cuda writes the report only (no --snapshot-out / --timeline-out)");
  }
  if (args.capacity_given) {
    return bad_input(
        "--capacity does not apply to --backend cuda (the GPU has its own memory); cap the "
        "allocator with --memory-limit or --memory-fraction");
  }
#ifdef ALLOCSIM_HAVE_CUDA
  // A file of one device runs on --device (default 0); of several, --device picks the recorded
  // device and the CUDA device it runs on.
  std::vector<Trace> traces = read_traces(args.trace, std::nullopt);
  if (traces.size() > 1) {
    if (!args.device) {
      return bad_input(args.trace + ": --backend cuda replays one device; the file records " +
                       std::to_string(traces.size()) + ": pick one with --device N");
    }
    traces = pick_device(std::move(traces), *args.device, args.trace);
  }
  const Trace& trace = traces.front();
  const int ordinal = args.device.value_or(0);
  std::string why;
  if (cuda_device_count(&why) <= ordinal) {
    std::fprintf(stderr, "allocsim: error: --backend cuda: no CUDA device %d (%s)\n", ordinal,
                 why.empty() ? "fewer devices" : why.c_str());
    return kExitDeviceError;
  }
  try {
    const CudaReplayComparison c =
        replay_on_cuda(trace, options, {ordinal, !args.no_pattern_check});
    if (!args.json_out.empty()) {
      nlohmann::json report = replay_report_json(trace, c.gpu);
      report["cuda"] = cuda_replay_json(c);
      const int rc =
          write_text(args.json_out,
                     report.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                     "the JSON report");
      if (rc != kExitOk) return rc;
    }
    if (!args.quiet && args.json_out != "-") {
      std::fputs((replay_report_text(trace, c.gpu) + cuda_replay_text(c)).c_str(), stdout);
    }
    if (!c.confirmed()) return kExitGpuDiffers;
    return c.gpu.outcome.fatal_ooms() > 0 ? kExitOom : kExitOk;
  } catch (const CudaError& e) {
    print_error(e.what());
    return kExitDeviceError;
  }
#else
  (void)options;
  return bad_input(
      "--backend cuda: this allocsim was built without CUDA (configure with -DALLOCSIM_CUDA=ON)");
#endif
}

// The timeline picture (SVG) or page (.html) of each device's replay, with `compare`'s replay
// below it. A page shows the segments at some moments of each run: the run is replayed again to
// keep them (the peaks are known only once it has run).
std::string timeline(const ReplayArgs& args, std::span<const DeviceReplay> devices,
                     const ReplayOptions& options, const std::optional<AllocConf>& compare) {
  const auto title = [&](const Trace& trace, const AllocConf& c) {
    const std::string name = args.trace.substr(args.trace.find_last_of('/') + 1);
    const std::string device = devices.size() > 1 ? " device " + std::to_string(trace.device) : "";
    return name + device + " on " + format_size(options.capacity) +
           ", PYTORCH_CUDA_ALLOC_CONF=" + (c.to_string().empty() ? "(defaults)" : c.to_string());
  };
  const bool html = html_name(args.timeline_out);
  std::vector<TimelineRun> runs;
  std::vector<ReplayResult> others;
  others.reserve(devices.size() * 3);  // the runs point into it
  const auto add_run = [&](const Trace& trace, const ReplayResult& first, ReplayOptions o) {
    const ReplayResult* result = &first;
    std::vector<TimelineMoment> moments;
    if (html) {
      moments = timeline_moments(first, args.timeline_moments, args.timeline_at);
      for (uint64_t event : args.timeline_at) {
        if (first.outcome.stopped_at_oom && first.outcome.oom &&
            event > first.outcome.oom->event_index) {
          print_warning("--timeline-at " + std::to_string(event) + ": the replay under " +
                        title(trace, first.setup.conf) + " stopped at the OOM at event " +
                        std::to_string(first.outcome.oom->event_index) + "; no segment map there");
        }
      }
      o.record_trace = false;
      o.segment_maps_at = moment_events(moments);
      others.push_back(replay(trace, o));
      result = &others.back();
    }
    runs.push_back({title(trace, result->setup.conf), result, &trace, std::move(moments)});
  };
  for (const DeviceReplay& d : devices) {
    add_run(d.trace, d.result, options);
    if (compare) {
      ReplayOptions o = options;
      o.alloc_conf = compare;
      o.record_trace = false;
      others.push_back(replay(d.trace, o));
      add_run(d.trace, others.back(), o);
    }
  }
  return html ? timeline_html(runs) : timeline_svg(runs);
}

int run_replay(const ReplayArgs& args) {
  const ReplayOptions options = replay_options(args);
  std::optional<AllocConf> compare;
  if (!args.compare_alloc_conf.empty()) {
    compare = parse_alloc_conf(args.compare_alloc_conf, kNewestTorchVersion);
    if (args.timeline_out.empty()) return bad_input("--compare-alloc-conf needs --timeline-out");
  }
  if (!args.timeline_at.empty() && !html_name(args.timeline_out))
    return bad_input("--timeline-at needs --timeline-out with a .html name (a page)");
  if (args.backend == "cuda") return run_replay_on_cuda(args, options);

  // The replay runs alongside the decoding where it can; the result is the same either way.
  std::optional<StreamedReplay> streamed;
  if (StreamedReplay::supports(options) && args.empty_cache_at.empty() &&
      args.segment_addresses_of.empty())
    streamed.emplace(options, args.trace);
  const std::vector<Trace> traces =
      read_traces(args.trace, args.device, streamed ? &streamed->feed() : nullptr, options);
  for (const Trace& trace : traces) {
    for (const std::optional<AllocConf>& conf : {options.alloc_conf, compare}) {
      if (!conf) continue;
      if (const int rc = settings_known_to(*conf, trace, options.torch_version); rc != kExitOk) {
        streamed.reset();  // its thread reads the traces' events: ended before they go
        return rc;
      }
    }
  }
  // Each device on its own allocator and simulated device, as the process had them.
  std::vector<ReplayResult> results;
  results.reserve(traces.size());
  for (const Trace& trace : traces) {
    if (streamed && results.empty()) {
      results.push_back(streamed->finish(trace));
      continue;
    }
    ReplayOptions o = options;
    if (!args.empty_cache_at.empty())
      o.empty_cache_before = empty_cache_events(trace, args.empty_cache_at);
    if (!args.segment_addresses_of.empty()) {
      RunAddresses run = addresses_of(args.segment_addresses_of, trace.device, o.capacity);
      o.segment_addresses = std::move(run.segments);
      o.reservation_addresses = std::move(run.reservations);
    }
    results.push_back(replay(trace, o));
    if (!o.empty_cache_before.empty()) {  // their cost: the device calls beyond the run without
      ReplayOptions plain = options;
      plain.record_trace = plain.record_timeline = false;
      const DeviceStats& with = results.back().stats;
      const DeviceStats without = replay(trace, plain).stats;
      results.back().outcome.added_device_calls = {with.num_device_alloc - without.num_device_alloc,
                                                   with.num_device_free - without.num_device_free};
    }
  }
  for (const Trace& trace : traces) {
    for (uint64_t event : args.timeline_at) {
      if (event >= trace.events.size()) {
        return bad_input("--timeline-at " + std::to_string(event) + ": " + trace.source + " has " +
                         std::to_string(trace.events.size()) + " events");
      }
    }
  }
  std::vector<DeviceReplay> devices;
  bool oom = false;
  for (size_t i = 0; i < traces.size(); ++i) {
    devices.push_back({traces[i], results[i]});
    oom = oom || results[i].outcome.fatal_ooms() > 0;  // caught ones did not end the job
    for (const std::string& w : replay_warnings(traces[i], results[i])) print_warning(w);
  }
  if (!args.json_out.empty()) {
    const int rc = write_text(args.json_out, replay_report_json_text(devices), "the JSON report");
    if (rc != kExitOk) return rc;
  }
  if (!args.timeline_out.empty()) {
    const int rc =
        write_file(args.timeline_out, timeline(args, devices, options, compare), "the timeline");
    if (rc != kExitOk) return rc;
  }
  if (!args.snapshot_out.empty()) {
    const int rc = write_file(args.snapshot_out, snapshot_pickle(devices), "the snapshot");
    if (rc != kExitOk) return rc;
  }
  if (!args.quiet && args.json_out != "-") std::fputs(replay_report_text(devices).c_str(), stdout);
  return oom ? kExitOom : kExitOk;
}

}  // namespace

Command add_replay_command(CLI::App& app) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* replay = app.add_subcommand(
      "replay", "Replay a PyTorch memory snapshot (.pickle[.gz]) or an RMM log (.csv[.gz])");
  replay->add_option("trace", args->trace, "snapshot from torch.cuda.memory._dump_snapshot")
      ->required();
  replay
      ->add_option("--alloc-conf", args->alloc_conf,
                   "PYTORCH_CUDA_ALLOC_CONF to use instead of the recorded settings (a what-if)")
      ->check(AllocConfText());
  replay
      ->add_option("--torch-version", args->torch_version,
                   "the PyTorch release whose allocator to follow, 2.11 to 2.14 (default: the "
                   "oldest that writes the snapshot's fields, else 2.11)")
      ->check(TorchVersionText());
  CLI::Option* capacity =
      replay
          ->add_option("--capacity", args->capacity, "device memory: 24GiB, 80GB, 512MiB or bytes")
          ->transform(ByteSize("24GiB, 80GB, 512MiB", /*nonzero=*/true))
          ->default_str(format_size(kDefaultCapacityBytes));
  replay
      ->add_option("--context", args->context,
                   "memory the process holds outside PyTorch (default " +
                       format_size(kDefaultContextBytes) + ", or what a recorded OOM shows)")
      ->transform(ByteSize("750MiB"));
  replay
      ->add_option("--memory-fraction", args->memory_fraction,
                   "as torch.cuda.set_per_process_memory_fraction(F) on this device")
      ->check(CLI::Range(0.0, 1.0));
  replay
      ->add_option("--memory-limit", args->memory_limit,
                   "the same cap in bytes the allocator may reserve (overrides the fraction)")
      ->transform(ByteSize("10GiB"));
  replay->add_flag("--replace-recorded-caps", args->replace_recorded_caps,
                   "with --memory-fraction/--memory-limit on a trace allocsim's recorder marked: "
                   "the cap given holds for the whole run, the run's own cap changes left out "
                   "(without it, the cap given is the starting cap and the changes follow)");
  replay->add_option("--json", args->json_out, "write the JSON report to FILE, or - for stdout");
  replay
      ->add_option("--backend", args->backend,
                   "sim: a simulated device; cuda: replay on a real GPU too and compare")
      ->check(CLI::IsMember({"sim", "cuda"}))
      ->capture_default_str();
  replay
      ->add_option("--device", args->device,
                   "replay only this device of a file that recorded several (default: each); "
                   "with --backend cuda also the CUDA device ordinal (default 0)")
      ->check(CLI::Range(0, 1023));
  replay->add_flag("--no-pattern-check", args->no_pattern_check,
                   "with --backend cuda: do not write and check every block's bytes");
  replay
      ->add_option("--on-oom", args->on_oom,
                   "stop at the first OOM the real run did not have, or continue")
      ->check(CLI::IsMember({"stop", "continue"}))
      ->capture_default_str();
  replay->add_option("--empty-cache-at", args->empty_cache_at,
                     "a what-if: torch.cuda.empty_cache() before every step after the first "
                     "(\"step\") or before the events E1,E2,...");
  replay->add_option(
      "--snapshot-out", args->snapshot_out,
      "write the simulated run as a PyTorch memory snapshot (open it at pytorch.org/memory_viz)");
  replay->add_option("--timeline-out", args->timeline_out,
                     "draw allocated, active and reserved memory over the trace: an SVG picture, "
                     "or with a .html name a page that zooms to single events and shows the "
                     "segments and blocks at the peaks, the OOM and evenly spaced events");
  replay
      ->add_option("--timeline-at", args->timeline_at,
                   "with a .html --timeline-out: also keep the segment map after these trace "
                   "events (E1,E2,...)")
      ->delimiter(',');
  replay
      ->add_option("--timeline-moments", args->timeline_moments,
                   "with a .html --timeline-out: how many evenly spaced segment maps to keep, "
                   "beside the peaks and the OOM")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  replay
      ->add_option(
          "--compare-alloc-conf", args->compare_alloc_conf,
          "with --timeline-out: also replay under this PYTORCH_CUDA_ALLOC_CONF and draw it below")
      ->check(AllocConfText());
  replay->add_flag("--no-recorded-addresses", args->no_recorded_addresses,
                   "place segments with the address model even where the trace recorded addresses");
  replay->add_option("--segment-addresses-of", args->segment_addresses_of,
                     "a what-if checked against a real run of it: new segments and expandable "
                     "segments' reservations get the addresses that run's driver gave its own, in "
                     "order (a trace of the same job)");
  replay->add_flag("--no-caching", args->no_caching, "as PYTORCH_NO_CUDA_MEMORY_CACHING=1");
  replay->add_flag("--check-invariants", args->check_invariants,
                   "check the allocator's invariants after every event");
  replay->add_flag("-q,--quiet", args->quiet, "no human report on stdout");
  return {replay, [args, capacity] {
            args->capacity_given = capacity->count() > 0;
            return reporting_input_errors(args->trace, [&] { return run_replay(*args); });
          }};
}

}  // namespace allocsim::cli
