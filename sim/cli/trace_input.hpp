// The trace a command was given: read with its reader's warnings printed, and the input errors
// that reading it, or the command's work on it, throws turned into one error line.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/alloc_conf.hpp"
#include "sim/cli/cli_args.hpp"
#include "sim/replay/replay.hpp"
#include "sim/trace/event_feed.hpp"
#include "sim/trace/input_error.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim::cli {

// read_trace_file(path, feed), each of the trace's warnings printed as a warning line.
Trace read_trace(const std::string& path, EventFeed* feed = nullptr);

// Every device the file recorded (read_trace_file_devices), or only `device` (an InputError names
// the devices there are when it is not one of them); their warnings printed once each (unless
// `print_warnings` is false: they stay in Trace::warnings). The guesses of their private pools
// are settled by replays on `run_device` (its capacity, context and cap: the device the recorded
// run had, as far as the command was told).
std::vector<Trace> read_traces(const std::string& path, std::optional<int> device,
                               EventFeed* feed = nullptr,
                               const ReplayOptions& run_device = ReplayOptions{},
                               bool print_warnings = true);

// Of `traces`, only `device`'s (an InputError, naming the `option` that asked for it, names the
// devices there are when it is not one).
std::vector<Trace> pick_device(std::vector<Trace> traces, int device, const std::string& path,
                               const std::string& option = "--device");

// run(), or kExitBadInput with one line for an InputError or for settings (recorded in the trace
// at `path`) that allocsim refuses.
template <class Run>
int reporting_input_errors(const std::string& path, Run&& run) {
  try {
    return run();
  } catch (const InputError& e) {
    return bad_input(e.what());
  } catch (const AllocConfError& e) {
    return bad_input(path + ": allocator settings: " + e.what());
  }
}

}  // namespace allocsim::cli
