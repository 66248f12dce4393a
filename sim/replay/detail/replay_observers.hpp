// What watches a replay request by request. A ReplayRun calls its observer at these points:
//   started(run, restored)           the restored blocks are in slots [0, restored)
//   before(run, request)             before the allocator sees the request
//   allocated(run, slot, address, event)   an alloc got its block
//   freeing(run, slot)               a live block is about to be freed
//   after(run, request)              the allocator has done the request (before the replay notes
//                                    synchronisations: run.synced() says whether one happened)
//   finished(run, result)            the figures are taken, nothing is released yet
// NoObserver does nothing, so that a replay nobody watches compiles to a loop without those calls;
// WatchingObserver does whatever the options ask for.
#pragma once

#include <cstdint>
#include <vector>

#include "core/caching_allocator.hpp"
#include "sim/replay/block_observer.hpp"
#include "sim/replay/detail/request_stream.hpp"
#include "sim/replay/replay.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim::replay_engine {

enum class SlotState : uint8_t { kNone, kLive, kPending, kDone, kFailed };

// What a replay made of one slot.
struct SlotRecord {
  // The alloc event of the block the slot holds (kBeforeTrace: restored). Kept by the replay, not
  // by the requests: after a stop at an OOM they go on to reuse slots the replay still holds.
  uint64_t event = kBeforeTrace;
  BlockId block = kNoBlock;
  SlotState state = SlotState::kNone;
};

struct NoObserver {
  static constexpr bool kWatches = false;  // a replay nothing watches adds no calls either
  template <class Run>
  void started(const Run&, uint32_t) {}
  template <class Run>
  void before(const Run&, const Request&) {}
  template <class Run>
  void allocated(const Run&, uint32_t, uint64_t, uint64_t) {}
  template <class Run>
  void freeing(const Run&, uint32_t) {}
  template <class Run>
  void after(const Run&, const Request&) {}
  template <class Run>
  void finished(const Run&, ReplayResult&) {}
};

// The simulated trace (record_trace: the run as PyTorch's trace would record it, stacks referring
// to the replayed trace's, and the allocator's segments at the end), the timeline
// (record_timeline), the invariant checks (check_invariants), and a BlockObserver. The replay it
// watches also makes the what-if's empty_cache() calls (empty_cache_before), so that one that
// makes none has no test for them.
class WatchingObserver {
 public:
  static constexpr bool kWatches = true;
  static bool wanted(const ReplayOptions& options, const BlockObserver* blocks) {
    return options.record_trace || options.record_timeline || options.check_invariants ||
           !options.segment_maps_at.empty() || !options.empty_cache_before.empty() ||
           blocks != nullptr;
  }

  WatchingObserver(const ReplayOptions& options, BlockObserver* blocks)
      : blocks_(blocks),
        record_trace_(options.record_trace),
        record_timeline_(options.record_timeline),
        check_invariants_(options.check_invariants),
        segment_maps_at_(options.segment_maps_at) {}

  template <class Run>
  void started(const Run& run, uint32_t restored) {
    if (!record_trace_) return;
    slot_address_.resize(run.slots().size(), 0);
    for (uint32_t s = 0; s < restored; ++s)
      slot_address_[s] = run.allocator().block_address(run.slots()[s].block);
  }

  template <class Run>
  void before(const Run& run, const Request& r) {
    // The state after every event before this request's is the state now.
    while (next_map_ < segment_maps_at_.size() && segment_maps_at_[next_map_] < r.event_index)
      take_segment_map(run, segment_maps_at_[next_map_++]);
    const bool slot_request = r.kind == Request::kAlloc || r.kind == Request::kFree ||
                              r.kind == Request::kFreeDeferred || r.kind == Request::kCompleteFree;
    state_before_ = record_trace_ && slot_request ? run.slots()[r.slot].state : SlotState::kNone;
  }

  template <class Run>
  void allocated(const Run& run, uint32_t slot, uint64_t address, uint64_t event_index) {
    if (record_trace_) {
      if (slot >= slot_address_.size()) slot_address_.resize(run.slots().size(), 0);
      slot_address_[slot] = address;
    }
    if (blocks_) {
      blocks_->allocated(address, run.allocator().block_size(run.slots()[slot].block), event_index);
    }
  }

  template <class Run>
  void freeing(const Run& run, uint32_t slot) {
    const SlotRecord& record = run.slots()[slot];
    if (!blocks_ || record.event == kBeforeTrace) return;  // restored blocks were never filled
    blocks_->freeing(run.allocator().block_address(record.block),
                     run.allocator().block_size(record.block), record.event);
  }

  template <class Run>
  void after(Run& run, const Request& r) {
    if (record_trace_) emit(run, r);
    if (record_timeline_) {
      const DeviceStats& stats = run.allocator().stats();
      timeline_.push_back({r.event_index, stats.allocated_bytes.current(),
                           stats.active_bytes().current(), stats.reserved_bytes.current()});
    }
    if (check_invariants_) run.allocator().check_invariants();
  }

