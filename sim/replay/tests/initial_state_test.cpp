#include "sim/replay/initial_state.hpp"

#include <gtest/gtest.h>

namespace allocsim {
namespace {

constexpr uint64_t kSegment = uint64_t{20} << 20;
constexpr uint64_t kBase = uint64_t{1} << 40;

TraceEvent event(TraceAction action, uint64_t addr, uint64_t size) {
  return TraceEvent{.action = action, .addr = addr, .size = size};
}

// A segment allocated, one block in it allocated and freed, the segment left at the end.
Trace whole_trace() {
  Trace trace;
  trace.events = {event(TraceAction::kSegmentAlloc, kBase, kSegment),
                  event(TraceAction::kAlloc, kBase, 4096),
                  event(TraceAction::kFreeRequested, kBase, 4096),
                  event(TraceAction::kFreeCompleted, kBase, 4096)};
  trace.segments = {{kBase, kSegment, 0, false, false, {{kBase, kSegment, 0, false, false}}}};
  return trace;
}

// What a replay learns from the segment events alone, and from all events.
struct Scans {
  explicit Scans(const Trace& trace) {
    for (const TraceEvent& e : trace.events) {
      segments_only.observe_segment(e);
      all.observe_segment(e);
      all.observe_block(e);
    }
  }
  HistoryScan segments_only;
  HistoryScan all;
};

TEST(HistoryScan, ATraceThatAllocatesEverySegmentItHoldsIsWhole) {
  const Trace trace = whole_trace();
  const Scans scans(trace);
  EXPECT_TRUE(scans.segments_only.whole(trace));
  EXPECT_TRUE(scans.all.finish(trace, AllocConf{}).empty());
}

TEST(HistoryScan, ASegmentFreedButNeverAllocatedStartsTheTrace) {
  Trace trace = whole_trace();
  trace.events.push_back(event(TraceAction::kSegmentFree, kBase + kSegment, kSegment));
  const Scans scans(trace);
  EXPECT_FALSE(scans.segments_only.whole(trace));
  const InitialState initial = scans.all.finish(trace, AllocConf{});
  ASSERT_EQ(initial.segments.size(), 1u);
  EXPECT_EQ(initial.segments[0].address, kBase + kSegment);
}

TEST(HistoryScan, ASegmentFreedBeforeItIsAllocatedAgainStartsTheTrace) {
  Trace trace = whole_trace();
  trace.events.insert(trace.events.begin(), event(TraceAction::kSegmentFree, kBase, kSegment));
  const Scans scans(trace);
  EXPECT_FALSE(scans.segments_only.whole(trace));
  EXPECT_FALSE(scans.all.finish(trace, AllocConf{}).empty());
}

TEST(HistoryScan, AFinalSegmentNeverAllocatedStartsTheTraceWithItsLiveBlocks) {
  Trace trace = whole_trace();
  const uint64_t other = kBase + 4 * kSegment;
  trace.segments.push_back({other, kSegment, 0, false, false, {{other, 8192, 8000, true, true}}});
  const Scans scans(trace);
  EXPECT_FALSE(scans.segments_only.whole(trace));
  const InitialState initial = scans.all.finish(trace, AllocConf{});
  ASSERT_EQ(initial.segments.size(), 1u);
  EXPECT_EQ(initial.segments[0].address, other);
  ASSERT_EQ(initial.segments[0].blocks.size(), 1u);
  EXPECT_EQ(initial.segments[0].blocks[0].address, other);
}

TEST(HistoryScan, BlocksFreedOutsideAnySegmentLeaveItWhole) {
  Trace trace = whole_trace();
  // A block from before the trace, in no segment known to have been there: nothing to restore.
  trace.events.push_back(event(TraceAction::kFreeRequested, kBase + 16 * kSegment, 4096));
  const Scans scans(trace);
  EXPECT_TRUE(scans.segments_only.whole(trace));
  EXPECT_TRUE(scans.all.finish(trace, AllocConf{}).empty());
}

TEST(HistoryScan, ExpandableRangesTheTraceMapsAndUnmapsLeaveItWhole) {
  Trace trace = whole_trace();
  const uint64_t at = kBase + 8 * kSegment;
  trace.events.push_back(event(TraceAction::kSegmentMap, at, 3 * kSegment));
  trace.events.push_back(event(TraceAction::kSegmentUnmap, at + kSegment, kSegment));
  trace.segments.push_back({at, kSegment, 0, false, true, {}});
  trace.segments.push_back({at + 2 * kSegment, kSegment, 0, false, true, {}});
  const Scans scans(trace);
  EXPECT_TRUE(scans.segments_only.whole(trace));
}

// Mapped at the end and not mapped by the trace, or unmapped by it: mapped at its first event,
// in the reservation that starts at the lowest address known of it.
TEST(HistoryScan, ExpandableRangesTheTraceDidNotMapWereThereAtItsStart) {
  Trace trace = whole_trace();
  const uint64_t at = kBase + 8 * kSegment;
  // From before, a large-pool request (so is its range), 1 MiB short of the range's end.
  constexpr uint64_t kBlock = uint64_t{4} << 20;
  const uint64_t block_at = at + kSegment - kBlock - (uint64_t{1} << 20);
  trace.events.push_back(event(TraceAction::kFreeRequested, block_at, kBlock));
  trace.events.push_back(event(TraceAction::kSegmentUnmap, at, kSegment));
  trace.events.push_back(event(TraceAction::kSegmentMap, at + kSegment, kSegment));
  trace.segments.push_back({at + kSegment, 2 * kSegment, 0, false, true, {}});
  const Scans scans(trace);
  EXPECT_FALSE(scans.segments_only.whole(trace));
  const InitialState initial = scans.all.finish(trace, AllocConf{});
  ASSERT_EQ(initial.segments.size(), 2u);  // [at, +20 MiB) unmapped later; [+40 MiB, +60 MiB)
  for (const InitialSegment& seg : initial.segments) {
    EXPECT_TRUE(seg.expandable);
    EXPECT_FALSE(seg.small);
    EXPECT_EQ(seg.base, at);
  }
  EXPECT_EQ(initial.segments[0].address, at);
  EXPECT_EQ(initial.segments[0].size, kSegment);
  EXPECT_EQ(initial.segments[1].address, at + 2 * kSegment);
  EXPECT_EQ(initial.segments[1].size, kSegment);
  ASSERT_EQ(initial.segments[0].blocks.size(), 1u);
  EXPECT_EQ(initial.segments[0].blocks[0].address, block_at);
  // An expandable segment's block is split off whatever is left, 1 MiB too.
  EXPECT_EQ(initial.segments[0].blocks[0].size, kBlock);
}

// A 64 MiB segment from before the trace, whole and free at its end. A block of 4 MiB in it from
// before is freed during the trace; while it lives, the trace allocates 960 KiB past its 4 MiB:
// the free space after it began there, so the allocator had left that much unsplit in it (a
// large-pool remainder of at most 1 MiB is never split off). A second block, freed with nothing
// allocated after it while it lived, can only be taken as split off at its rounded size.
TEST(HistoryScan, ABlockFromBeforeReachesWhereTheTraceFirstAllocatedAfterIt) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  const uint64_t seg = kBase + 8 * kSegment;
  const uint64_t second = seg + 32 * kMiB;
  Trace trace;
  trace.events = {event(TraceAction::kAlloc, seg + 4 * kMiB + 960 * 1024, 8 * kMiB),
                  event(TraceAction::kFreeRequested, seg, 4 * kMiB),
                  event(TraceAction::kFreeCompleted, seg, 4 * kMiB),
                  event(TraceAction::kFreeRequested, second, 4 * kMiB),
                  event(TraceAction::kFreeCompleted, second, 4 * kMiB),
                  event(TraceAction::kFreeRequested, seg + 4 * kMiB + 960 * 1024, 8 * kMiB),
                  event(TraceAction::kFreeCompleted, seg + 4 * kMiB + 960 * 1024, 8 * kMiB)};
  trace.segments = {{seg, 64 * kMiB, 0, false, false, {{seg, 64 * kMiB, 0, false, false}}}};
  const Scans scans(trace);
  const InitialState initial = scans.all.finish(trace, AllocConf{});
  ASSERT_EQ(initial.segments.size(), 1u);
  const auto& blocks = initial.segments[0].blocks;
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].size, 4 * kMiB + 960 * 1024);
  EXPECT_EQ(blocks[1].size, 4 * kMiB);
  EXPECT_EQ(initial.blocks_of_assumed_size, 1u);
}

}  // namespace
}  // namespace allocsim
