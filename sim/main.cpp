// allocsim: the command line. Exit status 0 ran clean, 3 hit an OOM, 2 bad usage or input,
// 4 a GPU replay (--backend cuda) differed from the simulation, 1 the GPU failed.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <new>
#include <optional>

#include "core/alloc_conf.hpp"
#include "core/format_size.hpp"
#include "sim/byte_size.hpp"
#include "sim/compact_trace.hpp"
#include "sim/input_error.hpp"
#include "sim/plan.hpp"
#include "sim/replay.hpp"
#include "sim/replay_report.hpp"
#include "sim/snapshot_writer.hpp"
#include "sim/streamed_replay.hpp"
#include "sim/timeline_html.hpp"
#include "sim/timeline_svg.hpp"
#include "sim/trace_file.hpp"
#ifdef ALLOCSIM_HAVE_CUDA
#include "sim/cuda_replay.hpp"
#endif

namespace {

constexpr int kExitOk = 0;
constexpr int kExitOutOfHostMemory = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitOom = 3;
constexpr int kExitInternalError = 5;
#ifdef ALLOCSIM_HAVE_CUDA
constexpr int kExitGpuDiffers = 4;
constexpr int kExitDeviceError = 1;
#endif

// The error line, kept to one line whatever it quotes from the input: control characters (a
// newline in a recorded setting, say) are written as escapes.
void print_error(const std::string& message) {
  std::string line = "allocsim: error: ";
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      line += "\\n";
    } else if (c == '\t') {
      line += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", u);
      line += escaped;
    } else {
      line += c;
    }
  }
  line += '\n';
  std::fputs(line.c_str(), stderr);
}

int bad_input(const std::string& message) {
  print_error(message);
  return kExitBadInput;
}

struct ReplayArgs {
  std::string trace;
  std::string alloc_conf;
  bool has_alloc_conf = false;
  std::string capacity = "80GiB";
  std::string context;
  double memory_fraction = -1;
  std::string memory_limit;
  std::string backend = "sim";
  int device = 0;
  bool no_pattern_check = false;
  bool capacity_given = false;
  std::string json_out;
  std::string snapshot_out;
  std::string timeline_out;
  std::string compare_alloc_conf;
  std::string on_oom = "stop";
  bool no_recorded_addresses = false;
  bool no_caching = false;
  bool check_invariants = false;
  bool quiet = false;
};

int write_file(const std::string& path, const std::string& bytes, const std::string& what) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  return out ? kExitOk : bad_input(path + ": cannot write " + what);
}

// A report to FILE, or to stdout for "-".
int write_text(const std::string& path, const std::string& text, const std::string& what) {
  if (path != "-") return write_file(path, text, what);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return kExitOk;
}

