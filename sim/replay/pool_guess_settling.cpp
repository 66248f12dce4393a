#include "sim/replay/pool_guess_settling.hpp"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "sim/replay/replay.hpp"
#include "sim/trace/private_pool_inference.hpp"

namespace allocsim {
namespace {

std::optional<DeviceOpKind> op_kind(TraceAction action) {
  switch (action) {
    case TraceAction::kSegmentAlloc:
      return DeviceOpKind::kSegmentAlloc;
    case TraceAction::kSegmentFree:
      return DeviceOpKind::kSegmentFree;
    case TraceAction::kSegmentMap:
      return DeviceOpKind::kSegmentMap;
    case TraceAction::kSegmentUnmap:
      return DeviceOpKind::kSegmentUnmap;
    default:
      return std::nullopt;
  }
}

// The event of the first recorded segment operation the replay under the trace's current routing
// does not repeat (kind, size, stream), or the number of events if it repeats them all.
uint64_t departure(const Trace& trace) {
  ReplayOptions options;
  options.on_oom = OnOom::kContinue;
  const ReplayResult result = replay(trace, options);
  size_t k = 0;
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    const auto kind = op_kind(trace.events[i].action);
    if (!kind) continue;
    if (k >= result.device_ops.size()) return i;
    const DeviceOp& op = result.device_ops[k++];
    const TraceEvent& e = trace.events[i];
    if (op.kind != *kind || op.size != e.size || op.stream != e.stream) return i;
  }
  return k == result.device_ops.size() ? trace.events.size() : trace.events.size() - 1;
}

}  // namespace

PoolGuessSettling settle_pool_guesses(Trace& trace) {
  PoolGuessSettling s;
  s.guesses = trace.pool_guesses.size();
  if (trace.pool_guesses.empty()) return s;
  const std::vector<PoolGuess> guesses = trace.pool_guesses;  // the inference rewrites the trace's
  std::vector<std::pair<uint32_t, uint16_t>> chosen;          // the guesses turned so far
  std::vector<bool> tried(guesses.size(), false);
  uint64_t best = departure(trace);
  s.replays = 1;
  const uint64_t end = trace.events.size();
  // Each guess is tried at most once, and at most kMaxReplays replays are made: a bound on the
  // time a file with many guesses takes to read.
  constexpr uint64_t kMaxReplays = 32;
  // The latest untried guess whose first request comes before `limit`.
  auto latest_before = [&](uint64_t limit) {
    std::optional<size_t> pick;
    for (size_t g = 0; g < guesses.size(); ++g) {
      if (!tried[g] && guesses[g].first_request < limit &&
          (!pick || guesses[g].first_request > guesses[*pick].first_request))
        pick = g;
    }
    return pick;
  };
  while (best < end && s.replays < kMaxReplays) {
    // The latest untried guess before the departure; failing that, the one whose request made
    // the departing segment operation (recorded just before its alloc).
    std::optional<size_t> pick = latest_before(best);
    if (!pick) {
      uint64_t request = best;
      while (request < end && trace.events[request].action != TraceAction::kAlloc &&
             trace.events[request].action != TraceAction::kOom) {
        ++request;
      }
      pick = latest_before(request + 1);
    }
    if (!pick) break;
    tried[*pick] = true;
    chosen.emplace_back(guesses[*pick].group, guesses[*pick].other);
    infer_private_pools(trace, chosen);
    const uint64_t now = departure(trace);
    ++s.replays;
    if (now > best) {
      best = now;
      ++s.changed;
    } else {
      chosen.pop_back();
    }
  }
  infer_private_pools(trace, chosen);  // the best routing found
  s.departs_still = best < end;
  return s;
}

}  // namespace allocsim
