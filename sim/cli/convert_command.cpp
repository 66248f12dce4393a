// allocsim convert: a snapshot or RMM log as allocsim's compact trace.
#include <cstdio>
#include <memory>
#include <string>

#include "sim/cli/cli_args.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/trace_input.hpp"
#include "sim/trace/compact_trace.hpp"

namespace allocsim::cli {
namespace {

struct ConvertArgs {
  std::string in;
  std::string out;
};

int run_convert(const ConvertArgs& args) {
  const Trace trace = read_trace(args.in);
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
  return {convert,
          [args] { return reporting_input_errors(args->in, [&] { return run_convert(*args); }); }};
}

}  // namespace allocsim::cli
