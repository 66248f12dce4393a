// allocsim convert: a snapshot or RMM log as allocsim's compact trace.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/cli/cli_args.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/trace_input.hpp"
#include "sim/trace/compact_trace.hpp"

namespace allocsim::cli {
namespace {

struct ConvertArgs {
  std::string in;
  std::string out;
  std::optional<int> device;
};

int run_convert(const ConvertArgs& args) {
  const std::vector<Trace> traces = read_traces(args.in, args.device);
  if (traces.size() > 1) {
    return bad_input(args.in + ": a compact trace holds one device; the file records " +
                     std::to_string(traces.size()) + ": pick one with --device N");
  }
  const Trace& trace = traces.front();
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
                                         "trace (see sim/trace/compact_trace.hpp)");
  convert->add_option("input", args->in, "a snapshot (.pickle[.gz]) or RMM log (.csv[.gz])")
      ->required();
  convert->add_option("output", args->out, "the compact trace to write")->required();
  convert
      ->add_option("--device", args->device,
                   "the device to convert, of a snapshot that recorded several")
      ->check(CLI::Range(0, 1023));
  return {convert,
          [args] { return reporting_input_errors(args->in, [&] { return run_convert(*args); }); }};
}

}  // namespace allocsim::cli
