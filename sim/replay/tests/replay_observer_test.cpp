// The replay engine's observers: watching a replay (the simulated trace, the timeline, invariant
// checks, block callbacks) sees every block and changes nothing the plain replay reports.
#include <gtest/gtest.h>

#include <string>

#include "backends/simulated_device.hpp"
#include "sim/replay/block_observer.hpp"
#include "sim/replay/replay.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim {
namespace {

struct CountingObserver final : BlockObserver {
  void allocated(uint64_t, uint64_t size, uint64_t) override {
    ++allocs;
    bytes += size;
  }
  void freeing(uint64_t, uint64_t size, uint64_t) override {
    ++frees;
    bytes -= size;
  }
  uint64_t allocs = 0, frees = 0;
  int64_t bytes = 0;  // what the observer saw live
};

class ReplayObserverTest : public ::testing::TestWithParam<std::string> {
 protected:
  Trace trace() const {
    return read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + GetParam() +
                              ".pickle.gz");
  }
};

TEST_P(ReplayObserverTest, WatchingChangesNothingTheReportSays) {
  const Trace t = trace();
  ReplayOptions plain;
  plain.capacity = uint64_t{24} << 30;
  plain.on_oom = OnOom::kContinue;
  ReplayOptions watched = plain;
  watched.record_trace = true;
  watched.record_timeline = true;
  watched.check_invariants = true;
  const ReplayResult a = replay(t, plain);
  const ReplayResult b = replay(t, watched);
  EXPECT_EQ(a.stats, b.stats);
  EXPECT_EQ(a.device_ops, b.device_ops);
  EXPECT_EQ(a.live_blocks.size(), b.live_blocks.size());
  EXPECT_EQ(a.outcome.ooms, b.outcome.ooms);
  EXPECT_EQ(a.addresses.mismatches, b.addresses.mismatches);
  EXPECT_EQ(a.fragmentation.reserved_unallocated_at_peak,
            b.fragmentation.reserved_unallocated_at_peak);
  EXPECT_TRUE(a.recording.trace.empty());
  EXPECT_TRUE(a.recording.timeline.empty());
  // The watched replay kept one timeline point per request and the run as a trace.
  ASSERT_FALSE(b.recording.timeline.empty());
  EXPECT_EQ(b.recording.timeline.back().allocated, b.stats.allocated_bytes[kAggregate].current);
  EXPECT_EQ(b.recording.timeline.back().reserved, b.stats.reserved_bytes[kAggregate].current);
  uint64_t allocs = 0;
  for (const TraceEvent& e : b.recording.trace) allocs += e.action == TraceAction::kAlloc;
  EXPECT_EQ(static_cast<int64_t>(allocs), b.stats.allocation[kAggregate].allocated);
  EXPECT_FALSE(b.recording.final_segments.empty());
}

// The segment map kept after an event is the state a replay of the events up to it ends with.
TEST_P(ReplayObserverTest, ASegmentMapIsTheStateAfterItsEvent) {
  const Trace t = trace();
  ReplayOptions options;
  options.capacity = uint64_t{80} << 30;
  options.record_trace = true;
  // Events that end a request, before an alloc: cutting the trace there leaves no free without
  // its completion (which would make it a deferred free) and no segment event without its alloc.
  const auto request_end = [&](uint64_t from) {
    for (uint64_t i = from; i + 1 < t.events.size(); ++i) {
      const TraceAction a = t.events[i].action, next = t.events[i + 1].action;
      if ((a == TraceAction::kAlloc || a == TraceAction::kFreeCompleted) &&
          next == TraceAction::kAlloc)
        return i;
    }
    return uint64_t{0};
  };
  const uint64_t last = t.events.size() - 1;
  options.segment_maps_at = {request_end(0), request_end(last / 3), request_end(last / 2), last};
  const ReplayResult r = replay(t, options);
  ASSERT_EQ(r.recording.segment_maps.size(), options.segment_maps_at.size());
  for (size_t i = 0; i < options.segment_maps_at.size(); ++i) {
    const uint64_t event = options.segment_maps_at[i];
    const SegmentMapAt& map = r.recording.segment_maps[i];
    EXPECT_EQ(map.event_index, event);
    Trace head = t;
    head.events.resize(event + 1);
    head.segments.clear();  // the state at the end of the whole trace, not of its head
    if (!head.request_pools.empty()) head.request_pools.resize(event + 1);
    ReplayOptions upto = options;
    upto.segment_maps_at.clear();
    const std::vector<SnapshotSegment> expected = replay(head, upto).recording.final_segments;
    ASSERT_EQ(map.segments.size(), expected.size()) << "after event " << event;
    for (size_t s = 0; s < expected.size(); ++s) {
      EXPECT_EQ(map.segments[s].address, expected[s].address);
      EXPECT_EQ(map.segments[s].total_size, expected[s].total_size);
      ASSERT_EQ(map.segments[s].blocks.size(), expected[s].blocks.size());
      for (size_t b = 0; b < expected[s].blocks.size(); ++b) {
        EXPECT_EQ(map.segments[s].blocks[b].size, expected[s].blocks[b].size);
        EXPECT_EQ(map.segments[s].blocks[b].allocated, expected[s].blocks[b].allocated);
        EXPECT_EQ(map.segments[s].blocks[b].active, expected[s].blocks[b].active);
      }
    }
  }
  // At the last event: the replay's own final state.
  EXPECT_EQ(r.recording.segment_maps.back().segments.size(), r.recording.final_segments.size());
}

TEST_P(ReplayObserverTest, ABlockObserverSeesEveryBlockOnADeviceOfTheCallers) {
  const Trace t = trace();
  ReplayOptions options;
  options.capacity = uint64_t{80} << 30;
  options.release_all_at_end = true;
  SimulatedDevice plain_device(options.capacity, uint64_t{750} << 20);
  const ReplayResult plain = replay_on(plain_device, t, options);
  SimulatedDevice device(options.capacity, uint64_t{750} << 20);
  CountingObserver blocks;
  const ReplayResult watched = replay_on(device, t, options, &blocks);
  EXPECT_EQ(plain.stats, watched.stats);
  EXPECT_EQ(plain.device_ops, watched.device_ops);
  // Every block allocated was seen, and released at the end: nothing is left on the device.
  EXPECT_EQ(static_cast<int64_t>(blocks.allocs), watched.stats.allocation[kAggregate].allocated);
  EXPECT_EQ(blocks.frees, blocks.allocs);
  EXPECT_EQ(blocks.bytes, 0);
  EXPECT_EQ(device.live_segments(), 0u);
  EXPECT_EQ(device.used_bytes(), 0u);
}

// Workloads with deferred frees on other streams, expandable segments, and a plain training run;
// none recorded an OOM (a recorded OOM's retry allocates a block no observer is told of).
INSTANTIATE_TEST_SUITE_P(Workloads, ReplayObserverTest,
                         ::testing::Values("multistream_default", "gpt2_expandable",
                                           "resnet50_default"));

}  // namespace
}  // namespace allocsim
