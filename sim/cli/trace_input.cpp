#include "sim/cli/trace_input.hpp"

#include <algorithm>

#include "sim/replay/pool_guess_settling.hpp"
#include "sim/trace/private_pool_inference.hpp"
#include "sim/trace/trace_file.hpp"

namespace allocsim::cli {
namespace {

// Where the private-pool inference guessed, the recorded segment operations decide; what they
// leave open is said.
void settle_guesses(Trace& trace, const ReplayOptions& run_device) {
  const PoolGuessSettling s = settle_pool_guesses(trace, run_device);
  if (s.changed > 0) {  // the reader's line on the private pools, of the routing settled on
    const std::string line = trace.source + ": CUDA graphs' private pools ";
    for (std::string& w : trace.warnings) {
      if (w.starts_with(line)) w = private_pool_warning(trace, s.inference);
    }
  }
  if (s.guesses > 0 && !s.departs_still &&
      std::any_of(trace.events.begin(), trace.events.end(),
                  [](const TraceEvent& e) { return e.action == TraceAction::kOom; })) {
    trace.warnings.push_back(
        trace.source + ": " + std::to_string(s.guesses) +
        " segment(s) freed before the end had their pool guessed, and the recorded segment "
        "operations are repeated; which pool such a segment's free blocks were in at an OOM "
        "they may not show, so the OOM message's memory in private pools may differ from the "
        "run's");
  }
  if (s.guesses == 0 || !s.departs_still) return;
  trace.warnings.push_back(trace.source + ": " + std::to_string(s.guesses) +
                           " segment(s) freed before the end could have been another pool's "
                           "than the one taken; " +
                           std::to_string(s.replays) +
                           " replays against the recorded segment operations did not settle "
                           "them all");
}

}  // namespace

Trace read_trace(const std::string& path, EventFeed* feed) {
  Trace trace = read_trace_file(path, feed);
  try {
    settle_guesses(trace, ReplayOptions{});
  } catch (...) {
    if (feed) feed->abandon();  // the feed's reader lets go of the events before they are freed
    throw;
  }
  for (const std::string& w : trace.warnings) print_warning(w);
  return trace;
}

std::vector<Trace> read_traces(const std::string& path, std::optional<int> device, EventFeed* feed,
                               const ReplayOptions& run_device, bool print_warnings) {
  std::vector<Trace> traces = read_trace_file_devices(path, feed);
  // A feed's reader may still be reading the first trace's events where they lie: it lets go of
  // them before an error, or a --device that leaves that trace out, can free them.
  try {
    for (Trace& t : traces) settle_guesses(t, run_device);
  } catch (...) {
    if (feed) feed->abandon();
    throw;
  }
  std::vector<std::string> printed;
  for (const Trace& t : traces) {
    if (!print_warnings) break;
    for (const std::string& w : t.warnings) {
      if (std::find(printed.begin(), printed.end(), w) != printed.end()) continue;
      print_warning(w);
      printed.push_back(w);
    }
  }
  // Returned as they are, not copied: a feed's reader may be reading the events where they lie.
  if (!device) return traces;
  if (feed && (traces.size() != 1 || traces.front().device != *device)) feed->abandon();
  return pick_device(std::move(traces), *device, path);
}

std::vector<Trace> pick_device(std::vector<Trace> traces, int device, const std::string& path,
                               const std::string& option) {
  const auto it = std::find_if(traces.begin(), traces.end(),
                               [&](const Trace& t) { return t.device == device; });
  if (it == traces.end()) {
    std::string have;
    for (const Trace& t : traces) have += (have.empty() ? "" : ", ") + std::to_string(t.device);
    throw InputError(path + ": " + option + " " + std::to_string(device) +
                     ": the file records no events or segments on that device (it has device" +
                     (traces.size() > 1 ? "s " : " ") + have + ")");
  }
  std::vector<Trace> one;
  one.push_back(std::move(*it));
  return one;
}

}  // namespace allocsim::cli
