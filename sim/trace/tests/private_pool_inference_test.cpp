// Which requests a CUDA graph's private pool served, inferred from the final segments.
#include <gtest/gtest.h>

#include "sim/trace/private_pool_inference.hpp"

namespace allocsim {
namespace {

constexpr uint64_t MiB = 1 << 20;
constexpr StreamId kCapture = 7;
constexpr MempoolId kPool{1, 0};

TraceEvent ev(TraceAction action, uint64_t addr, uint64_t size, StreamId stream = kCapture) {
  return TraceEvent{.action = action, .addr = addr, .size = size, .stream = stream};
}

SnapshotSegment segment(uint64_t address, uint64_t size, MempoolId pool) {
  return SnapshotSegment{address, size, kCapture, false, false, {}, pool};
}

TEST(PrivatePoolInference, EachAllocTakesThePoolOfTheSegmentItFellIn) {
  Trace t;
  t.events = {ev(TraceAction::kSegmentAlloc, 100 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 100 * MiB, 4 * MiB),
              ev(TraceAction::kSegmentAlloc, 200 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 200 * MiB, 4 * MiB)};
  t.segments = {segment(100 * MiB, 20 * MiB, {}), segment(200 * MiB, 20 * MiB, kPool)};
  const PrivatePoolInference inference = infer_private_pools(t);
  EXPECT_EQ(inference.allocs, 2u);
  EXPECT_EQ(inference.served, 1u);
  ASSERT_EQ(t.private_pools.size(), 1u);
  EXPECT_EQ(t.private_pools[0].id, kPool);
  EXPECT_EQ(t.request_pools, (std::vector<uint16_t>{0, 0, 0, 1}));
  EXPECT_TRUE(t.pool_guesses.empty());
  EXPECT_EQ(t.private_pools[0].released_at, PrivatePoolUse::kNotReleased);
}

TEST(PrivatePoolInference, AFreedSegmentBetweenOnePoolsRequestsIsThatPools) {
  Trace t;
  t.events = {ev(TraceAction::kSegmentAlloc, 200 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 200 * MiB, 4 * MiB),  // known: the pool
              ev(TraceAction::kSegmentAlloc, 300 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 300 * MiB, 15 * MiB),           // freed later
              ev(TraceAction::kAlloc, 200 * MiB + 4 * MiB, 4 * MiB),  // known: the pool
              ev(TraceAction::kFreeRequested, 300 * MiB, 15 * MiB),
              ev(TraceAction::kFreeCompleted, 300 * MiB, 15 * MiB),
              ev(TraceAction::kSegmentFree, 300 * MiB, 20 * MiB)};  // after its last request
  t.segments = {segment(200 * MiB, 20 * MiB, kPool)};
  infer_private_pools(t);
  EXPECT_EQ(t.request_pools[3], 1);
  EXPECT_TRUE(t.pool_guesses.empty());
  // Freed after the pool's last request: its graphs were gone by that release.
  EXPECT_EQ(t.private_pools[0].released_at, 7u);
}

// An OOM between two of one pool's requests on its stream came during that pool's capture; one
// beside a request whose pool is a guess, or outside the pool's requests, is left ordinary.
TEST(PrivatePoolInference, AnOomAmongAPoolsRequestsIsThatPools) {
  Trace t;
  t.events = {ev(TraceAction::kSegmentAlloc, 200 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 200 * MiB, 4 * MiB),  // the pool's
              ev(TraceAction::kOom, 0, 900 * MiB),
              ev(TraceAction::kAlloc, 200 * MiB + 4 * MiB, 4 * MiB),  // the pool's
              ev(TraceAction::kOom, 0, 900 * MiB),                    // after its last request
              ev(TraceAction::kSegmentAlloc, 100 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 100 * MiB, 4 * MiB)};  // ordinary
  t.segments = {segment(200 * MiB, 20 * MiB, kPool), segment(100 * MiB, 20 * MiB, {})};
  infer_private_pools(t);
  EXPECT_EQ(t.request_pools, (std::vector<uint16_t>{0, 1, 1, 1, 0, 0, 0}));
  // The request after the OOM in a segment freed before the end: its pool is a guess.
  t.events = {ev(TraceAction::kSegmentAlloc, 200 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 200 * MiB, 4 * MiB),
              ev(TraceAction::kOom, 0, 900 * MiB),
              ev(TraceAction::kSegmentAlloc, 300 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 300 * MiB, 15 * MiB),
              ev(TraceAction::kFreeRequested, 300 * MiB, 15 * MiB),
              ev(TraceAction::kFreeCompleted, 300 * MiB, 15 * MiB),
              ev(TraceAction::kSegmentFree, 300 * MiB, 20 * MiB)};
  t.segments = {segment(200 * MiB, 20 * MiB, kPool)};
  infer_private_pools(t);
  ASSERT_EQ(t.pool_guesses.size(), 1u);
  EXPECT_EQ(t.request_pools[2], 0);
}

// Marked captures: each marked request (and OOM) is its mark's pool, every other the ordinary
// pools', with nothing left to guess, even where no final segment names the pool.
TEST(PrivatePoolInference, MarkedCapturesNeedNoGuess) {
  constexpr MempoolId kGone{9, 0};
  Trace t;
  t.events = {ev(TraceAction::kSegmentAlloc, 300 * MiB, 20 * MiB, 0),
              ev(TraceAction::kAlloc, 300 * MiB, 4 * MiB, 0),  // ordinary, before the capture
              ev(TraceAction::kSegmentAlloc, 200 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 200 * MiB, 4 * MiB),  // marked
              ev(TraceAction::kOom, 0, 900 * MiB),          // marked
              ev(TraceAction::kFreeRequested, 200 * MiB, 4 * MiB),
              ev(TraceAction::kFreeCompleted, 200 * MiB, 4 * MiB),
              ev(TraceAction::kFreeRequested, 300 * MiB, 4 * MiB, 0),
              ev(TraceAction::kFreeCompleted, 300 * MiB, 4 * MiB, 0),
              ev(TraceAction::kSegmentFree, 300 * MiB, 20 * MiB, 0),
              ev(TraceAction::kSegmentFree, 200 * MiB, 20 * MiB)};  // the pool's graphs gone
  t.capture_marks = {{3, kGone}, {4, kGone}};
  const PrivatePoolInference inference = infer_private_pools(t);
  EXPECT_EQ(inference.served, 1u);
  ASSERT_EQ(t.private_pools.size(), 1u);
  EXPECT_EQ(t.private_pools[0].id, kGone);
  EXPECT_EQ(t.request_pools[1], 0);
  EXPECT_EQ(t.request_pools[3], 1);
  EXPECT_EQ(t.request_pools[4], 1);
  EXPECT_TRUE(t.pool_guesses.empty());
  EXPECT_EQ(t.private_pools[0].released_at, 9u);  // the run of releases that gave its segment back
}

// An expandable segment's page can pass from a freed pool to the next one while it stays mapped
// (CachingAllocator::erase_pool): each marked request goes to its own mark's pool, not to the last
// pool marked in the range.
TEST(PrivatePoolInference, EachMarkedRequestGoesToItsOwnMarksPool) {
  constexpr MempoolId kFirst{8, 0}, kNext{9, 0};
  Trace t;
  t.events = {ev(TraceAction::kSegmentMap, 200 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 200 * MiB, 4 * MiB),  // kFirst
              ev(TraceAction::kFreeRequested, 200 * MiB, 4 * MiB),
              ev(TraceAction::kFreeCompleted, 200 * MiB, 4 * MiB),
              ev(TraceAction::kAlloc, 200 * MiB, 4 * MiB)};  // kNext, in the same mapped page
  t.segments = {segment(200 * MiB, 20 * MiB, kNext)};
  t.capture_marks = {{1, kFirst}, {4, kNext}};
  infer_private_pools(t);
  ASSERT_EQ(t.private_pools.size(), 2u);
  EXPECT_EQ(t.private_pools[t.request_pools[1] - 1].id, kFirst);
  EXPECT_EQ(t.private_pools[t.request_pools[4] - 1].id, kNext);
}

TEST(PrivatePoolInference, AFreedSegmentBeforeTheFirstCaptureIsAGuessAndOverridesSettleIt) {
  Trace t;
  t.events = {ev(TraceAction::kSegmentAlloc, 300 * MiB, 2 * MiB),
              ev(TraceAction::kAlloc, 300 * MiB, 512),  // ordinary, or already the capture's?
              ev(TraceAction::kSegmentAlloc, 200 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 200 * MiB, 4 * MiB),
              ev(TraceAction::kFreeRequested, 300 * MiB, 512),
              ev(TraceAction::kFreeCompleted, 300 * MiB, 512),
              ev(TraceAction::kSegmentFree, 300 * MiB, 2 * MiB)};
  t.segments = {segment(200 * MiB, 20 * MiB, kPool)};
  infer_private_pools(t);
  ASSERT_EQ(t.pool_guesses.size(), 1u);
  EXPECT_EQ(t.pool_guesses[0].first_request, 1u);
  EXPECT_EQ(t.pool_guesses[0].taken, 1);
  EXPECT_EQ(t.pool_guesses[0].other, 0);
  EXPECT_EQ(t.pool_guesses[0].third,
            std::optional<uint16_t>(PoolGuess::kVanishedPool));  // a capture of its own, gone
  EXPECT_EQ(t.request_pools[1], 1);
  const std::pair<uint32_t, uint16_t> ordinary{t.pool_guesses[0].group, 0};
  infer_private_pools(t, {&ordinary, 1});
  EXPECT_EQ(t.request_pools[1], 0);
  EXPECT_EQ(t.request_pools[3], 1);
}

// A segment gone before the end whose first request came between two captures' requests on its
// stream (one pool's before, another's after) may have been either capture's, or an ordinary
// request made between them: the ordinary pools are its third guess.
TEST(PrivatePoolInference, AFreedSegmentBetweenTwoPoolsRequestsMayBeOrdinaryToo) {
  constexpr MempoolId kSecond{2, 0};
  Trace t;
  t.events = {ev(TraceAction::kSegmentAlloc, 200 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 200 * MiB, 4 * MiB),  // the first capture's
              ev(TraceAction::kSegmentAlloc, 300 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 300 * MiB, 15 * MiB),  // between the captures?
              ev(TraceAction::kFreeRequested, 300 * MiB, 15 * MiB),
              ev(TraceAction::kFreeCompleted, 300 * MiB, 15 * MiB),
              ev(TraceAction::kSegmentAlloc, 400 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 400 * MiB, 4 * MiB),  // the second capture's
              ev(TraceAction::kSegmentFree, 300 * MiB, 20 * MiB)};
  t.segments = {segment(200 * MiB, 20 * MiB, kPool), segment(400 * MiB, 20 * MiB, kSecond)};
  infer_private_pools(t);
  ASSERT_EQ(t.pool_guesses.size(), 1u);
  const PoolGuess g = t.pool_guesses[0];
  EXPECT_EQ(g.first_request, 3u);
  EXPECT_EQ(g.taken, 2);  // the later request's pool
  EXPECT_EQ(g.other, 1);
  EXPECT_EQ(g.third, std::optional<uint16_t>(0));
  EXPECT_EQ(t.request_pools[3], 2);
  const std::pair<uint32_t, uint16_t> ordinary{g.group, 0};
  infer_private_pools(t, {&ordinary, 1});
  EXPECT_EQ(t.request_pools[3], 0);
}

TEST(PrivatePoolInference, ATraceOfOrdinaryPoolsIsLeftAsItIs) {
  Trace t;
  t.events = {ev(TraceAction::kSegmentAlloc, 100 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 100 * MiB, 4 * MiB)};
  t.segments = {segment(100 * MiB, 20 * MiB, {})};
  infer_private_pools(t);
  EXPECT_TRUE(t.private_pools.empty());
  EXPECT_TRUE(t.request_pools.empty());
}

// A history that starts mid-run, after the capture that carved its segments: the segments there
// at the first event are listed with their pools, for the replay to restore them into. A final
// segment's is recorded; one released with no request in the trace, or whose requests have no
// known neighbour on their stream, takes the pool of its stream's final segments, as a guess
// that matters from the first event on.
TEST(PrivatePoolInference, SegmentsFromBeforeTheFirstEventAreListedWithTheirPools) {
  Trace t;
  t.events = {ev(TraceAction::kFreeRequested, 100 * MiB, 4 * MiB),  // from before the trace
              ev(TraceAction::kFreeCompleted, 100 * MiB, 4 * MiB),
              ev(TraceAction::kAlloc, 300 * MiB, 4 * MiB),
              ev(TraceAction::kFreeRequested, 300 * MiB, 4 * MiB),
              ev(TraceAction::kFreeCompleted, 300 * MiB, 4 * MiB),
              ev(TraceAction::kSegmentFree, 100 * MiB, 20 * MiB),
              ev(TraceAction::kSegmentFree, 300 * MiB, 20 * MiB),
              ev(TraceAction::kFreeRequested, 500 * MiB, 4 * MiB, 0),
              ev(TraceAction::kFreeCompleted, 500 * MiB, 4 * MiB, 0),
              ev(TraceAction::kSegmentFree, 500 * MiB, 20 * MiB, 0)};
  t.segments = {segment(200 * MiB, 20 * MiB, kPool)};
  infer_private_pools(t);
  EXPECT_EQ(t.initial_pools, (std::vector<std::pair<uint64_t, uint16_t>>{
                                 {100 * MiB, 1}, {200 * MiB, 1}, {300 * MiB, 1}}));
  EXPECT_EQ(t.request_pools[2], 1);
  ASSERT_EQ(t.pool_guesses.size(), 2u);
  for (const PoolGuess& g : t.pool_guesses) {
    EXPECT_EQ(g.first_request, 0u);
    EXPECT_EQ(g.taken, 1);
    EXPECT_EQ(g.other, 0);
  }
}

// A segment that a release of the whole cache kept though none of its blocks was allocated was a
// private pool's whose graphs were alive: when no final segment names that pool (its graphs were
// dropped and the cache emptied before the end), it is taken into a pool of its own, given back
// by the release after its last request. A segment of only ordinary requests stays ordinary, the
// vanished pool the other guess.
TEST(PrivatePoolInference, ASegmentKeptFreeByAWholeReleaseIsAVanishedPools) {
  Trace t;
  constexpr StreamId kOther = 3;
  t.events = {
      ev(TraceAction::kSegmentAlloc, 200 * MiB, 20 * MiB),
      ev(TraceAction::kAlloc, 200 * MiB, 4 * MiB),  // the final pool's
      ev(TraceAction::kSegmentAlloc, 300 * MiB, 20 * MiB, kOther),
      ev(TraceAction::kAlloc, 300 * MiB, 4 * MiB, kOther),  // the vanished pool's
      ev(TraceAction::kFreeRequested, 300 * MiB, 4 * MiB, kOther),
      ev(TraceAction::kFreeCompleted, 300 * MiB, 4 * MiB, kOther),
      ev(TraceAction::kSegmentAlloc, 400 * MiB, 20 * MiB, kOther),
      ev(TraceAction::kAlloc, 400 * MiB, 4 * MiB, kOther),  // ordinary
      ev(TraceAction::kFreeRequested, 400 * MiB, 4 * MiB, kOther),
      ev(TraceAction::kFreeCompleted, 400 * MiB, 4 * MiB, kOther),
      ev(TraceAction::kSegmentFree, 400 * MiB, 20 * MiB, kOther),  // empty_cache(): 300 kept
      ev(TraceAction::kAlloc, 200 * MiB + 4 * MiB, 4 * MiB),
      ev(TraceAction::kSegmentFree, 300 * MiB, 20 * MiB, kOther)};  // its graphs gone
  t.segments = {segment(200 * MiB, 20 * MiB, kPool)};
  const PrivatePoolInference inference = infer_private_pools(t);
  EXPECT_EQ(inference.vanished, 1u);
  ASSERT_EQ(t.private_pools.size(), 2u);
  EXPECT_FALSE(t.private_pools[1].id == kPool);
  EXPECT_EQ(t.request_pools[3], 2);
  EXPECT_EQ(t.request_pools[7], 0);
  EXPECT_EQ(t.private_pools[1].released_at, 12u);
  bool ordinary_guess = false, vanished_guess = false;
  for (const PoolGuess& g : t.pool_guesses) {
    if (g.first_request == 7) ordinary_guess = g.taken == 0 && g.other == PoolGuess::kVanishedPool;
    if (g.first_request == 3) vanished_guess = g.taken == PoolGuess::kVanishedPool && g.other == 0;
  }
  EXPECT_TRUE(ordinary_guess);
  EXPECT_TRUE(vanished_guess);
  EXPECT_NE(private_pool_warning(t, inference).find("1 segment(s) of pools gone before the end"),
            std::string::npos);
}

// With every graph dropped before the end, no final segment names a pool. A capture still shows
// where the default CUDA generator registered with the first graph (its seed and offset, 8 bytes
// each, one after the other on the capturing side stream) and a release of the whole cache kept
// a free segment: that segment is taken into a vanished pool. Without the generator's requests
// the trace is left as it is.
TEST(PrivatePoolInference, AVanishedPoolIsFoundWithNoPoolAtTheEnd) {
  for (const bool registered : {true, false}) {
    Trace t;
    constexpr StreamId kOther = 3;
    t.events = {ev(TraceAction::kSegmentAlloc, 100 * MiB, 2 * MiB),
                ev(TraceAction::kAlloc, 100 * MiB, registered ? 8 : 16),
                ev(TraceAction::kAlloc, 100 * MiB + 512, 8),
                ev(TraceAction::kSegmentAlloc, 300 * MiB, 20 * MiB),
                ev(TraceAction::kAlloc, 300 * MiB, 4 * MiB),  // the capture's
                ev(TraceAction::kFreeRequested, 300 * MiB, 4 * MiB),
                ev(TraceAction::kFreeCompleted, 300 * MiB, 4 * MiB),
                ev(TraceAction::kSegmentAlloc, 400 * MiB, 20 * MiB, kOther),
                ev(TraceAction::kAlloc, 400 * MiB, 4 * MiB, kOther),  // ordinary
                ev(TraceAction::kFreeRequested, 400 * MiB, 4 * MiB, kOther),
                ev(TraceAction::kFreeCompleted, 400 * MiB, 4 * MiB, kOther),
                ev(TraceAction::kSegmentFree, 400 * MiB, 20 * MiB, kOther),  // 300 kept
                ev(TraceAction::kAlloc, 100 * MiB + 1024, 512),
                ev(TraceAction::kSegmentFree, 300 * MiB, 20 * MiB)};  // its graphs gone
    t.segments = {segment(100 * MiB, 2 * MiB, {})};
    const PrivatePoolInference inference = infer_private_pools(t);
    if (!registered) {
      EXPECT_TRUE(t.private_pools.empty());
      EXPECT_TRUE(t.request_pools.empty());
      continue;
    }
    EXPECT_EQ(inference.vanished, 1u);
    ASSERT_EQ(t.private_pools.size(), 1u);
    EXPECT_EQ(t.request_pools[4], 1);
    EXPECT_EQ(t.request_pools[8], 0);
    EXPECT_EQ(t.private_pools[0].released_at, 13u);
  }
}

// The segments one capture filled (one stream's requests with none of another pool between,
// released together) make one vanished pool, as the guesses turned to it say.
TEST(PrivatePoolInference, OneCapturesSegmentsMakeOneVanishedPool) {
  Trace t;
  constexpr StreamId kOther = 3;
  t.events = {ev(TraceAction::kSegmentAlloc, 200 * MiB, 20 * MiB),
              ev(TraceAction::kAlloc, 200 * MiB, 4 * MiB),
              ev(TraceAction::kSegmentAlloc, 300 * MiB, 20 * MiB, kOther),
              ev(TraceAction::kAlloc, 300 * MiB, 4 * MiB, kOther),
              ev(TraceAction::kSegmentAlloc, 400 * MiB, 2 * MiB, kOther),
              ev(TraceAction::kAlloc, 400 * MiB, 4096, kOther),
              ev(TraceAction::kFreeRequested, 300 * MiB, 4 * MiB, kOther),
              ev(TraceAction::kFreeCompleted, 300 * MiB, 4 * MiB, kOther),
              ev(TraceAction::kFreeRequested, 400 * MiB, 4096, kOther),
              ev(TraceAction::kFreeCompleted, 400 * MiB, 4096, kOther),
              ev(TraceAction::kSegmentFree, 400 * MiB, 2 * MiB, kOther),
              ev(TraceAction::kSegmentFree, 300 * MiB, 20 * MiB, kOther)};
  t.segments = {segment(200 * MiB, 20 * MiB, kPool)};
  infer_private_pools(t);
  std::vector<std::pair<uint32_t, uint16_t>> turns;
  for (const PoolGuess& g : t.pool_guesses) {
    EXPECT_EQ(g.other, PoolGuess::kVanishedPool);
    EXPECT_EQ(g.stretch, t.pool_guesses.front().stretch);
    turns.emplace_back(g.group, PoolGuess::kVanishedPool);
  }
  ASSERT_EQ(turns.size(), 2u);
  const PrivatePoolInference inference = infer_private_pools(t, turns);
  EXPECT_EQ(inference.vanished, 2u);
  ASSERT_EQ(t.private_pools.size(), 2u);  // the final pool, and one vanished pool for both
  EXPECT_EQ(t.request_pools[3], 2);
  EXPECT_EQ(t.request_pools[5], 2);
  EXPECT_EQ(t.private_pools[1].released_at, 10u);
}

}  // namespace
}  // namespace allocsim
