// Gradient accumulation over generated training loops: the rewritten trace is well formed (no
// block allocated while live, none freed twice), holds each pass k times, replays without a
// contradiction, never requests less memory at its peak than the loop did, and ends as it did.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <unordered_map>

#include "sim/predict/gradient_accumulation.hpp"
#include "sim/replay/replay.hpp"

namespace allocsim {
namespace {

// A training loop of `steps` steps: each pass allocates blocks at fresh or reused addresses, frees
// the activations, keeps the gradients for the optimizer, which zero_grad frees after its step.
Trace generated_loop() {
  Trace t;
  t.source = "generated";
  uint64_t time = 1;
  uint64_t next = uint64_t{1} << 30;
  auto event = [&](TraceAction a, uint64_t addr, uint64_t size) {
    t.events.push_back(TraceEvent{.action = a, .addr = addr, .size = size, .time_us = time++});
  };
  auto free = [&](uint64_t addr, uint64_t size) {
    event(TraceAction::kFreeRequested, addr, size);
    event(TraceAction::kFreeCompleted, addr, size);
  };
  const int steps = *rc::gen::inRange(1, 4);
  const int blocks = *rc::gen::inRange(1, 12);
  for (int s = 0; s < steps; ++s) {
    std::vector<std::pair<uint64_t, uint64_t>> grads, activations;
    for (int b = 0; b < blocks; ++b) {
      const uint64_t size = (*rc::gen::inRange<uint64_t>(1, 64)) << 18;
      const uint64_t addr = next;
      next += size + (uint64_t{1} << 20);
      event(TraceAction::kAlloc, addr, size);
      (*rc::gen::arbitrary<bool>() ? grads : activations).emplace_back(addr, size);
      if (!activations.empty() && *rc::gen::arbitrary<bool>()) {
        free(activations.back().first, activations.back().second);
        activations.pop_back();
      }
    }
    for (const auto& [addr, size] : activations) free(addr, size);
    t.annotations.push_back({"Optimizer.step#AdamW.step", true, time++});
    if (s == 0) event(TraceAction::kAlloc, next, uint64_t{4} << 20);  // the optimizer's state
    next += uint64_t{8} << 20;
    t.annotations.push_back({"Optimizer.step#AdamW.step", false, time++});
    t.annotations.push_back({"Optimizer.zero_grad#AdamW.zero_grad", true, time++});
    for (const auto& [addr, size] : grads) free(addr, size);
    t.annotations.push_back({"Optimizer.zero_grad#AdamW.zero_grad", false, time++});
  }
  return t;
}

size_t allocs(const Trace& t) {
  size_t n = 0;
  for (const TraceEvent& e : t.events) n += e.action == TraceAction::kAlloc;
  return n;
}

RC_GTEST_PROP(GradientAccumulationProperties, TheRewrittenLoopIsWellFormedAndNeedsNoLess, ()) {
  const Trace loop = generated_loop();
  const int k = *rc::gen::inRange(1, 9);
  const Trace accumulated = accumulate_gradients(loop, k);
  std::unordered_map<uint64_t, bool> live;
  for (const TraceEvent& e : accumulated.events) {
    if (e.action == TraceAction::kAlloc) {
      RC_ASSERT(!live[e.addr]);
      live[e.addr] = true;
    } else if (e.action == TraceAction::kFreeCompleted) {
      RC_ASSERT(live[e.addr]);
      live[e.addr] = false;
    }
  }
  // The optimizer's state is allocated once; every other allocation k times.
  RC_ASSERT(allocs(accumulated) == static_cast<size_t>(k) * (allocs(loop) - 1) + 1);
  ReplayOptions options;
  options.use_recorded_addresses = false;
  options.check_invariants = true;
  const ReplayResult one = replay(loop, options);
  const ReplayResult many = replay(accumulated, options);
  RC_ASSERT(many.outcome.contradictions.frees_of_unknown_blocks == 0u);
  RC_ASSERT(many.outcome.contradictions.allocs_at_live_addresses == 0u);
  // Requested bytes: allocated bytes also count the unsplit rest of a block, which placement
  // decides.
  RC_ASSERT(many.stats.requested_bytes[kAggregate].peak >=
            one.stats.requested_bytes[kAggregate].peak);
  RC_ASSERT(many.stats.requested_bytes[kAggregate].current ==
            one.stats.requested_bytes[kAggregate].current);
}

}  // namespace
}  // namespace allocsim
