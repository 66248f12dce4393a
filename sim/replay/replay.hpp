// Replays a recorded trace's requests through the allocator core, on a simulated device or on a
// device of the caller's (a real GPU).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/alloc_conf.hpp"
#include "core/device.hpp"
#include "core/device_op.hpp"
#include "core/stats.hpp"
#include "sim/replay/block_observer.hpp"
#include "sim/replay/memory_breakdown.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

enum class OnOom { kStop, kContinue };

// The simulated device when none is given: an 80 GiB card (an A100 or H100).
inline constexpr uint64_t kDefaultCapacityBytes = uint64_t{80} << 30;
// Non-PyTorch memory of a process once kernels are loaded (CUDA context, cuBLAS workspaces):
// typical of a recent GPU and PyTorch; a recorded OOM's free memory calibrates it.
inline constexpr uint64_t kDefaultContextBytes = uint64_t{750} << 20;

struct ReplayOptions {
  std::optional<AllocConf> alloc_conf;  // overrides the recorded settings (a what-if)
  // The PyTorch release whose policy to follow; nullopt: the oldest the trace's fields allow
  // (Trace::torch_version), else 2.11.
  std::optional<TorchVersion> torch_version;
  uint64_t capacity = kDefaultCapacityBytes;
  // For a capacity not given: replay on the card the recorder measured (Trace::device_memory),
  // else where the trace's expandable segments show a smaller card than `capacity` (their
  // reservations' layout, sim/replay/capacity_from_layout.hpp), on that card.
  bool capacity_from_layout = false;
  std::optional<uint64_t> context_bytes;  // non-PyTorch memory; default kDefaultContextBytes
  std::optional<double> memory_fraction;  // set_per_process_memory_fraction
  std::optional<uint64_t> memory_limit;   // the same cap in bytes (overrides memory_fraction)
  // Where the recorder marked the caps the run set (RecordedCall::kSetMemoryFraction), a cap given
  // above is the starting cap and the recorded changes follow it; with this, it replaces them all.
  bool replace_recorded_caps = false;
  bool use_recorded_addresses = true;
  bool no_caching = false;  // PYTORCH_NO_CUDA_MEMORY_CACHING
  OnOom on_oom = OnOom::kStop;
  bool check_invariants = false;  // after every event (slow; for debugging and tests)
  bool record_device_ops = true;
  bool record_trace = false;     // keep the simulated run as a trace (for --snapshot-out)
  bool record_timeline = false;  // keep allocated / active / reserved after every request
  // Keep the allocator's segments and blocks as they are after each of these trace events
  // (ascending): the segment maps of a timeline page.
  std::vector<uint64_t> segment_maps_at;
  // A what-if: torch.cuda.empty_cache() called before each of these trace events (ascending),
  // the requests unchanged.
  std::vector<uint64_t> empty_cache_before;
  // Addresses for the simulated device to hand out instead of the trace's: a GPU run's, so that
  // its simulation places segments where that GPU's driver did (best fit breaks ties by address).
  std::optional<std::vector<RecordedSegment>> segment_addresses;
  std::vector<uint64_t> reservation_addresses;
  // After the report's figures are taken: free every live block and empty the cache, so that a
  // real device can be checked for leaks (replay_on).
  bool release_all_at_end = false;
};

// Throws AllocConfError for settings no replay can run under: backend:cudaMallocAsync, the CUDA
// driver's own allocator.
void check_replayable(const AllocConf& conf);

// The card a replay of `trace` runs on: `options.capacity`, or where it was not given
// (ReplayOptions::capacity_from_layout) the recorder's measure of the device, else the smaller
// card the trace's expandable segments show.
uint64_t replay_capacity(const Trace& trace, const ReplayOptions& options);

// The addresses a recorded run's driver gave its segments and its expandable segments'
// reservations, in order (ReplayOptions::segment_addresses, reservation_addresses): a replay of
// other requests given them places its segments where that run's were. `capacity`: the card the
// replay runs on (the reservations' size follows from it).
struct RunAddresses {
  std::vector<RecordedSegment> segments;
  std::vector<uint64_t> reservations;
};
RunAddresses run_addresses(const Trace& run, uint64_t capacity);

// The PyTorch release whose policy a replay of `trace` follows: `given`, else the oldest whose
// fields the trace has, else 2.11.
TorchVersion replay_torch_version(const Trace& trace, std::optional<TorchVersion> given);

struct ReplayOom {
  uint64_t event_index;
  uint64_t requested;  // bytes asked for
  uint64_t rounded;
  uint64_t alloc_size;
  StreamId stream;
  bool recorded;  // the real run failed here too
  uint64_t largest_free_block;
  uint64_t reserved_unallocated;
  uint64_t allocated;  // allocated_bytes.all.current at the OOM
  uint64_t reserved;   // reserved_bytes.all.current at the OOM
  std::string message;
  // The real run went on after it: its trace holds a later request (an op that catches the OOM
  // and retries with less, as cuDNN's algorithm search does, or the job's own try/except).
  bool caught = false;
};

