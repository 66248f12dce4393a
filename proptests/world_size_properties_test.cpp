// One rank of generated sharded jobs (FSDP-like) at generated world sizes: the trace predicted at
// any other world size holds, allocation for allocation, the sizes the generator writes there,
// whichever two world sizes were recorded (a run on one rank, without collectives, among them),
// and it replays without a contradiction.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <numeric>

#include "sim/predict/world_size_sweep.hpp"
#include "sim/replay/replay.hpp"

namespace allocsim {
namespace {

// Sizes that every world size from 1 to 8 divides into whole 512-byte units.
constexpr uint64_t kUnit = 512 * 840;

struct Job {
  std::vector<uint64_t> params, activations, grads;  // per layer, in units
};

Job generated_job() {
  Job j;
  const int layers = *rc::gen::inRange(1, 6);
  for (int l = 0; l < layers; ++l) {
    j.params.push_back(*rc::gen::inRange<uint64_t>(1, 40));
    j.activations.push_back(*rc::gen::inRange<uint64_t>(1, 40));
    j.grads.push_back(*rc::gen::inRange<uint64_t>(1, 40));
  }
  return j;
}

// Rank 0's requests at `ranks` ranks: each layer's shard of parameters (kept), then per step an
// all-gather (input shard, gathered output, on a side stream whose handle is the process's own),
// an activation, a full gradient and its reduce-scatter output on a second side stream. One rank
// runs no collectives.
Trace rank_trace(const Job& j, uint64_t ranks, StreamId side) {
  Trace t;
  t.source = "ws" + std::to_string(ranks);
  uint64_t next = uint64_t{1} << 32;
  uint64_t time = 1;
  auto alloc = [&](uint64_t size, StreamId stream) {
    const uint64_t addr = next;
    next += size + kUnit;
    t.events.push_back(TraceEvent{.action = TraceAction::kAlloc,
                                  .addr = addr,
                                  .size = size,
                                  .stream = stream,
                                  .time_us = time++});
    return std::pair{addr, size};
  };
  auto free = [&](std::pair<uint64_t, uint64_t> b, StreamId stream) {
    for (TraceAction a : {TraceAction::kFreeRequested, TraceAction::kFreeCompleted})
      t.events.push_back(TraceEvent{
          .action = a, .addr = b.first, .size = b.second, .stream = stream, .time_us = time++});
  };
  for (uint64_t p : j.params) alloc(p * kUnit / ranks, 0);
  for (int step = 0; step < 2; ++step) {
    std::vector<std::pair<uint64_t, uint64_t>> acts;
    for (size_t l = 0; l < j.params.size(); ++l) {
      if (ranks > 1) {
        const auto in = alloc(j.params[l] * kUnit / ranks, side);
        const auto out = alloc(j.params[l] * kUnit, side);
        free(in, side);
        acts.push_back(alloc(j.activations[l] * kUnit, 0));
        free(out, side);
      } else {
        acts.push_back(alloc(j.activations[l] * kUnit, 0));
      }
    }
    for (size_t l = j.params.size(); l-- > 0;) {
      const auto grad = alloc(j.grads[l] * kUnit, 0);
      if (ranks > 1) {
        const auto shard = alloc(j.grads[l] * kUnit / ranks, side + 1);
        free(shard, side + 1);
      }
      free(grad, 0);
      free(acts[l], 0);
    }
  }
  return t;
}

std::vector<uint64_t> alloc_sizes(const Trace& t) {
  std::vector<uint64_t> sizes;
  for (const TraceEvent& e : t.events)
    if (e.action == TraceAction::kAlloc) sizes.push_back(e.size);
  return sizes;
}

RC_GTEST_PROP(WorldSizeProperties, PredictedSizesAreTheGeneratorsAtEveryWorldSize, ()) {
  const Job job = generated_job();
  const uint64_t a = *rc::gen::inRange<uint64_t>(1, 8);
  const uint64_t b =
      *rc::gen::suchThat(rc::gen::inRange<uint64_t>(2, 9), [&](uint64_t n) { return n != a; });
  const Trace ta = rank_trace(job, a, 0x1000 + a * 16), tb = rank_trace(job, b, 0x1000 + b * 16);
  const WorldSizeSweep sweep({&ta, &tb}, {static_cast<int64_t>(a), static_cast<int64_t>(b)});
  const uint64_t most = std::max(a, b);
  RC_ASSERT(sweep.summary().models[static_cast<size_t>(RankSizeModel::kOnlyInReference)] == 0u);
  for (const uint64_t to : {uint64_t{2}, uint64_t{3}, uint64_t{4}, uint64_t{5}, uint64_t{6},
                            uint64_t{7}, uint64_t{8}}) {
    const Trace predicted = sweep.predict(static_cast<int64_t>(to));
    // The reference's program: its collectives, wherever it ran on more than one rank.
    RC_ASSERT(alloc_sizes(predicted) == alloc_sizes(rank_trace(job, to, 0x1000 + most * 16)));
  }
  ReplayOptions options;
  options.check_invariants = true;
  const ReplayResult r = replay(sweep.predict(*rc::gen::inRange<int64_t>(1, 65)), options);
  RC_ASSERT(r.outcome.ooms == 0u);
}

}  // namespace
}  // namespace allocsim
