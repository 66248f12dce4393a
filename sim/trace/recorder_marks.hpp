// Recorder marks: what a PyTorch trace does not record, written by the recorder into each trace
// entry's user_metadata (torch.cuda.memory._set_memory_metadata), as fields "key=value" joined by
// ';'. Every entry recorded while the metadata is set carries it.
//
// A capture's private pool. While a CUDA graph capture is underway the recorder sets
// "cuda_graph_pool=A,B" (the pool's id: a handle made before the capture, as CUDAGraph.pool()
// answers only after it), and takes it out when the capture ends:
//
//   pool = torch.cuda.graph_pool_handle()
//   with torch.cuda.graph(g, pool=pool):
//       torch.cuda.memory._set_memory_metadata(f"cuda_graph_pool={pool[0]},{pool[1]}")
//       ...
//       torch.cuda.memory._set_memory_metadata("")
//
// Every request (and OOM) recorded in between carries the mark; the replay serves it from that
// pool instead of inferring the pool (sim/trace/private_pool_inference.hpp). A
// torch.cuda.use_mem_pool(pool) block is marked the same way, as "mem_pool=A,B@D" (the MemPool's
// id and the block's device; a recorder before it wrote no device): every request of the thread
// on that device in it goes to that pool, on any stream.
//
// The calls that reach the allocator and leave no entry of their own, counted, where the
// recorder marks them all ("allocsim_recorder=1", allocsim.torch.record_memory_history):
//   empty_cache=N               torch.cuda.empty_cache() calls so far (every device's cache)
//   memory_fraction.D=F         the fraction set_per_process_memory_fraction last set on device D
//   reset_peak.D=N              reset_peak_memory_stats(D) calls so far
//   reset_accumulated.D=N       reset_accumulated_memory_stats(D) calls so far
//   empty_cache_in_pool.D=N     of the empty_cache() calls, those made while a capture or a
//                               use_mem_pool block routed device D's requests to a private pool
//   pool_freed=N                torch.cuda.MemPool objects deleted so far (their destructor
//                               releases the pool's use and empties that pool's cache); the
//                               snapshot's "allocsim_recorder" "freed_pools" lists their ids in
//                               the order they went, each with the device it was made on (the
//                               one device whose cache its destructor changes)
//   settings=N                  allocator settings strings set so far
//                               (torch._C._accelerator_setAllocatorSettings, torch.cuda.memory.
//                               _set_allocator_settings; every device's); the snapshot's
//                               "allocsim_recorder" "settings" lists the strings set from the
//                               history's start on, in order, and "start_settings" the
//                               allocator_settings in force where it started
//   last=K                      the kind of the call made last (a count's name above)
//   calls=N;recent=S            calls counted so far, of every kind, and the kinds of the last
//                               ones, oldest first, a letter each (e empty_cache, f
//                               memory_fraction, p reset_peak, a reset_accumulated, d
//                               pool_freed, s settings; at most 16), a call of one device other
//                               than 0
//                               followed by the device's index ("p1"): the order of the calls
//                               between two entries, device by device, where no more than that
//                               came between them
// The recorder sets the new counts before it makes a call, so the entries the call records carry
// them: a call lies before the first entry whose counts show it (Trace::recorded_calls). Where
// calls of several kinds came between two entries, `last` says which came last.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/types.hpp"

namespace allocsim {

inline constexpr std::string_view kCaptureMarkPrefix = "cuda_graph_pool=";
inline constexpr std::string_view kMemPoolMarkPrefix = "mem_pool=";

// One device's counts in a recorder's mark.
struct DeviceCallCounts {
  int device = 0;
  std::optional<double> memory_fraction;  // none set while the recorder ran
  uint64_t reset_peak = 0;
  uint64_t reset_accumulated = 0;
  uint64_t empty_cache_in_pool = 0;  // of empty_cache's, those made while a pool took its requests
  bool operator==(const DeviceCallCounts&) const = default;
};

// A torch.cuda.MemPool made with options that change what the allocator does with its pool (the
// recorder's 'pool_options'): PyTorch sets them as the MemPool is made, before any request.
struct MemPoolOptions {
  MempoolId pool{};
  bool use_on_oom = false;  // CachingAllocator::set_use_on_oom
  bool no_split = false;    // CachingAllocator::set_no_split
  bool operator==(const MemPoolOptions&) const = default;
};

// A call that reaches the allocator but records no entry of its own, made before event `event`.
struct RecordedCall {
  enum Kind : uint8_t {
    kSetMemoryFraction,
    kEmptyCache,
    kResetAccumulatedStats,
    kResetPeakStats,
    kFreeMemPool,  // a torch.cuda.MemPool deleted
    kSetAllocatorSettings,
  };
  uint64_t event = 0;
  Kind kind = kEmptyCache;
  double memory_fraction = 0;  // kSetMemoryFraction's
  MempoolId pool{};            // kFreeMemPool's
  // kEmptyCache's: made while a capture or a use_mem_pool block routed this device's requests to a
  // private pool (the entries before and after it both marked so).
  bool during_capture = false;
  // kSetMemoryFraction's: the cap in force where the history starts (the recorder's start mark,
  // or a first mark after calls it did not see), not a change the run made while recorded.
  bool starting_cap = false;
  uint32_t settings = 0;  // kSetAllocatorSettings's: its string in Trace::settings_changes
  bool operator==(const RecordedCall&) const = default;
};

struct RecorderMark {
  std::optional<MempoolId> capture_pool;  // a capture's, or a use_mem_pool block's
  bool mem_pool = false;                  // capture_pool is a use_mem_pool block's
  // Where that block is one device's ("mem_pool=A,B@D"): the device, and the pool the other
  // devices' requests go to (the capture's the block began inside), if any.
  std::optional<int> mem_pool_device;
  std::optional<MempoolId> other_devices_pool;
  bool marks_every_call = false;  // allocsim's recorder: the counts below are kept
  std::optional<RecordedCall::Kind> last_call;
  uint64_t empty_cache = 0;
  uint64_t pools_freed = 0;
  uint64_t settings = 0;
  std::optional<uint64_t> calls;  // every call counted so far
  // One of the last calls: its kind, and the device where it is one device's (empty_cache() is
  // every device's).
  struct RecentCall {
    RecordedCall::Kind kind = RecordedCall::kEmptyCache;
    std::optional<int> device;
    bool operator==(const RecentCall&) const = default;
  };
  std::vector<RecentCall> recent;  // the last calls, oldest first
  // The kind a letter of `recent` names, or nullopt.
  static std::optional<RecordedCall::Kind> kind_of_letter(char letter);
  std::vector<DeviceCallCounts> devices;  // by device, those with any count

  // The counts of `device` (all zero where the mark names none).
  DeviceCallCounts of_device(int device) const;
  bool operator==(const RecorderMark&) const = default;
};

// The mark a user_metadata string makes, or nullopt for any other string (a user's own).
std::optional<RecorderMark> parse_recorder_mark(std::string_view metadata);

}  // namespace allocsim
