// allocsim convert: a snapshot or RMM log as allocsim's compact trace, or a compact trace of
// requests alone (what predict and allocsim.trace write) as a snapshot.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/cli/cli_args.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/trace_input.hpp"
#include "sim/report/snapshot_writer.hpp"
#include "sim/trace/compact_trace.hpp"

namespace allocsim::cli {
namespace {

struct ConvertArgs {
  std::string in;
  std::string out;
  std::optional<int> device;
};

bool writes_snapshot(const std::string& out) {
  for (const std::string suffix : {".pickle", ".pickle.gz"}) {
    if (out.size() >= suffix.size() &&
        out.compare(out.size() - suffix.size(), suffix.size(), suffix) == 0)
      return true;
  }
  return false;
}

int run_convert(const ConvertArgs& args) {
  const std::vector<Trace> traces = read_traces(args.in, args.device);
  if (traces.size() > 1) {
    return bad_input(args.in + ": a compact trace holds one device; the file records " +
                     std::to_string(traces.size()) + ": pick one with --device N");
  }
  const Trace& trace = traces.front();
  if (writes_snapshot(args.out)) {
    const int rc = write_file(args.out, requests_snapshot_pickle(trace), "the snapshot");
    if (rc != kExitOk) return rc;
    std::printf("%s: %zu events replayed into a snapshot\n", args.out.c_str(), trace.events.size());
    return kExitOk;
  }
  if (!trace.private_pools.empty()) {
    print_warning(args.out +
                  ": the compact trace does not keep which requests CUDA graphs' private pools "
                  "served: its replay serves them all from the ordinary pools");
  }
  const int rc = write_file(args.out, write_compact_trace(trace), "the trace");
  if (rc != kExitOk) return rc;
  std::printf("%s: %zu events\n", args.out.c_str(), trace.events.size());
  return kExitOk;
}

}  // namespace

Command add_convert_command(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* convert = app.add_subcommand("convert",
                                         "Convert a snapshot or RMM log to allocsim's compact "
                                         "trace (see sim/trace/compact_trace.hpp), or a trace "
                                         "of requests to a snapshot (OUTPUT.pickle[.gz]): "
                                         "replayed with its settings on a device large enough");
  convert
      ->add_option("input", args->in,
                   "a snapshot (.pickle[.gz]), RMM log (.csv[.gz]) or compact trace (.atrace)")
      ->required();
  convert
      ->add_option("output", args->out,
                   "the compact trace to write (.atrace), or a snapshot (.pickle, .pickle.gz)")
      ->required();
  convert
      ->add_option("--device", args->device,
                   "the device to convert, of a snapshot that recorded several")
      ->check(CLI::Range(0, 1023));
  return {convert,
          [args] { return reporting_input_errors(args->in, [&] { return run_convert(*args); }); }};
}

}  // namespace allocsim::cli