  template <class Run>
  void finished(const Run& run, ReplayResult& result) {
    while (next_map_ < segment_maps_at_.size())
      take_segment_map(run, segment_maps_at_[next_map_++]);
    result.recording.segment_maps = std::move(segment_maps_);
    result.recording.timeline = std::move(timeline_);
    if (!record_trace_) return;
    result.recording.trace = std::move(trace_);
    result.recording.trace_origins = std::move(trace_origins_);
    result.recording.final_segments = segments_of(run);
  }

 private:
  // The allocator's mapped segments and their blocks, as a snapshot lists them.
  template <class Run>
  static std::vector<SnapshotSegment> segments_of(const Run& run) {
    std::vector<SnapshotSegment> segments;
    run.allocator().for_each_block([&](const BlockInfo& b) {
      if (!b.mapped) return;
      if (b.segment_start || segments.empty()) {
        segments.push_back({b.ptr, 0, b.stream, b.small, b.expandable, {}, b.pool});
      }
      SnapshotSegment& seg = segments.back();
      seg.total_size += b.size;
      seg.blocks.push_back(
          {b.ptr, b.size, b.requested_size, b.allocated || b.pending_free, b.allocated});
    });
    return segments;
  }

  template <class Run>
  void take_segment_map(const Run& run, uint64_t event_index) {
    segment_maps_.push_back({event_index, segments_of(run)});
  }

  // The trace events of request `r`, in the order PyTorch records them.
  template <class Run>
  void emit(const Run& run, const Request& r) {
    const auto& slots = run.slots();
    if (run.synced()) {  // the deferred frees a synchronisation completed come before its releases
      for (uint32_t s : run.pending()) {
        if (slots[s].state == SlotState::kPending) {
          push(run, TraceAction::kFreeCompleted, slot_address_[s], requested_of(run, s), r.stream,
               r.event_index);
        }
      }
    }
    const auto& ops = run.allocator().device_ops();
    for (; device_ops_emitted_ < ops.size(); ++device_ops_emitted_) {
      const DeviceOp& op = ops[device_ops_emitted_];
      static constexpr TraceAction kAction[] = {TraceAction::kSegmentAlloc,
                                                TraceAction::kSegmentFree, TraceAction::kSegmentMap,
                                                TraceAction::kSegmentUnmap};
      push(run, kAction[static_cast<int>(op.kind)], op.address, op.size, op.stream, r.event_index);
    }
    switch (r.kind) {
      case Request::kAlloc:
        if (slots[r.slot].state == SlotState::kLive) {
          push(run, TraceAction::kAlloc, slot_address_[r.slot], r.size, r.stream, r.event_index);
        } else {
          push_oom(run, r);
        }
        break;
      case Request::kOom:
        if (run.allocator().last_oom()) push_oom(run, r);
        break;
      case Request::kFree:
      case Request::kFreeDeferred:
      case Request::kCompleteFree:
        if (state_before_ == SlotState::kLive) {
          push(run, TraceAction::kFreeRequested, slot_address_[r.slot], requested_of(run, r.slot),
               r.stream, r.event_index);
        }
        if ((state_before_ == SlotState::kLive && r.kind != Request::kFreeDeferred) ||
            (state_before_ == SlotState::kPending && r.kind == Request::kCompleteFree)) {
          push(run, TraceAction::kFreeCompleted, slot_address_[r.slot], requested_of(run, r.slot),
               r.stream, r.event_index);
        }
        break;
      default:
        break;
    }
  }

  template <class Run>
  void push(const Run& run, TraceAction action, uint64_t addr, uint64_t size, StreamId stream,
            uint64_t event_index) {
    const TraceEvent& origin = run.events()[event_index];
    trace_origins_.push_back(event_index);
    trace_.push_back({.action = action,
                      .stack = origin.stack,
                      .addr = addr,
                      .size = size,
                      .stream = stream,
                      .time_us = origin.time_us});
  }

  template <class Run>
  void push_oom(const Run& run, const Request& r) {
    const OutOfMemory& oom = *run.allocator().last_oom();
    if (oom.rejected) return;  // PyTorch records no entry for a throw_on_cudamalloc_oom refusal
    const TraceEvent& origin = run.events()[r.event_index];
    trace_origins_.push_back(r.event_index);
    trace_.push_back({.action = TraceAction::kOom,
                      .stack = origin.stack,
                      .size = oom.rounded,
                      .stream = r.stream,
                      .device_free = oom.device_free,
                      .time_us = origin.time_us});
  }

  template <class Run>
  static uint64_t requested_of(const Run& run, uint32_t slot) {
    const uint64_t event = run.slots()[slot].event;
    return event == kBeforeTrace ? 0 : run.events()[event].size;
  }

  BlockObserver* const blocks_;
  const bool record_trace_;
  const bool record_timeline_;
  const bool check_invariants_;
  const std::vector<uint64_t> segment_maps_at_;
  size_t next_map_ = 0;
  std::vector<SegmentMapAt> segment_maps_;
  SlotState state_before_ = SlotState::kNone;
  std::vector<uint64_t> slot_address_;  // each slot's block address (record_trace)
  size_t device_ops_emitted_ = 0;
  std::vector<TraceEvent> trace_;
  std::vector<uint64_t> trace_origins_;  // per entry of trace_, the event it is of
  std::vector<TimelinePoint> timeline_;
};

}  // namespace allocsim::replay_engine
