// allocsim predict: the trace at a size the job was not recorded at, from recordings at several.
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
#include "sim/predict/world_size_sweep.hpp"
#include "sim/report/snapshot_writer.hpp"
#include "sim/trace/compact_trace.hpp"

namespace allocsim::cli {
namespace {

struct PredictArgs {
  std::vector<std::string> traces;
  std::vector<int64_t> at;
  int64_t to = 0;
  int64_t world_size = 0;  // --at are world sizes: predict one rank's trace at this many ranks
  int accumulate = 1;
  int multiprocessors = kDefaultMultiprocessors;  // sizes the reductions' staging buffers
  std::string out;
  std::optional<int> device;
  bool quiet = false;
};

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Sizes beyond the largest recording that no line through every recording gives, and the bytes
// at stake between continuing them and holding them.
void warn_guessed_sizes(const SizeSweep& sweep, int64_t to) {
  const SizeGuess g = sweep.guessed_at(to);
  if (g.allocations == 0) return;
  const std::string largest = std::to_string(sweep.values().back());
  print_warning("at " + std::to_string(to) + ", " + std::to_string(g.allocations) +
                " allocations' sizes are guesses beyond the largest recording (" + largest +
                "; growing on no line through every recording): continued as they grew last, " +
                format_size(g.continued_bytes) + " in all, as written; held at their size at " +
                largest + ", " + format_size(g.held_bytes) + " (" + format_size(g.at_stake()) +
                " at stake); a recording nearer " + std::to_string(to) + " settles them");
}

int run_predict(const PredictArgs& args) {
  if ((args.to > 0) == (args.world_size > 0))
    return bad_input("predict: give --to (the value to predict at) or --world-size (the ranks)");
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
  Trace predicted;
  int64_t at = args.to;
  if (args.world_size > 0) {
    const WorldSizeSweep sweep(recordings, args.at);
    predicted = sweep.predict(args.world_size);
    at = args.world_size;
    if (!args.quiet) std::fputs(sweep.summary_text().c_str(), stderr);
    if (args.world_size == 1 && sweep.ranks().front() > 1) {
      print_warning(
          "a run on one rank runs no collectives: the trace at 1 rank keeps the buffers of the "
          "recordings' collectives, which it does without (a recording on one rank settles "
          "them)");
    }
  } else {
    const SizeSweep sweep(recordings, args.at, args.multiprocessors);
    predicted = sweep.predict(args.to);
    if (!args.quiet) std::fputs(sweep.summary_text().c_str(), stderr);
    warn_guessed_sizes(sweep, args.to);
  }
  if (args.accumulate > 1) predicted = accumulate_gradients(predicted, args.accumulate);
  const int rc = snapshot
                     ? write_file(args.out, requests_snapshot_pickle(predicted), "the snapshot")
                     : write_file(args.out,
                                  write_compact_trace(predicted, !predicted.segments.empty() ||
                                                                     !predicted.addresses_recorded),
                                  "the trace");
  if (rc != kExitOk) return rc;
  if (!args.quiet)
    std::printf("%s: %zu events at %lld%s%s\n", args.out.c_str(), predicted.events.size(),
                static_cast<long long>(at), args.world_size > 0 ? " ranks" : "",
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
  predict->add_option("--to", args->to, "the value to predict the trace at");
  predict
      ->add_option("--world-size", args->world_size,
                   "instead of --to: --at are world sizes (each recording one rank of a "
                   "data-parallel job at that many ranks); predict that rank's trace at N ranks")
      ->check(CLI::Range(int64_t{1}, kMaxWorldSize));
  predict
      ->add_option("--multiprocessors", args->multiprocessors,
                   "the GPU's multiprocessors, where the reductions' staging buffers stop "
                   "growing (default 132: an H100's or H200's; an A100 has 108)")
      ->check(CLI::Range(1, 1 << 16));
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
