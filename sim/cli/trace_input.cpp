#include "sim/cli/trace_input.hpp"

#include "sim/trace/trace_file.hpp"

namespace allocsim::cli {

Trace read_trace(const std::string& path, EventFeed* feed) {
  Trace trace = read_trace_file(path, feed);
  for (const std::string& w : trace.warnings) print_warning(w);
  return trace;
}

}  // namespace allocsim::cli
