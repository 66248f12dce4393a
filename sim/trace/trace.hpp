// A recorded allocator trace, whatever file it came from.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/alloc_conf.hpp"
#include "core/device_op.hpp"
#include "core/torch_version.hpp"
#include "core/types.hpp"
#include "sim/trace/recorder_marks.hpp"

namespace allocsim {

enum class TraceAction : uint8_t {
  kAlloc,  // the block actions first (is_block_action)
  kFreeRequested,
  kFreeCompleted,
  kSegmentAlloc,
  kSegmentFree,
  kSegmentMap,
  kSegmentUnmap,
  kOom,
  kOther,     // snapshot markers: carried, not replayed
  kUnknown,   // an action no PyTorch writes: not replayed, and warned of
  kAnnotate,  // metadata attached to a live block (PyTorch 2.14's _annotate_tensor): not replayed
};

const char* to_string(TraceAction action);

// The device operation a segment event records (segment_alloc: a cudaMalloc, ...); none for the
// other actions.
std::optional<DeviceOpKind> device_op_kind(TraceAction action);

// An alloc or free of a block, as most events are (the others concern segments, OOMs, markers).
inline bool is_block_action(TraceAction action) {
  return action <= TraceAction::kFreeCompleted;
}

inline constexpr uint32_t kNoStack = UINT32_MAX;

// 48 bytes: the stack index sits beside the action, where padding would be (a replay reads the
// events in order, and a trace holds hundreds of thousands). Build one with designated
// initializers; what is left out keeps the defaults.
struct TraceEvent {
  TraceAction action = TraceAction::kOther;
  uint32_t stack = kNoStack;  // index into Trace::stacks, or kNoStack
  uint64_t addr = 0;          // block or segment address (0 for oom)
  uint64_t size = 0;          // bytes, as PyTorch records them for this action
  StreamId stream = 0;
  uint64_t device_free = 0;  // oom only: cudaMemGetInfo free at the failure
  uint64_t time_us = 0;      // when (microseconds since the epoch), 0 if not recorded
};
static_assert(sizeof(TraceEvent) == 48);

// A record_function range boundary the snapshot kept (external_annotations), e.g. the START and
// END of "Optimizer.step#AdamW.step".
struct Annotation {
  std::string name;
  bool start;
  uint64_t time_us;
};

struct Frame {
  std::string name;
  std::string filename;
  int64_t line;  // kUnknownLine where the snapshot's was not a 64-bit int
};
inline constexpr int64_t kUnknownLine = -1;

// The allocator's state when the snapshot was taken (its `segments`): what a history that starts
// mid-run needs to reconstruct the state at its first event.
struct SnapshotBlock {
  uint64_t address;
  uint64_t size;
  uint64_t requested;
  bool active;     // active_allocated or active_pending_free
  bool allocated;  // active_allocated
};

struct SnapshotSegment {
  uint64_t address;
  uint64_t total_size;
  StreamId stream;
  bool small;
  bool expandable;
  std::vector<SnapshotBlock> blocks;
  MempoolId pool{};  // segment_pool_id: (0, 0), or a CUDA graphs' private pool
};

// Pinned host memory (PyTorch 2.14 on, record_pinned_host_memory=True: the snapshot's
// host_segments and host_traces), apart from the device's: reported, not replayed.
struct HostMemory {
  uint64_t segments = 0;             // host_segments at the snapshot
  uint64_t reserved_bytes = 0;       // their total_size
  uint64_t allocated_bytes = 0;      // their allocated blocks
  uint64_t trace_entries = 0;        // host_traces
  uint64_t peak_reserved_bytes = 0;  // over the history (its start state from the end's)
  uint64_t peak_allocated_bytes = 0;
  uint64_t unread_entries = 0;  // entries without an action, address or size it knows
};

// A CUDA graphs' private pool that served some of the trace's requests (see
// sim/trace/private_pool_inference.hpp).
struct PrivatePoolUse {
  static constexpr uint64_t kNotReleased = UINT64_MAX;
  MempoolId id;
  // The first event of the run of segment releases (an empty_cache) that gave its segments back
  // once its graphs were gone, or kNotReleased.
  uint64_t released_at = kNotReleased;
};

// A segment freed before the end whose pool the requests around it on its stream leave open:
// its requests went to one pool or the other (see sim/trace/private_pool_inference.hpp).
struct PoolGuess {
  // A pool of its own, gone before the end: the private pool of graphs dropped, and the cache
  // emptied, before the trace's last event (no final segment names it).
  static constexpr uint16_t kVanishedPool = UINT16_MAX;
  uint32_t group;          // the inference's name for the segment
  uint64_t first_request;  // the event of its first alloc; 0 for a segment there at the first
  uint16_t taken, other;   // the pool inferred (0: ordinary, k: private_pools[k - 1]), the other
  // A third it may have been, if any: the ordinary pools, for a segment whose first request came
  // between two different pools' on its stream (between two captures).
  std::optional<uint16_t> third = std::nullopt;
  uint64_t begin = 0, end = 0;  // the recorded segment's addresses
  uint64_t released = 0;        // the event that released it
  // The guesses whose requests follow one another on one stream with no request of a known pool
  // between share a stretch (one capture may have filled them all), if any.
  std::optional<uint32_t> stretch = std::nullopt;
};

struct Trace {
  std::string source;  // file name, for messages
  int device = 0;      // the CUDA device the events were recorded on (a snapshot's index)
  std::vector<TraceEvent> events;
  std::vector<Frame> frames;
  std::vector<std::vector<uint32_t>> stacks;  // frame indices, innermost first
  std::optional<AllocConf> settings;          // the allocator settings recorded with the trace
  std::vector<SnapshotSegment> segments;      // the state at the end of the trace
  std::vector<Annotation> annotations;
  // The "annotate" entries (PyTorch 2.14 on: torch.cuda.memory._annotate_tensor/_memory): the
  // text attached to the live block at `address`, at event `event`.
  struct BlockAnnotation {
    uint64_t event = 0;
    uint64_t address = 0;
    std::string text;
  };
  std::vector<BlockAnnotation> block_annotations;
  // With private pools only: the pools, and per event the pool its request went to (0: the
  // ordinary pools, k: private_pools[k - 1]); both empty otherwise.
  std::vector<PrivatePoolUse> private_pools;
  std::vector<uint16_t> request_pools;
  // Per event, 1 where its request's pool is that of a segment whose pool is a guess
  // (pool_guesses): the replays that settle the guesses may turn it.
  std::vector<uint8_t> request_pool_guessed;
  // The private pool (k as above) of each segment there before the first event that belonged to
  // one, by the address where it starts, in address order: a history that starts mid-run restores
  // them into their pools.
  std::vector<std::pair<uint64_t, uint16_t>> initial_pools;
  std::vector<PoolGuess> pool_guesses;  // where the inference could have gone either way
  // The events a recorder marked as a CUDA graph capture's, with the pool's id, in event order
  // (sim/trace/recorder_marks.hpp); empty where the trace has no marks.
  std::vector<std::pair<uint64_t, MempoolId>> capture_marks;
  // The pools of those marks that were torch.cuda.MemPools (use_mem_pool blocks), each once: a
  // MemPool's pool goes back when the recorder marks it deleted (RecordedCall::kFreeMemPool), not
  // when its segments' releases say its graphs were gone.
  std::vector<MempoolId> mem_pools;
  // Where allocsim's recorder marked every call that reaches the allocator: the first event it
  // marked, and the calls it counted after that one, in event order.
  std::optional<uint64_t> calls_marked_from;
  std::vector<RecordedCall> recorded_calls;
  std::vector<MemPoolOptions> mem_pool_options;  // the MemPools of this device made with options
  // The device's memory as allocsim's recorder read it (cudaMemGetInfo's total): the device a
  // replay runs on where none is given, and what a memory fraction is a fraction of.
  std::optional<uint64_t> device_memory;
  // The allocator settings strings the run set while recorded, in order (RecordedCall::settings);
  // `settings` above is then what was in force where the history starts.
  std::vector<std::string> settings_changes;
  std::optional<HostMemory> host_memory;  // where the snapshot records pinned host memory
  // False for a trace no run recorded (predict's): its addresses only pair frees with allocations,
  // and a replay placing its blocks elsewhere departs from nothing.
  bool addresses_recorded = true;
  // A PyTorch newer than 2.14 writes internal_metadata: shown as it is (JSON text), not read.
  std::optional<std::string> internal_metadata;
  // The oldest PyTorch release that writes what the snapshot holds, and what tells it (nullopt:
  // nothing newer than 2.11's fields).
  std::optional<TorchVersion> torch_version;
  std::string torch_version_evidence;
  // What the reader went on past: decoration it could not use and kept as unknown. One line each,
  // for the user (the CLI prints them and the JSON report lists them).
  std::vector<std::string> warnings;
};

// Whether the recorded run ended in an OOM: it recorded one and no request after it (a run that
// caught its OOMs, as cuDNN's algorithm search does, went on to request more).
bool ended_in_oom(const Trace& trace);

}  // namespace allocsim