// The alloc event of a block that existed before the trace's first event (a history that starts
// mid-run, whose state at that event was rebuilt).
inline constexpr uint64_t kBeforeTrace = UINT64_MAX;

struct LiveBlock {
  uint64_t address;
  uint64_t size;
  uint64_t requested;
  StreamId stream;
  uint64_t event_index;  // the alloc event, or kBeforeTrace
  uint32_t stack;
};

struct Fragmentation {
  double gmlake = 0;                          // 1 - peak active / peak reserved
  uint64_t reserved_unallocated_at_peak = 0;  // at the first moment reserved reached its peak
  uint64_t largest_free_block_end = 0;
};

struct TimelinePoint {
  uint64_t event_index;  // after this event
  int64_t allocated, active, reserved;
};

// What a replay ran under.
struct ReplaySetup {
  AllocConf conf;
  TorchVersion torch_version;
  bool torch_version_given = false;   // by ReplayOptions, not told by the trace
  bool capacity_from_layout = false;  // `capacity` told by the expandable segments' layout
  uint64_t capacity = 0;
  uint64_t context_bytes = 0;  // as given, or as a recorded OOM calibrated it
  std::optional<double> memory_fraction;
  uint64_t limit_bytes = 0;       // what the allocator could reserve: the cap, or the device
  bool adds_empty_cache = false;  // the what-if of ReplayOptions::empty_cache_before
};

// Events of a trace that contradict themselves, which no PyTorch writes: counted, with the first,
// and skipped.
struct TraceContradictions {
  static constexpr uint64_t kNone = UINT64_MAX;
  uint64_t frees_of_unknown_blocks = 0;  // a free of a block neither allocated nor restored
  uint64_t first_free_of_unknown_block = kNone;
  uint64_t allocs_at_live_addresses = 0;  // an alloc at the address of a live block
  uint64_t first_alloc_at_live_address = kNone;

  void note_free_of_unknown_block(uint64_t event_index) {
    if (frees_of_unknown_blocks++ == 0) first_free_of_unknown_block = event_index;
  }
  void note_alloc_at_live_address(uint64_t event_index) {
    if (allocs_at_live_addresses++ == 0) first_alloc_at_live_address = event_index;
  }
};

// How far it got and which OOMs it met.
struct ReplayOutcome {
  uint64_t events_total = 0;
  uint64_t events_replayed = 0;
  bool stopped_at_oom = false;
  std::optional<ReplayOom> oom;  // the first unrecorded OOM, else the last recorded one
  struct OomEvent {
    uint64_t event_index;
    uint64_t size;
    bool recorded;
  };
  std::vector<OomEvent> oom_events;
  uint64_t ooms = 0;
  // Of those, the recorded ones after which the trace holds another request: the job caught
  // them and went on (ReplayOom::caught).
  uint64_t ooms_caught = 0;
  // The OOMs that end the job: those the real run did not have, and a recorded last one that
  // nothing followed.
  uint64_t fatal_ooms() const { return ooms - ooms_caught; }
  uint64_t recorded_ooms = 0;
  uint64_t recorded_ooms_not_reproduced = 0;
  // The event of the first recorded OOM whose request the replay served.
  std::optional<uint64_t> first_recorded_oom_not_reproduced;
  // Recorded OOMs, in a trace with CUDA graphs' private pools, where nothing cached could be
  // released: whether a capture was underway (PyTorch then skips the retry that synchronises and
  // releases every cached segment) shows only in num_alloc_retries and num_sync_all_streams. The
  // replay retries, as outside a capture.
  uint64_t recorded_ooms_capture_unknown = 0;
  uint64_t first_recorded_oom_capture_unknown = 0;
  // Runs of segment releases right before a request whose private pool is a guess, read as
  // empty_cache() because a capture's malloc frees nothing, where outside a capture they could
  // have been the malloc's own retry: num_alloc_retries may count up to this many fewer.
  uint64_t releases_before_guessed_capture = 0;
  uint64_t first_release_before_guessed_capture = 0;
  // Private pools PyTorch freed while they still held blocks, and how many of those the pool made
  // next took over: undefined behaviour of PyTorch's that the replay follows as it turns out with
  // glibc (CachingAllocator::freed_pools_holding_blocks).
  uint64_t pools_freed_holding_blocks = 0;
  uint64_t freed_pools_taken_over = 0;
  TraceContradictions contradictions;
  uint64_t inferred_empty_cache_calls = 0;  // torch.cuda.empty_cache() leaves no trace entry
  uint64_t empty_cache_calls_added = 0;     // by ReplayOptions::empty_cache_before
  // What they cost: the cudaMalloc and cudaFree calls (and maps and unmaps) beyond those of the
  // same replay without them, where the caller ran that one too.
  std::optional<std::pair<int64_t, int64_t>> added_device_calls;
  // Runs of segment releases just before a malloc that may have made them (a new segment, an
  // OOM, or an alloc after unmaps): empty_cache() or the malloc's own, told apart by the settings
  // the replay takes as the recorded ones.
  uint64_t releases_before_new_segment = 0;
  // Of those, the runs that read the same whether the malloc's own retry or an empty_cache()
  // right before it made them (the retry releases every cached segment too), in a trace whose
  // recorder did not mark its empty_cache() calls: taken as the retry, so num_alloc_retries may
  // count up to this many more than the run did (and num_sync_all_streams as many fewer).
  uint64_t releases_read_as_retry = 0;
  uint64_t first_release_read_as_retry = 0;
  // The calls allocsim's recorder marked (Trace::recorded_calls) that the replay made, and the
  // limit changes among them it left out for the cap the caller gave.
  uint64_t recorded_calls_made = 0;
  uint64_t recorded_limit_changes_replaced = 0;
  bool recorded_starting_cap_replaced = false;  // the one in force where the history starts
  // Allocator settings strings the recorder marked: replaced by the settings given (a what-if),
  // and refused by the parser of the release replayed (the run's PyTorch refused them too, or
  // the release replayed is not the run's).
  uint64_t recorded_settings_changes_replaced = 0;
  uint64_t recorded_settings_refused = 0;
};

