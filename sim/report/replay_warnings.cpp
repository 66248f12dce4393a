#include "sim/report/replay_warnings.hpp"

#include <algorithm>

#include "core/format_size.hpp"
#include "sim/report/recording_departure.hpp"

namespace allocsim {
namespace {

// What a warning about one device's history begins with.
std::string device_history(const Trace& trace) {
  return trace.source + ": device_traces[" + std::to_string(trace.device) + "]: ";
}

}  // namespace

std::vector<std::string> contradiction_warnings(const Trace& trace, const ReplayResult& result) {
  std::vector<std::string> lines;
  const TraceContradictions& c = result.outcome.contradictions;
  const std::string where = device_history(trace);
  // With expandable segments, a history that starts mid-run rebuilds the ranges mapped at its
  // first event from the final segments and the unmaps it holds: a block freed outside them
  // belongs to a range neither shows (a snapshot without its `segments`, say).
  const bool expandable = (trace.settings && trace.settings->expandable_segments) ||
                          std::any_of(trace.segments.begin(), trace.segments.end(),
                                      [](const SnapshotSegment& s) { return s.expandable; });
  if (c.frees_of_unknown_blocks > 0 && expandable) {
    lines.push_back(where + std::to_string(c.frees_of_unknown_blocks) +
                    " free(s) of a block from before the first event, the first at event " +
                    std::to_string(c.first_free_of_unknown_block) +
                    ": skipped (in no expandable segment's range that the final segments and "
                    "the trace's unmaps show mapped at its start: its bytes are left out of the "
                    "figures)");
  } else if (c.frees_of_unknown_blocks > 0) {
    lines.push_back(where + std::to_string(c.frees_of_unknown_blocks) +
                    " free(s) of a block that was neither allocated nor live at the first event, "
                    "the first at event " +
                    std::to_string(c.first_free_of_unknown_block) + ": skipped");
  }
  if (c.allocs_at_live_addresses > 0) {
    lines.push_back(where + std::to_string(c.allocs_at_live_addresses) +
                    " alloc(s) at the address of a block still live (a free is missing), the "
                    "first at event " +
                    std::to_string(c.first_alloc_at_live_address) +
                    ": the older block is kept live to the end");
  }
  return lines;
}

std::vector<std::string> replay_warnings(const Trace& trace, const ReplayResult& result) {
  std::vector<std::string> lines = contradiction_warnings(trace, result);
  if (result.setup.capacity_from_layout) {
    lines.push_back(device_history(trace) +
                    "its expandable segments' address reservations leave room for a card of at "
                    "most " +
                    format_size(result.setup.capacity) +
                    " (the second pool's reservation begins right after the first's): replayed "
                    "on that card; --capacity names another");
  }
  if (result.setup.torch_version_given && trace.torch_version &&
      result.setup.torch_version < *trace.torch_version) {
    lines.push_back(trace.source + ": written by PyTorch " + trace.torch_version->to_string() +
                    " or later (" + trace.torch_version_evidence + "); replayed with " +
                    result.setup.torch_version.to_string() +
                    "'s allocator, as --torch-version asks");
  }
  if (result.restored.over_capacity) {
    lines.push_back(
        device_history(trace) + "PyTorch held " + format_size(result.restored.reserved_bytes) +
        " at the history's first event, more than the device holds (" +
        format_size(result.setup.capacity) + ", " + format_size(result.setup.context_bytes) +
        " of it outside PyTorch): restored as it was, though the run could not "
        "have got there on this device; a request that needs more runs out of "
        "memory");
  }
  if (const uint64_t n = result.outcome.recorded_ooms_capture_unknown; n > 0) {
    lines.push_back(device_history(trace) + std::to_string(n) +
                    " recorded OOM(s), the first at event " +
                    std::to_string(result.outcome.first_recorded_oom_capture_unknown) +
                    ", with nothing cached to release: the trace cannot show whether a CUDA "
                    "graph capture was underway (PyTorch then skips its retry); replayed as "
                    "outside one, num_alloc_retries and num_sync_all_streams may each count up "
                    "to " +
                    std::to_string(n) + " more than the run did");
  }
  if (const uint64_t n = result.outcome.releases_before_guessed_capture; n > 0) {
    lines.push_back(device_history(trace) + std::to_string(n) +
                    " run(s) of segment releases, the first at event " +
                    std::to_string(result.outcome.first_release_before_guessed_capture) +
                    ", right before a request inferred to be a CUDA graph capture's (a guess): "
                    "read as empty_cache(), as a capture's malloc frees nothing; were the "
                    "request outside a capture, its malloc's retry could have freed the same, "
                    "so num_alloc_retries may count up to " +
                    std::to_string(n) + " fewer than the run did");
  }
  if (const uint64_t n = result.outcome.releases_read_as_retry; n > 0) {
    lines.push_back(device_history(trace) + std::to_string(n) +
                    " run(s) of segment releases, the first at event " +
                    std::to_string(result.outcome.first_release_read_as_retry) +
                    ", right before a request that took new memory, read the same whether the "
                    "malloc's own retry or an empty_cache() called just before it made them: "
                    "taken as the retry, so num_alloc_retries may count up to " +
                    std::to_string(n) +
                    " more than the run did and num_sync_all_streams as many fewer (a recording "
                    "made through allocsim.torch.record_memory_history marks every empty_cache())");
  }
  if (result.outcome.recorded_starting_cap_replaced) {
    lines.push_back(device_history(trace) +
                    "the cap given replaces the one the recorder marked where the history starts "
                    "(the run's set_per_process_memory_fraction before it); the changes recorded "
                    "after it are made where the run made them");
  }
  if (const uint64_t n = result.outcome.recorded_settings_changes_replaced; n > 0) {
    lines.push_back(device_history(trace) + "the settings given replace the " + std::to_string(n) +
                    " allocator settings change(s) the recorder marked during the run "
                    "(_set_allocator_settings calls)");
  }
  if (const uint64_t n = result.outcome.recorded_settings_refused; n > 0) {
    lines.push_back(device_history(trace) + std::to_string(n) +
                    " allocator settings string(s) the run set are refused by the parser of the "
                    "release replayed: they change nothing, as where PyTorch refused them");
  }
  if (const uint64_t n = result.outcome.recorded_limit_changes_replaced; n > 0) {
    lines.push_back(device_history(trace) + "the cap given replaces the " + std::to_string(n) +
                    " memory-fraction change(s) the recorder marked during the run "
                    "(--replace-recorded-caps)");
  }
  if (const uint64_t n = result.outcome.pools_freed_holding_blocks; n > 0) {
    lines.push_back(
        device_history(trace) + std::to_string(n) +
        " CUDA graph private pool(s) freed while still holding blocks: PyTorch counts a pool's "
        "expandable-segment maps once per malloc but its unmaps once each, and frees the pool at 0 "
        "with pages still mapped; the blocks keep pointing at the freed pool (undefined "
        "behaviour), and the replay follows what glibc's malloc makes of it: the next pool made "
        "takes them over (" +
        std::to_string(result.outcome.freed_pools_taken_over) + " here)");
  }
  if (const auto departure = recording_departure(trace, result))
    lines.push_back(departure_warning(trace, *departure));
  return lines;
}

}  // namespace allocsim
