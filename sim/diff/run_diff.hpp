// Two runs of a job side by side: where the memory of one went in the other. Their requests are
// paired (run_pairing.hpp); the requests only one makes, and those whose size changed, are
// grouped by source line (or, without stack frames, by step and position), with the bytes each
// group holds at each run's allocated peak; each run's peaks, fragmentation and segments; the
// first paired request after which their reserved memory differs; and how much of the
// difference in peak reserved memory the program made (other requests) and how much the
// allocator made (other settings, device or PyTorch release): each run replayed under the
// other's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/diff/run_pairing.hpp"
#include "sim/replay/replay.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

// One run's figures, replayed as recorded (its settings, its device as far as the trace tells).
struct DiffRun {
  std::string trace;  // Trace::source
  int device = 0;
  uint64_t events = 0;
  uint64_t allocations = 0;
  uint64_t requested_bytes = 0;  // summed over the allocations
  ReplaySetup setup;
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
  double fragmentation = 0;  // 1 - peak active / peak reserved
  int64_t peak_segments = 0;
  int64_t device_allocs = 0;          // cudaMalloc calls
  std::optional<uint64_t> oom_event;  // where the replay stopped at an OOM
  uint64_t allocated_peak_event = 0;
  uint64_t live_at_peak = 0;           // the bytes of its allocations live just after that event
  std::optional<uint64_t> step_count;  // the steps the optimizer's annotations show
};

struct DiffGroup {
  std::string label;  // the source line, or "step S, allocations I-J", or the same-size group
  uint64_t same = 0, changed = 0, only_a = 0, only_b = 0;  // allocations, by how they paired
  uint64_t bytes_a = 0, bytes_b = 0;                       // requested by the group in each run
  uint64_t at_peak_a = 0, at_peak_b = 0;                   // live at each run's allocated peak
  [[nodiscard]] int64_t delta_at_peak() const {
    return static_cast<int64_t>(at_peak_b) - static_cast<int64_t>(at_peak_a);
  }
};

// Where the runs' reserved memory first differs: after a paired request of each.
struct ReservedParting {
  uint64_t a_event = 0, b_event = 0;
  int64_t a_reserved = 0, b_reserved = 0;
  uint64_t a_size = 0, b_size = 0;  // the paired request's size in each
  std::string site;                 // its source line, where the runs carry frames
};

// One peak figure (reserved or allocated) of B minus A, split: B's requests under A's allocator
// (`b_under_a`) make program = b_under_a - A and allocator = B - b_under_a, which add up to the
// difference; the other order (A's requests under B's allocator) splits it too, and the two
// splits differ where program and allocator act on each other.
struct DiffSplit {
  int64_t a = 0, b = 0;
  int64_t b_under_a = 0, a_under_b = 0;
  [[nodiscard]] int64_t difference() const { return b - a; }
  [[nodiscard]] int64_t program() const { return b_under_a - a; }
  [[nodiscard]] int64_t allocator() const { return b - b_under_a; }
  [[nodiscard]] int64_t program_other_order() const { return b - a_under_b; }
  [[nodiscard]] int64_t allocator_other_order() const { return a_under_b - a; }
};

struct RunDiff {
  DiffRun a, b;
  PairedBy paired_by = PairedBy::kSizeAndSite;
  bool paired_by_sites = false;  // source lines took part (both runs have frames)
  bool sites = false;            // groups are source lines
  uint64_t same = 0, changed = 0, only_a = 0, only_b = 0;
  std::vector<DiffGroup> groups;  // by |delta at peak|, then by bytes requested, then label
  std::optional<ReservedParting> reserved_parting;
  bool same_allocator = false;  // settings, device, cap and release alike: allocator part 0
  DiffSplit peak_reserved, peak_allocated;
  // Where a cross replay ran out of memory (the other's requests do not fit its device or cap):
  // its peaks are up to that OOM.
  std::optional<uint64_t> b_under_a_oom_event, a_under_b_oom_event;
  std::vector<std::string> warnings;
};

struct DiffOptions {
  // How each run is replayed (capacity, context, ...): its own recorded settings unless the
  // options override them.
  ReplayOptions replay;
};

// Throws InputError for traces a replay refuses, as replay() does. The two runs' replays run at
// once.
RunDiff diff_runs(const Trace& a, const Trace& b, const DiffOptions& options = {});

// What a diff works out of one run alone: its replay as recorded, its requests, when each
// allocation is freed and whether it is live at the allocated peak, where its steps start,
// reserved memory after each event, its stacks' source lines. Made for each run beside the
// other's reading, and given to diff_runs.
struct DiffSide {
  ReplayResult result;
  std::vector<RecordedRequest> requests;
  std::vector<uint64_t> frees;  // per request: its allocation's first free event, or UINT64_MAX
  std::vector<uint8_t> live_at_peak;    // per request: an allocation live after the allocated peak
  std::vector<uint64_t> steps;          // the first event of each step after the first
  std::vector<int64_t> reserved_after;  // per event
  std::vector<std::string> sites;       // per stack: describe_site()
};
DiffSide prepare_diff_side(const Trace& trace, const DiffOptions& options = {});
RunDiff diff_runs(const Trace& a, const DiffSide& side_a, const Trace& b, const DiffSide& side_b,
                  const DiffOptions& options = {});

// The replay options that put a run under the allocator `setup` describes (settings, release,
// device, context and cap): what the split replays each run's requests under.
ReplayOptions options_of(const ReplaySetup& setup, const ReplayOptions& base);

}  // namespace allocsim