// A history that starts mid-run: the state rebuilt at its first event.
struct RestoredState {
  uint64_t segments = 0;
  uint64_t blocks = 0;
  // Of those, blocks whose size the trace does not show (InitialState::blocks_of_assumed_size).
  uint64_t blocks_of_assumed_size = 0;
  // The memory held then (reserved, and outside PyTorch) is more than the device's capacity: the
  // run could not have reached it there, and the requests after it run out of memory.
  bool over_capacity = false;
  uint64_t reserved_bytes = 0;
};

// Block addresses checked against the recorded ones, and where the simulated device's segments
// (cudaMalloc'ed, and expandable segments' reservations) got their addresses: a recorded one, or
// the model of the driver's placement (backends/simulated_device.hpp), whose choices two runs of
// one job do not share.
struct AddressCheck {
  uint64_t checks = 0;
  uint64_t mismatches = 0;
  uint64_t first_mismatch_event = UINT64_MAX;
  uint64_t first_mismatch_address = 0;  // where the replay put that request
  uint64_t segments_placed = 0;
  uint64_t segments_placed_by_model = 0;
};

// The allocator's segments and blocks after a trace event (segment_maps_at).
struct SegmentMapAt {
  uint64_t event_index;
  std::vector<SnapshotSegment> segments;  // in address order, mapped ranges only
};

// What the replay kept of itself when asked (record_trace, record_timeline, segment_maps_at).
struct ReplayRecording {
  // The simulated run as PyTorch's trace would record it (stacks refer to the replayed trace's),
  // and the allocator's segments at the end.
  std::vector<TraceEvent> trace;
  std::vector<uint64_t> trace_origins;  // per entry of `trace`, the replayed trace's event it is of
  std::vector<SnapshotSegment> final_segments;
  std::vector<TimelinePoint> timeline;
  std::vector<SegmentMapAt> segment_maps;
};

struct ReplayResult {
  ReplaySetup setup;
  ReplayOutcome outcome;
  RestoredState restored;
  AddressCheck addresses;
  DeviceStats stats;
  std::vector<DeviceOp> device_ops;
  std::vector<LiveBlock> live_blocks;  // still allocated at the end
  Fragmentation fragmentation;
  MemoryBreakdown breakdown_end;                    // by pool and segment size, at the end
  std::optional<MemoryBreakdown> breakdown_at_oom;  // and at the reported OOM
  uint64_t allocated_peak_event = 0;                // the first event after which allocated peaked
  ReplayRecording recording;
};

// On a simulated device of options.capacity. Throws InputError for an inconsistent trace and
// AllocConfError for refused settings.
[[nodiscard]] ReplayResult replay(const Trace& trace, const ReplayOptions& options);

// One device's replay, of a file that may have recorded several (Trace::device).
struct DeviceReplay {
  const Trace& trace;
  const ReplayResult& result;
};

// On `device` (replay --backend cuda): options.capacity and context_bytes then only describe it in
// the report, and recorded addresses do not apply. `blocks`, if given, is told of every block
// allocated and freed. Throws as replay() does, and InputError for a history that starts mid-run
// (its first segments cannot be placed at their recorded addresses).
[[nodiscard]] ReplayResult replay_on(Device& device, const Trace& trace,
                                     const ReplayOptions& options, BlockObserver* blocks = nullptr);

}  // namespace allocsim
