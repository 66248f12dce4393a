// The size models on exact data, and a sweep over synthetic recordings.
#include <gtest/gtest.h>

#include "sim/predict/size_sweep.hpp"
#include "sim/trace/input_error.hpp"

namespace allocsim {
namespace {

TEST(SizeModel, TheSimplestThatReproducesEveryRecording) {
  const std::vector<int64_t> v{2, 4, 8};
  EXPECT_EQ(fit_size_model(v, {512, 512, 512}), SizeModel::kConstant);
  EXPECT_EQ(fit_size_model(v, {1000, 2000, 4000}), SizeModel::kLinear);
  EXPECT_EQ(fit_size_model(v, {1100, 2100, 4100}), SizeModel::kLinear);
  EXPECT_EQ(fit_size_model(v, {1000, 2000, 2000}), SizeModel::kSaturating);
  EXPECT_EQ(fit_size_model(v, {4 * 4, 16 * 4, 64 * 4}), SizeModel::kQuadratic);  // 4 v^2
  EXPECT_EQ(fit_size_model(v, {3000, 1000, 2000}), SizeModel::kIrregular);
  // Growing faster, but in proportion to the value from the second recording on (a floor, then
  // a buffer over the batch; ResNet-50's at batch 8, 16, 32): the latest growth, not a parabola.
  EXPECT_EQ(fit_size_model({8, 16, 32}, {38535184, 51904528, 103284752}), SizeModel::kLatestGrowth);
  // Growing at every step on no line: the latest growth; flat, then a jump: irregular.
  EXPECT_EQ(fit_size_model({8, 16, 32}, {19267600, 42729903, 81265071}), SizeModel::kLatestGrowth);
  EXPECT_EQ(fit_size_model({1, 2, 4}, {9437184, 9437184, 154389504}), SizeModel::kIrregular);
  // Two recordings cannot tell linear from the others.
  EXPECT_EQ(fit_size_model({2, 4}, {1000, 2000}), SizeModel::kLinear);
}

TEST(SizeModel, PredictsBeyondTheRecordings) {
  const std::vector<int64_t> v{2, 4, 8};
  EXPECT_EQ(predict_size(SizeModel::kLinear, v, {1100, 2100, 4100}, 16), 8100u);
  EXPECT_EQ(predict_size(SizeModel::kSaturating, v, {1000, 2000, 2000}, 32), 2000u);
  EXPECT_EQ(predict_size(SizeModel::kQuadratic, v, {16, 64, 256}, 16), 1024u);
  EXPECT_EQ(predict_size(SizeModel::kQuadratic, {1, 2, 3}, {1, 4, 9}, 7), 49u);
  EXPECT_EQ(predict_size(SizeModel::kIrregular, v, {3000, 1000, 2000}, 32), 2000u);
  EXPECT_EQ(predict_size(SizeModel::kIrregular, v, {3000, 1000, 2000}, 1), 3000u);
  // The latest growth: the line through the two largest beyond them (206,045,200 bytes is what
  // the real run at batch 64 allocated), the neighbours' line between, the smallest below.
  const std::vector<uint64_t> floored{38535184, 51904528, 103284752};
  EXPECT_EQ(predict_size(SizeModel::kLatestGrowth, {8, 16, 32}, floored, 64), 206045200u);
  EXPECT_EQ(predict_size(SizeModel::kLatestGrowth, {8, 16, 32}, floored, 12), 45219856u);
  EXPECT_EQ(predict_size(SizeModel::kLatestGrowth, {8, 16, 32}, floored, 16), 51904528u);
  EXPECT_EQ(predict_size(SizeModel::kLatestGrowth, {8, 16, 32}, floored, 2), 38535184u);
  // A decreasing line stops at one byte.
  EXPECT_EQ(predict_size(SizeModel::kLinear, {2, 4}, {2000, 1000}, 100), 1u);
}

Trace recording(int64_t batch, bool extra = false, StreamId stream = 0) {
  Trace t;
  t.source = "batch" + std::to_string(batch);
  auto ev = [&](TraceAction a, uint64_t addr, uint64_t size) {
    TraceEvent e;
    e.action = a;
    e.addr = addr;
    e.size = size;
    e.stream = stream;
    t.events.push_back(e);
  };
  ev(TraceAction::kAlloc, 1 << 20, 4096);                                // constant
  ev(TraceAction::kAlloc, 2 << 20, static_cast<uint64_t>(batch) << 20);  // linear
  if (extra) ev(TraceAction::kAlloc, 3 << 20, 512);
  ev(TraceAction::kFreeRequested, 2 << 20, static_cast<uint64_t>(batch) << 20);
  ev(TraceAction::kFreeCompleted, 2 << 20, static_cast<uint64_t>(batch) << 20);
  return t;
}

TEST(SizeSweep, SaysWhichRecordingsAreWindowsOfTheirRuns) {
  // Begun in the middle of a step (a bounded max_entries, a history begun after warm-up): each
  // frees a block allocated before its first event, in a segment the trace never made.
  auto window = [](int64_t batch) {
    Trace t = recording(batch);
    t.segments.push_back({64 << 20, 2 << 20, 0, true, false, {}, {}});
    for (const TraceAction action : {TraceAction::kFreeCompleted, TraceAction::kFreeRequested}) {
      TraceEvent e;
      e.action = action;
      e.addr = 64 << 20;
      e.size = 512;
      t.events.insert(t.events.begin(), e);
    }
    return t;
  };
  const Trace a = window(2), b = window(4), c = window(8);
  const SizeSweep sweep({&a, &b, &c}, {2, 4, 8});
  EXPECT_EQ(sweep.summary().windows, (std::vector<int64_t>{2, 4, 8}));
  EXPECT_NE(sweep.summary_text().find("recording(s) at 2 4 8 are windows of their runs"),
            std::string::npos)
      << sweep.summary_text();
  // Begun after the model was set up: a segment from before, its blocks alive throughout.
  auto after_setup = [](int64_t batch) {
    Trace t = recording(batch);
    t.segments.push_back({64 << 20, 2 << 20, 0, true, false, {}, {}});
    return t;
  };
  const Trace d = after_setup(2), e = after_setup(4), f = after_setup(8);
  const SizeSweep whole({&d, &e, &f}, {2, 4, 8});
  EXPECT_TRUE(whole.summary().windows.empty());
  EXPECT_EQ(whole.summary_text().find("windows"), std::string::npos);
}

TEST(SizeSweep, SaysWhereRecordingsStartFromCachesMadeForTheirSizes) {
  // Begun after warm-up steps: each history starts with a free segment those steps left, as
  // large as their activations.
  auto after_warmup = [](int64_t batch, uint64_t cached) {
    Trace t = recording(batch);
    t.segments.push_back({uint64_t{1} << 30, cached, 0, false, false, {}, {}});
    return t;
  };
  const Trace a = after_warmup(2, 128 << 20), b = after_warmup(4, 256 << 20);
  const SizeSweep warm({&a, &b}, {2, 4});
  EXPECT_TRUE(warm.summary().warm_starts_differ());
  EXPECT_EQ(warm.summary().cached_at_start,
            (std::vector<std::pair<int64_t, uint64_t>>{{2, 128 << 20}, {4, 256 << 20}}));
  const std::string text = warm.summary_text();
  EXPECT_NE(text.find("start from different cached memory (free in their segments at their "
                      "first events: 128.00 MiB at 2 256.00 MiB at 4)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("nothing validates it here"), std::string::npos) << text;
  // The same cache at every size (a model set up, no step run): nothing said.
  const Trace c = after_warmup(2, 20 << 20), d = after_warmup(4, 22 << 20);
  const SizeSweep setup({&c, &d}, {2, 4});
  EXPECT_FALSE(setup.summary().warm_starts_differ());
  EXPECT_EQ(setup.summary_text().find("different cached memory"), std::string::npos);
}

TEST(SizeSweep, PredictsTheStreamAndValidatesOnTheLargest) {
  const Trace a = recording(2), b = recording(4), c = recording(8);
  const SizeSweep sweep({&c, &a, &b}, {8, 2, 4});  // any order
  const Trace t = sweep.predict(32);
  ASSERT_EQ(t.events.size(), 4u);
  EXPECT_EQ(t.events[0].size, 4096u);
  EXPECT_EQ(t.events[1].size, 32u << 20);
  EXPECT_EQ(t.events[2].size, 32u << 20);  // a free takes its allocation's size
  EXPECT_EQ(t.events[2].addr, t.events[1].addr);
  EXPECT_EQ(sweep.summary().models[static_cast<size_t>(SizeModel::kConstant)], 1u);
  EXPECT_EQ(sweep.summary().models[static_cast<size_t>(SizeModel::kLinear)], 1u);
  ASSERT_TRUE(sweep.summary().validation);
  EXPECT_EQ(sweep.summary().validation->exact, 2u);
  EXPECT_EQ(sweep.summary().validation->bytes_error, 0.0);
}

TEST(SizeSweep, RequestsOfOneRecordingOnlyAreSkipped) {
  // The largest recording allocates one more block (a kernel chosen by size): it is kept, at its
  // own size; the others align around it.
  const Trace a = recording(2), b = recording(4), c = recording(8, /*extra=*/true);
  const SizeSweep sweep({&a, &b, &c}, {2, 4, 8});
  const Trace t = sweep.predict(16);
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.events[1].size, 16u << 20);
  EXPECT_EQ(t.events[2].size, 512u);
  EXPECT_EQ(t.events[3].size, 16u << 20);
  EXPECT_EQ(sweep.summary().in_some_only, 1u);
  EXPECT_EQ(sweep.summary().dropped, 0u);
}

TEST(SizeSweep, FreesFollowTheirAllocationsWhereverTheyFall) {
  // At the smaller value two buffers of one size die in the other order, and one dies before the
  // next allocation: the allocations align, and each free is its own allocation's.
  const auto make = [](int64_t batch, bool swapped) {
    Trace t;
    t.source = "batch" + std::to_string(batch);
    auto ev = [&](TraceAction a, uint64_t addr, uint64_t size) {
      TraceEvent e;
      e.action = a;
      e.addr = addr;
      e.size = size;
      t.events.push_back(e);
    };
    const uint64_t n = static_cast<uint64_t>(batch) << 20;
    ev(TraceAction::kAlloc, uint64_t{1} << 30, n);
    ev(TraceAction::kAlloc, uint64_t{2} << 30, n);
    if (swapped) {
      ev(TraceAction::kFreeRequested, uint64_t{1} << 30, n);
      ev(TraceAction::kFreeCompleted, uint64_t{1} << 30, n);
    }
    ev(TraceAction::kAlloc, uint64_t{3} << 30, 2 * n);
    for (uint64_t addr :
         swapped ? std::vector<uint64_t>{uint64_t{2} << 30, uint64_t{3} << 30}
                 : std::vector<uint64_t>{uint64_t{2} << 30, uint64_t{1} << 30, uint64_t{3} << 30}) {
      const uint64_t size = addr == (uint64_t{3} << 30) ? 2 * n : n;
      ev(TraceAction::kFreeRequested, addr, size);
      ev(TraceAction::kFreeCompleted, addr, size);
    }
    return t;
  };
  const Trace a = make(2, true), b = make(4, true), c = make(8, false);
  const SizeSweep sweep({&a, &b, &c}, {2, 4, 8});
  EXPECT_EQ(sweep.summary().dropped, 0u);
  EXPECT_EQ(sweep.summary().in_some_only, 0u);
  const Trace t = sweep.predict(16);
  ASSERT_EQ(t.events.size(), 9u);
  for (const TraceEvent& e : t.events) {
    const uint64_t want = e.addr == (uint64_t{3} << 30) ? 32u << 20 : 16u << 20;
    EXPECT_EQ(e.size, want) << to_string(e.action) << " at " << e.addr;
  }
}

// A request whose kernel changed size between the recordings (ViT-B/16's at batch 8, 16 and 24):
// beyond the largest its size is a guess, continued along the latest growth or held.
TEST(SizeSweep, SizesBeyondTheRecordingsThatAreGuessesAreNamed) {
  const std::vector<int64_t> values{8, 16, 24};
  const std::vector<uint64_t> sizes{9830400, 19660800, 29097984};
  std::vector<Trace> traces;
  for (size_t i = 0; i < values.size(); ++i) {
    Trace t;
    t.source = "batch" + std::to_string(values[i]);
    TraceEvent constant, grown;
    constant.action = grown.action = TraceAction::kAlloc;
    constant.addr = 1 << 20;
    constant.size = 4096;
    grown.addr = 2 << 20;
    grown.size = sizes[i];
    t.events = {constant, grown};
    traces.push_back(t);
  }
  const SizeSweep sweep({&traces[0], &traces[1], &traces[2]}, values);
  EXPECT_EQ(sweep.guessed_at(20).allocations, 0u);  // between the recordings: no guess counted
  EXPECT_EQ(sweep.guessed_at(24).allocations, 0u);
  const SizeGuess g = sweep.guessed_at(48);
  EXPECT_EQ(g.allocations, 1u);
  EXPECT_EQ(g.held_bytes, 29097984u);
  EXPECT_EQ(g.continued_bytes, predict_size(SizeModel::kLatestGrowth, values, sizes, 48));
  EXPECT_EQ(g.at_stake(), g.continued_bytes - g.held_bytes);
  EXPECT_EQ(sweep.predict(48, GuessedSizes::kHeld).events[1].size, 29097984u);
  EXPECT_EQ(sweep.predict(48).events[1].size, g.continued_bytes);
  EXPECT_EQ(sweep.predict(48, GuessedSizes::kHeld).events[0].size, 4096u);
}

TEST(SizeSweep, RecordingsThatDoNotAlignAreRefusedNamingTheEvents) {
  const Trace a = recording(2), b = recording(4, false, /*stream=*/7);
  try {
    SizeSweep({&a, &b}, {2, 4});
    FAIL() << "no error";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("the recordings at 2 and 4 do not align"), std::string::npos) << what;
    EXPECT_NE(what.find("batch2: event 0 (alloc of 4096 bytes on stream 0)"), std::string::npos)
        << what;
    EXPECT_NE(what.find("batch4: event 0 (alloc of 4096 bytes on stream 7)"), std::string::npos)
        << what;
  }
  EXPECT_THROW(SizeSweep({&a}, {2}), InputError);
  EXPECT_THROW(SizeSweep({&a, &a}, {2, 2}), InputError);
  EXPECT_THROW(SizeSweep({&a, &b}, {2}), InputError);
}

}  // namespace
}  // namespace allocsim
