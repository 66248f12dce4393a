// allocsim predict: the trace at a size the job was not recorded at, from recordings at several.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/format_size.hpp"
#include "sim/cli/cli_args.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/trace_input.hpp"
#include "sim/predict/gradient_accumulation.hpp"
#include "sim/predict/size_sweep.hpp"
#include "sim/replay/replay.hpp"
#include "sim/report/snapshot_writer.hpp"
#include "sim/trace/compact_trace.hpp"

namespace allocsim::cli {
namespace {

struct PredictArgs {
  std::vector<std::string> traces;
  std::vector<int64_t> at;
  int64_t to = 0;
  int accumulate = 1;
  std::string out;
  std::optional<int> device;
  bool quiet = false;
};

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The predicted requests as a PyTorch memory snapshot, for PyTorch's viewers and for anything
// that reads snapshots: replayed with the recorded settings on a simulated device large enough
// that none fails (every request in a segment of its own would fit), which gives the segments
// and addresses a snapshot has.
std::string predicted_snapshot(const Trace& predicted) {
  uint64_t bound = uint64_t{1} << 30;
  for (const TraceEvent& e : predicted.events) {
    if (e.action == TraceAction::kAlloc)
      bound += std::max<uint64_t>(e.size, uint64_t{20} << 20) * 2;
  }
  ReplayOptions options;
  options.capacity = std::max<uint64_t>(bound, kDefaultCapacityBytes);
  options.record_trace = true;
  options.on_oom = OnOom::kContinue;
  return snapshot_pickle(predicted, replay(predicted, options));
}

int run_predict(const PredictArgs& args) {
  const bool snapshot = ends_with(args.out, ".pickle") || ends_with(args.out, ".pickle.gz");
  if (!snapshot && !ends_with(args.out, ".atrace")) {
    return bad_input(args.out +
                     ": predict writes allocsim's compact trace (FILE.atrace) or a PyTorch "
                     "memory snapshot (FILE.pickle, or FILE.pickle.gz compressed)");
  }
  std::vector<Trace> traces;
  for (const std::string& path : args.traces) {
    std::vector<Trace> devices = read_traces(path, args.device);
    if (devices.size() > 1) {
      return bad_input(path + ": the file records " + std::to_string(devices.size()) +
                       " devices: pick one with --device N");
    }
    traces.push_back(std::move(devices.front()));
  }
  std::vector<const Trace*> recordings;
  recordings.reserve(traces.size());
  for (const Trace& t : traces) recordings.push_back(&t);
  const SizeSweep sweep(recordings, args.at);
  const Trace predicted = args.accumulate > 1
                              ? accumulate_gradients(sweep.predict(args.to), args.accumulate)
                              : sweep.predict(args.to);
  if (!args.quiet) std::fputs(sweep.summary_text().c_str(), stderr);
  if (const SizeGuess g = sweep.guessed_at(args.to); g.allocations > 0) {
    const std::string largest = std::to_string(sweep.values().back());
    print_warning("at " + std::to_string(args.to) + ", " + std::to_string(g.allocations) +
                  " allocations' sizes are guesses beyond the largest recording (" + largest +
                  "; growing on no line through every recording): continued as they grew "
                  "last, " +
                  format_size(g.continued_bytes) +
                  " in all, as written; held at their "
                  "size at " +
                  largest + ", " + format_size(g.held_bytes) + " (" + format_size(g.at_stake()) +
                  " at stake); a recording nearer " + std::to_string(args.to) + " settles them");
  }
  const int rc = snapshot ? write_file(args.out, predicted_snapshot(predicted), "the snapshot")
                          : write_file(args.out, write_compact_trace(predicted), "the trace");
  if (rc != kExitOk) return rc;
  if (!args.quiet)
    std::printf("%s: %zu events at %lld%s\n", args.out.c_str(), predicted.events.size(),
                static_cast<long long>(args.to),
                args.accumulate > 1 ? (", gradients accumulated over " +
                                       std::to_string(args.accumulate) + " passes")
                                          .c_str()
                                    : "");
  return kExitOk;
}

}  // namespace

Command add_predict_command(CLI::App& app) {
  auto args = std::make_shared<PredictArgs>();
  CLI::App* predict = app.add_subcommand(
      "predict",
      "The trace at a size the job was not recorded at (a batch size, a sequence length), from "
      "recordings of it at several values of that size");
  predict->add_option("traces", args->traces, "the recordings, one per value of --at")
      ->required()
      ->expected(2, 64);
  predict->add_option("--at", args->at, "the value each recording was made at: V1,V2[,V3...]")
      ->required()
      ->delimiter(',');
  predict->add_option("--to", args->to, "the value to predict the trace at")->required();
  predict
      ->add_option("--accumulate", args->accumulate,
                   "accumulate gradients over K forward and backward passes of --to (the "
                   "micro-batch) before each optimizer step (needs the optimizer's "
                   "annotations in the recordings)")
      ->check(CLI::Range(1, 64));
  predict
      ->add_option("--out", args->out,
                   "the predicted trace to write: FILE.atrace, or FILE.pickle (FILE.pickle.gz "
                   "compressed) for a PyTorch memory snapshot")
      ->required();
  predict->add_option("--device", args->device, "the device, of recordings that hold several")
      ->check(CLI::Range(0, 1023));
  predict->add_flag("-q,--quiet", args->quiet, "no summary of the model on stderr");
  return {predict, [args] {
            return reporting_input_errors(args->traces.front(), [&] { return run_predict(*args); });
          }};
}

}  // namespace allocsim::cli