// The same replay on a real GPU, compared with the simulated one.
int run_replay_on_cuda(const ReplayArgs& args, allocsim::ReplayOptions options) {
  using namespace allocsim;
  if (!args.snapshot_out.empty() || !args.timeline_out.empty()) {
    return bad_input("--backend cuda writes the report only (no --snapshot-out / --timeline-out)");
  }
  if (args.capacity_given) {
    return bad_input(
        "--capacity does not apply to --backend cuda (the GPU has its own memory); cap the "
        "allocator with --memory-limit or --memory-fraction");
  }
#ifdef ALLOCSIM_HAVE_CUDA
  std::string why;
  if (cuda_device_count(&why) <= args.device) {
    std::fprintf(stderr, "allocsim: error: --backend cuda: no CUDA device %d (%s)\n", args.device,
                 why.empty() ? "fewer devices" : why.c_str());
    return kExitDeviceError;
  }
  try {
    const Trace trace = read_trace_file(args.trace);
    const CudaReplayComparison c =
        replay_on_cuda(trace, options, {args.device, !args.no_pattern_check});
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
    return c.gpu.ooms > 0 ? kExitOom : kExitOk;
  } catch (const InputError& e) {
    return bad_input(e.what());
  } catch (const AllocConfError& e) {
    return bad_input(args.trace + ": allocator settings: " + e.what());
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

int run_replay(const ReplayArgs& args) {
  using namespace allocsim;
  ReplayOptions options;
  if (args.has_alloc_conf) {
    try {
      options.alloc_conf = parse_alloc_conf(args.alloc_conf);
      if (options.alloc_conf->use_malloc_async) {
        throw AllocConfError(kMallocAsyncNotSimulated);
      }
    } catch (const AllocConfError& e) {
      return bad_input("--alloc-conf '" + args.alloc_conf + "': " + e.what());
    }
  }
  const auto capacity = parse_byte_size(args.capacity);
  if (!capacity || *capacity == 0) {
    return bad_input("--capacity '" + args.capacity +
                     "': expected a size such as 24GiB, 80GB, 512MiB or bytes");
  }
  options.capacity = *capacity;
  if (!args.context.empty()) {
    const auto context = parse_byte_size(args.context);
    if (!context)
      return bad_input("--context '" + args.context + "': expected a size such as 750MiB or bytes");
    options.context_bytes = *context;
  }
  if (args.memory_fraction >= 0) options.memory_fraction = args.memory_fraction;
  if (!args.memory_limit.empty()) {
    const auto limit = parse_byte_size(args.memory_limit);
    if (!limit)
      return bad_input("--memory-limit '" + args.memory_limit +
                       "': expected a size such as 10GiB or bytes");
    options.memory_limit = *limit;
  }
  options.on_oom = args.on_oom == "continue" ? OnOom::kContinue : OnOom::kStop;
  options.use_recorded_addresses = !args.no_recorded_addresses;
  options.no_caching = args.no_caching;
  options.check_invariants = args.check_invariants;
  options.record_trace = !args.snapshot_out.empty();
  options.record_timeline = !args.timeline_out.empty();
  std::optional<AllocConf> compare;
  if (!args.compare_alloc_conf.empty()) {
    try {
      compare = parse_alloc_conf(args.compare_alloc_conf);
      if (compare->use_malloc_async) throw AllocConfError(kMallocAsyncNotSimulated);
    } catch (const AllocConfError& e) {
      return bad_input("--compare-alloc-conf '" + args.compare_alloc_conf + "': " + e.what());
    }
    if (args.timeline_out.empty()) return bad_input("--compare-alloc-conf needs --timeline-out");
  }

  if (args.backend == "cuda") return run_replay_on_cuda(args, options);

  try {
    // The replay runs alongside the decoding where it can; the result is the same either way.
    std::optional<StreamedReplay> streamed;
    if (StreamedReplay::supports(options)) streamed.emplace(options, args.trace);
    const Trace trace = read_trace_file(args.trace, streamed ? &streamed->feed() : nullptr);
    const ReplayResult result = streamed ? streamed->finish(trace) : replay(trace, options);
    if (!args.json_out.empty()) {
      const int rc =
          write_text(args.json_out, replay_report_json_text(trace, result), "the JSON report");
      if (rc != kExitOk) return rc;
    }
    if (!args.timeline_out.empty()) {
      const auto title = [&](const AllocConf& c) {
        const std::string name = args.trace.substr(args.trace.find_last_of('/') + 1);
        return name + " on " + allocsim::format_size(options.capacity) +
               ", PYTORCH_CUDA_ALLOC_CONF=" +
               (c.to_string().empty() ? "(defaults)" : c.to_string());
      };
      std::vector<TimelineRun> runs{{title(result.conf), &result}};
      ReplayResult other;
      if (compare) {
        ReplayOptions o = options;
        o.alloc_conf = compare;
        o.record_trace = false;
        other = replay(trace, o);
        runs.push_back({title(other.conf), &other});
      }
      const bool html = args.timeline_out.size() >= 5 &&
                        args.timeline_out.compare(args.timeline_out.size() - 5, 5, ".html") == 0;
      const int rc = write_file(args.timeline_out, html ? timeline_html(runs) : timeline_svg(runs),
                                "the timeline");
      if (rc != kExitOk) return rc;
    }
    if (!args.snapshot_out.empty()) {
      const int rc = write_file(args.snapshot_out, snapshot_pickle(trace, result), "the snapshot");
      if (rc != kExitOk) return rc;
    }
    if (!args.quiet && args.json_out != "-")
      std::fputs(replay_report_text(trace, result).c_str(), stdout);
    return result.ooms > 0 ? kExitOom : kExitOk;
  } catch (const InputError& e) {
    return bad_input(e.what());
  } catch (const AllocConfError& e) {
    return bad_input(args.trace + ": allocator settings: " + e.what());
  }
}

struct PlanArgs {
  std::string trace;
  std::vector<std::string> alloc_confs;
  std::string card = "80GiB";
  std::string context = "750MiB";
  std::string json_out;
};

int run_plan(const PlanArgs& args) {
  using namespace allocsim;
  PlanOptions options;
  for (const std::string& text : args.alloc_confs) {
    try {
      options.settings.push_back(parse_alloc_conf(text));
      if (options.settings.back().use_malloc_async) throw AllocConfError(kMallocAsyncNotSimulated);
    } catch (const AllocConfError& e) {
      return bad_input("--alloc-conf '" + text + "': " + e.what());
    }
  }
  const auto card = parse_byte_size(args.card);
  if (!card || *card == 0)
    return bad_input("--card '" + args.card + "': expected a size such as 24GiB or bytes");
  const auto context = parse_byte_size(args.context);
  if (!context)
    return bad_input("--context '" + args.context + "': expected a size such as 750MiB or bytes");
  options.card_bytes = *card;
  options.context_bytes = *context;
  if (isatty(STDERR_FILENO)) {
    options.progress = [](size_t done, size_t total) {
      std::fprintf(stderr, "\rplanning: %zu/%zu settings searched%s", done, total,
                   done == total ? "\n" : "");
      std::fflush(stderr);
    };
  }
  try {
    const Trace trace = read_trace_file(args.trace);
    if (!args.alloc_confs.empty()) {
      // The recorded setting always comes first, as the baseline.
      options.settings.insert(options.settings.begin(), trace.settings.value_or(AllocConf{}));
    }
    const PlanResult result = plan(trace, options);
    if (!args.json_out.empty()) {
      const int rc = write_text(args.json_out, plan_json(result).dump(1) + "\n", "the JSON report");
      if (rc != kExitOk || args.json_out == "-") return rc;
    }
    std::fputs(plan_text(result).c_str(), stdout);
    return kExitOk;
  } catch (const InputError& e) {
    return bad_input(e.what());
  } catch (const AllocConfError& e) {
    return bad_input(args.trace + ": allocator settings: " + e.what());
  }
}

int run_convert(const std::string& in_path, const std::string& out_path) {
  using namespace allocsim;
  try {
    const Trace trace = read_trace_file(in_path);
    const int rc = write_file(out_path, write_compact_trace(trace), "the trace");
    if (rc != kExitOk) return rc;
    std::printf("%s: %zu events\n", out_path.c_str(), trace.events.size());
    return kExitOk;
  } catch (const InputError& e) {
    return bad_input(e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"allocsim: replays PyTorch CUDA caching-allocator traces on a simulated device"};
  app.require_subcommand(1);
  ReplayArgs args;
  CLI::App* replay = app.add_subcommand(
      "replay", "Replay a PyTorch memory snapshot (.pickle[.gz]) or an RMM log (.csv[.gz])");
  replay->add_option("trace", args.trace, "snapshot from torch.cuda.memory._dump_snapshot")
      ->required();
  replay->add_option("--alloc-conf", args.alloc_conf,
                     "PYTORCH_CUDA_ALLOC_CONF to use instead of the recorded settings (a what-if)");
  replay->add_option("--capacity", args.capacity, "device memory: 24GiB, 80GB, 512MiB or bytes")
      ->capture_default_str();
  replay->add_option(
      "--context", args.context,
      "memory the process holds outside PyTorch (default 750MiB, or what a recorded OOM shows)");
  replay
      ->add_option("--memory-fraction", args.memory_fraction,
                   "as torch.cuda.set_per_process_memory_fraction(F) on this device")
      ->check(CLI::Range(0.0, 1.0));
  replay->add_option("--memory-limit", args.memory_limit,
                     "the same cap in bytes the allocator may reserve (overrides the fraction)");
  replay->add_option("--json", args.json_out, "write the JSON report to FILE, or - for stdout");
  replay
      ->add_option("--backend", args.backend,
                   "sim: a simulated device; cuda: replay on a real GPU too and compare")
      ->check(CLI::IsMember({"sim", "cuda"}))
      ->capture_default_str();
  replay->add_option("--device", args.device, "with --backend cuda: the CUDA device ordinal")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  replay->add_flag("--no-pattern-check", args.no_pattern_check,
                   "with --backend cuda: do not write and check every block's bytes");
  replay
      ->add_option("--on-oom", args.on_oom,
                   "stop at the first OOM the real run did not have, or continue")
      ->check(CLI::IsMember({"stop", "continue"}))
      ->capture_default_str();
  replay->add_option(
      "--snapshot-out", args.snapshot_out,
      "write the simulated run as a PyTorch memory snapshot (open it at pytorch.org/memory_viz)");
  replay->add_option("--timeline-out", args.timeline_out,
                     "draw allocated, active and reserved memory over the trace: an SVG picture, "
                     "or with a .html name a page whose cursor reads the values");
  replay->add_option(
      "--compare-alloc-conf", args.compare_alloc_conf,
      "with --timeline-out: also replay under this PYTORCH_CUDA_ALLOC_CONF and draw it below");
  replay->add_flag("--no-recorded-addresses", args.no_recorded_addresses,
                   "place segments with the address model even where the trace recorded addresses");
  replay->add_flag("--no-caching", args.no_caching, "as PYTORCH_NO_CUDA_MEMORY_CACHING=1");
  replay->add_flag("--check-invariants", args.check_invariants,
                   "check the allocator's invariants after every event");
  replay->add_flag("-q,--quiet", args.quiet, "no human report on stdout");

  PlanArgs plan_args;
  CLI::App* plan = app.add_subcommand("plan",
                                      "The smallest memory limit a trace runs in, for each "
                                      "allocator setting, and whether a card fits it");
  plan->add_option("trace", plan_args.trace, "snapshot from torch.cuda.memory._dump_snapshot")
      ->required();
  plan->add_option("--alloc-conf", plan_args.alloc_confs,
                   "a PYTORCH_CUDA_ALLOC_CONF to plan for (repeatable; default: a useful set)");
  plan->add_option("--card", plan_args.card, "the card to answer for")->capture_default_str();
  plan->add_option("--context", plan_args.context, "memory the process holds outside PyTorch")
      ->capture_default_str();
  plan->add_option("--json", plan_args.json_out,
                   "write the plans as JSON to FILE, or - for stdout");

  std::string convert_in, convert_out;
  CLI::App* convert = app.add_subcommand(
      "convert",
      "Convert a snapshot or RMM log to allocsim's compact trace (see sim/compact_trace.hpp)");
  convert->add_option("input", convert_in, "a snapshot (.pickle[.gz]) or RMM log (.csv[.gz])")
      ->required();
  convert->add_option("output", convert_out, "the compact trace to write")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return bad_input(e.what());
  }
  try {
    if (plan->parsed()) return run_plan(plan_args);
    if (convert->parsed()) return run_convert(convert_in, convert_out);
    args.has_alloc_conf = replay->count("--alloc-conf") > 0;
    args.capacity_given = replay->count("--capacity") > 0;
    return run_replay(args);
  } catch (const std::bad_alloc&) {
    // A trace too large for this machine: one line, not an abort with a core dump.
    print_error(
        "out of memory: the trace, or what the run keeps of it, does not fit in this machine's "
        "memory");
    return kExitOutOfHostMemory;
  } catch (const allocsim::InvariantViolation& e) {
    // --check-invariants found the allocator inconsistent: a bug in allocsim, not in the input.
    print_error(std::string("internal error: the allocator's invariants broke (") + e.what() +
                "); please report it with the trace and the command");
    return kExitInternalError;
  }
}
