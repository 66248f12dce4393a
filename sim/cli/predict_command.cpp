// allocsim predict: the trace at a size the job was not recorded at, from recordings at several.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/cli/cli_args.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/trace_input.hpp"
#include "sim/predict/size_sweep.hpp"
#include "sim/trace/compact_trace.hpp"

namespace allocsim::cli {
namespace {

struct PredictArgs {
  std::vector<std::string> traces;
  std::vector<int64_t> at;
  int64_t to = 0;
  std::string out;
  std::optional<int> device;
  bool quiet = false;
};

int run_predict(const PredictArgs& args) {
  const std::string suffix = ".atrace";
  if (args.out.size() < suffix.size() ||
      args.out.compare(args.out.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return bad_input(args.out + ": predict writes allocsim's compact trace: name it FILE.atrace");
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
  for (const Trace& t : traces) recordings.push_back(&t);
  const SizeSweep sweep(recordings, args.at);
  const Trace predicted = sweep.predict(args.to);
  if (!args.quiet) std::fputs(sweep.summary_text().c_str(), stderr);
  const int rc = write_file(args.out, write_compact_trace(predicted), "the trace");
  if (rc != kExitOk) return rc;
  if (!args.quiet)
    std::printf("%s: %zu events at %lld\n", args.out.c_str(), predicted.events.size(),
                static_cast<long long>(args.to));
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
  predict->add_option("--out", args->out, "the predicted trace to write (FILE.atrace)")->required();
  predict->add_option("--device", args->device, "the device, of recordings that hold several")
      ->check(CLI::Range(0, 1023));
  predict->add_flag("-q,--quiet", args->quiet, "no summary of the model on stderr");
  return {predict, [args] {
            return reporting_input_errors(args->traces.front(), [&] { return run_predict(*args); });
          }};
}

}  // namespace allocsim::cli
