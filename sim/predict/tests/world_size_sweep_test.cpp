// The world-size models on exact data, and a sweep over synthetic recordings of one rank.
#include <gtest/gtest.h>

#include "sim/predict/world_size_sweep.hpp"
#include "sim/trace/input_error.hpp"

namespace allocsim {
namespace {

TEST(RankSizeModel, ConstantOrShardedWithinTheRounding) {
  EXPECT_EQ(fit_rank_size_model({1, 2, 4}, {4096, 4096, 4096}), RankSizeModel::kConstant);
  // a + b / N: 1 MiB of activations and 64 MiB of state over the ranks.
  const uint64_t mib = 1 << 20;
  EXPECT_EQ(fit_rank_size_model({1, 2, 4}, {65 * mib, 33 * mib, 17 * mib}),
            RankSizeModel::kSharded);
  // Rounded up to 512 bytes in each recording: still the line.
  EXPECT_EQ(fit_rank_size_model({1, 2, 4}, {3000064, 1500160, 750080}), RankSizeModel::kSharded);
  EXPECT_EQ(fit_rank_size_model({1, 2, 4}, {65 * mib, 17 * mib, 33 * mib}),
            RankSizeModel::kIrregular);
  EXPECT_EQ(fit_rank_size_model({1, 2, 4}, {64 * mib, 64 * mib, 16 * mib}),
            RankSizeModel::kIrregular);

  EXPECT_EQ(predict_rank_size(RankSizeModel::kSharded, {2, 4}, {33 * mib, 17 * mib}, 8), 9 * mib);
  EXPECT_EQ(predict_rank_size(RankSizeModel::kSharded, {1, 2}, {65 * mib, 33 * mib}, 4), 17 * mib);
  EXPECT_EQ(predict_rank_size(RankSizeModel::kConstant, {1, 2}, {4096, 4096}, 64), 4096u);
  // A shard of a collective known at 2 ranks only: its full buffer is twice it.
  EXPECT_EQ(predict_rank_size(RankSizeModel::kCollectiveShard, {2}, {32 * mib}, 4), 16 * mib);
  // Rounded up to 512 bytes.
  EXPECT_EQ(predict_rank_size(RankSizeModel::kCollectiveShard, {2}, {1536}, 3), 1024u);
  EXPECT_EQ(predict_rank_size(RankSizeModel::kIrregular, {1, 2, 4}, {10, 30, 20}, 3), 20u);
}

TraceEvent event(TraceAction action, uint64_t addr, uint64_t size, StreamId stream = 0) {
  TraceEvent e;
  e.action = action;
  e.addr = addr;
  e.size = size;
  e.stream = stream;
  return e;
}

// One rank of a sharded job: `ranks` ranks share 64 MiB of state. With more than one rank, an
// all-gather on a side stream (its handle differs from process to process) gathers the 8 MiB
// shard into a 8 x ranks MiB buffer, and a reduce-scatter turns a 64 MiB full gradient into a
// shard; one rank does neither.
Trace sharded_job(int64_t ranks, StreamId side) {
  const uint64_t mib = 1 << 20;
  const uint64_t n = static_cast<uint64_t>(ranks);
  Trace t;
  t.source = "rank0_ws" + std::to_string(ranks);
  auto alloc_free = [&](uint64_t addr, uint64_t size, StreamId stream = 0) {
    t.events.push_back(event(TraceAction::kAlloc, addr, size, stream));
    return [&t, addr, size, stream] {
      t.events.push_back(event(TraceAction::kFreeRequested, addr, size, stream));
      t.events.push_back(event(TraceAction::kFreeCompleted, addr, size, stream));
    };
  };
  auto free_state = alloc_free(0x1000000, 64 * mib / n);  // parameters and optimizer state
  if (ranks > 1) {
    auto free_in = alloc_free(0x2000000, 16 * mib / n, side);  // all-gather input
    auto free_out = alloc_free(0x3000000, 16 * mib, side);     // its output
    free_in();
    free_out();
  }
  auto free_act = alloc_free(0x4000000, 32 * mib);   // activations
  auto free_grad = alloc_free(0x5000000, 64 * mib);  // the full gradient
  if (ranks > 1) {
    auto free_rs = alloc_free(0x6000000, 64 * mib / n, side + 1);  // reduce-scatter output
    free_rs();
  }
  free_grad();
  free_act();
  free_state();
  return t;
}

uint64_t size_of(const Trace& t, uint64_t addr) {
  for (const TraceEvent& e : t.events)
    if (e.action == TraceAction::kAlloc && e.addr == addr) return e.size;
  return 0;
}

TEST(WorldSizeSweep, FromTwoMultiRankRecordingsEverySizeFollowsItsLine) {
  const Trace two = sharded_job(2, 0x100), four = sharded_job(4, 0x200);
  const WorldSizeSweep sweep({&four, &two}, {4, 2});
  EXPECT_EQ(sweep.ranks(), (std::vector<int64_t>{2, 4}));
  const Trace eight = sweep.predict(8);
  const Trace expected = sharded_job(8, 0x200);
  ASSERT_EQ(eight.events.size(), expected.events.size());
  for (size_t i = 0; i < expected.events.size(); ++i) {
    EXPECT_EQ(eight.events[i].size, expected.events[i].size) << i;
    EXPECT_EQ(eight.events[i].stream, expected.events[i].stream) << i;
  }
  EXPECT_EQ(sweep.summary().models[static_cast<size_t>(RankSizeModel::kOnlyInReference)], 0u);
  EXPECT_FALSE(eight.addresses_recorded);  // no run's: its replay checks none
}

TEST(WorldSizeSweep, FromOneRankAndTwoTheCollectivesFollowTheirRule) {
  const Trace one = sharded_job(1, 0), two = sharded_job(2, 0x100);
  const WorldSizeSweep sweep({&one, &two}, {1, 2});
  const Trace four = sweep.predict(4);
  const uint64_t mib = 1 << 20;
  EXPECT_EQ(size_of(four, 0x1000000), 16 * mib);  // the state, fitted on both
  EXPECT_EQ(size_of(four, 0x2000000), 4 * mib);   // the all-gather's input: a shard
  EXPECT_EQ(size_of(four, 0x3000000), 16 * mib);  // its output: full
  EXPECT_EQ(size_of(four, 0x6000000), 16 * mib);  // the reduce-scatter's output: a shard
  EXPECT_EQ(size_of(four, 0x4000000), 32 * mib);  // activations
  const WorldSizeSummary& s = sweep.summary();
  EXPECT_EQ(s.models[static_cast<size_t>(RankSizeModel::kCollectiveShard)], 2u);
  EXPECT_EQ(s.models[static_cast<size_t>(RankSizeModel::kOnlyInReference)], 0u);
  EXPECT_EQ(s.models[static_cast<size_t>(RankSizeModel::kSharded)], 1u);
}

TEST(WorldSizeSweep, ABufferOnlyTheReferenceHasAndNothingPairsWithIsHeldAndSaid) {
  Trace one = sharded_job(1, 0), two = sharded_job(2, 0x100);
  two.events.push_back(event(TraceAction::kAlloc, 0x7000000, 3 << 20));
  const WorldSizeSweep sweep({&one, &two}, {1, 2});
  EXPECT_EQ(size_of(sweep.predict(16), 0x7000000), uint64_t{3} << 20);
  EXPECT_EQ(sweep.summary().models[static_cast<size_t>(RankSizeModel::kOnlyInReference)], 1u);
  EXPECT_EQ(sweep.summary().only_in_reference_bytes, uint64_t{3} << 20);
  EXPECT_NE(sweep.summary_text().find("1 allocations (3.00 MiB) are in the recording at 2 ranks"),
            std::string::npos)
      << sweep.summary_text();
}

TEST(WorldSizeSweep, ValidatedOnTheRecordingWithTheMostRanks) {
  const Trace two = sharded_job(2, 1), four = sharded_job(4, 2), eight = sharded_job(8, 3);
  const WorldSizeSweep sweep({&two, &four, &eight}, {2, 4, 8});
  ASSERT_TRUE(sweep.summary().validation);
  EXPECT_EQ(sweep.summary().validation->exact, sweep.summary().validation->allocations);
  EXPECT_EQ(sweep.summary().validation->ranks, 8);
}

TEST(WorldSizeSweep, RefusesWhatItCannotModel) {
  const Trace two = sharded_job(2, 1);
  EXPECT_THROW(WorldSizeSweep({&two}, {2}), InputError);
  EXPECT_THROW(WorldSizeSweep({&two, &two}, {2, 2}), InputError);
  EXPECT_THROW(WorldSizeSweep({&two, &two}, {2}), InputError);
  const Trace four = sharded_job(4, 2);
  const WorldSizeSweep sweep({&two, &four}, {2, 4});
  EXPECT_THROW((void)sweep.predict(0), InputError);
}

}  // namespace
}  // namespace allocsim
