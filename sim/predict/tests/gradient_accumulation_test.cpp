// Gradient accumulation as a trace transformation: on a small training loop written by hand, and
// on a recorded GPT-2 pass against the same job recorded accumulating (its max_memory_allocated).
#include <gtest/gtest.h>

#include <fstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "sim/predict/gradient_accumulation.hpp"
#include "sim/replay/replay.hpp"
#include "sim/trace/input_error.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Two steps of: an activation (A) and a gradient (G) in the pass, A freed before the optimizer,
// the optimizer's state (S, the first step only), zero_grad freeing G.
Trace training_loop() {
  Trace t;
  t.source = "loop";
  uint64_t time = 1;
  auto event = [&](TraceAction a, uint64_t addr, uint64_t size) {
    TraceEvent e;
    e.action = a;
    e.addr = addr;
    e.size = size;
    e.time_us = time++;
    t.events.push_back(e);
  };
  auto alloc = [&](uint64_t addr, uint64_t size) { event(TraceAction::kAlloc, addr, size); };
  auto free = [&](uint64_t addr, uint64_t size) {
    event(TraceAction::kFreeRequested, addr, size);
    event(TraceAction::kFreeCompleted, addr, size);
  };
  auto mark = [&](const char* name, bool start) { t.annotations.push_back({name, start, time++}); };
  for (int step = 0; step < 2; ++step) {
    alloc(0x1000000, 8 * kMiB);  // A
    alloc(0x2000000, 4 * kMiB);  // G
    free(0x1000000, 8 * kMiB);
    mark("Optimizer.step#AdamW.step", true);
    if (step == 0) alloc(0x3000000, 4 * kMiB);  // S
    mark("Optimizer.step#AdamW.step", false);
    mark("Optimizer.zero_grad#AdamW.zero_grad", true);
    free(0x2000000, 4 * kMiB);
    mark("Optimizer.zero_grad#AdamW.zero_grad", false);
  }
  return t;
}

uint64_t peak_allocated(const Trace& t) {
  ReplayOptions o;
  o.use_recorded_addresses = false;
  const ReplayResult r = replay(t, o);
  EXPECT_EQ(r.outcome.ooms, 0u);
  return static_cast<uint64_t>(r.stats.allocated_bytes[kAggregate].peak);
}

TEST(GradientAccumulation, LaterPassesAccumulateIntoTheFirstPassGradients) {
  const Trace loop = training_loop();
  const Trace three = accumulate_gradients(loop, 3);
  size_t allocs = 0;
  for (const TraceEvent& e : three.events) allocs += e.action == TraceAction::kAlloc;
  // Per step: the recorded pass (A, G), two more (A, G' each), S once.
  EXPECT_EQ(allocs, 2u * 6u + 1u);
  // The second step's pass peaks at S + A + G (16 MiB); a later pass holds G while it makes A
  // and G' (20 MiB).
  EXPECT_EQ(peak_allocated(loop), 16 * kMiB);
  EXPECT_EQ(peak_allocated(three), 20 * kMiB);
  // Every block allocated is freed once, except the optimizer's state.
  std::unordered_map<uint64_t, int> live;
  for (const TraceEvent& e : three.events) {
    if (e.action == TraceAction::kAlloc) {
      EXPECT_EQ(live[e.addr]++, 0) << e.addr;
    } else if (e.action == TraceAction::kFreeCompleted) {
      EXPECT_EQ(live[e.addr]--, 1) << e.addr;
    }
  }
  int left = 0;
  for (const auto& [address, n] : live) left += n;
  EXPECT_EQ(left, 1);
}

TEST(GradientAccumulation, OnePassIsTheTraceItself) {
  const Trace loop = training_loop();
  const Trace one = accumulate_gradients(loop, 1);
  ASSERT_EQ(one.events.size(), loop.events.size());
  for (size_t i = 0; i < loop.events.size(); ++i)
    EXPECT_EQ(one.events[i].addr, loop.events[i].addr);
}

TEST(GradientAccumulation, NeedsTheOptimizerAnnotations) {
  Trace t = training_loop();
  t.annotations.clear();
  EXPECT_THROW((void)accumulate_gradients(t, 2), InputError);
  EXPECT_THROW((void)accumulate_gradients(training_loop(), 0), InputError);
}

// GPT-2 recorded at batch 4, made to accumulate over four passes, against the job recorded at
// batch 16 as four micro-batches of 4 (H100, PyTorch 2.11): the same peak of allocated memory.
TEST(GradientAccumulation, RecordedGpt2PassMatchesTheRunThatAccumulated) {
  const std::string dir = std::string(ALLOCSIM_WORKLOADS_DIR) + "/sweeps/";
  const Trace micro = read_snapshot_file(dir + "gpt2_batch-4.pickle.gz");
  std::ifstream in(dir + "accumulation/gpt2_batch-16_accum4.json");
  const nlohmann::json real = nlohmann::json::parse(in);
  const ReplayResult r = replay(accumulate_gradients(micro, 4), ReplayOptions{});
  const double allocated = static_cast<double>(r.stats.allocated_bytes[kAggregate].peak);
  EXPECT_NEAR(allocated / real.at("max_memory_allocated").get<double>(), 1.0, 0.002);
}

}  // namespace
}  // namespace allocsim
