#include "sim/replay/pool_guess_settling.hpp"

#include <algorithm>
#include <optional>
#include <set>
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

struct Departure {
  // The first recorded segment operation the replay under the trace's current routing does not
  // repeat (kind, size, stream), or the number of events if it repeats them all.
  uint64_t event;
  // The first request the replay put elsewhere than the run did, and where it put it.
  uint64_t misplaced_event;
  uint64_t misplaced_address;
  // The segment the departing operation was on, in the replay and in the run (0 where none).
  uint64_t replayed_segment = 0, recorded_segment = 0;
};

Departure departure(const Trace& trace) {
  ReplayOptions options;
  options.on_oom = OnOom::kContinue;
  const ReplayResult result = replay(trace, options);
  const uint64_t misplaced =
      result.addresses.mismatches ? result.addresses.first_mismatch_event : trace.events.size();
  auto at = [&](uint64_t event, uint64_t replayed_segment = 0) {
    const uint64_t recorded_segment = event < trace.events.size() ? trace.events[event].addr : 0;
    return Departure{event, misplaced, result.addresses.first_mismatch_address, replayed_segment,
                     recorded_segment};
  };
  size_t k = 0;
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    const auto kind = op_kind(trace.events[i].action);
    if (!kind) continue;
    if (k >= result.device_ops.size()) return at(i);
    const DeviceOp& op = result.device_ops[k++];
    const TraceEvent& e = trace.events[i];
    if (op.kind != *kind || op.size != e.size || op.stream != e.stream) return at(i, op.address);
  }
  return at(k == result.device_ops.size() ? trace.events.size() : trace.events.size() - 1);
}

}  // namespace

PoolGuessSettling settle_pool_guesses(Trace& trace) {
  PoolGuessSettling s;
  s.guesses = trace.pool_guesses.size();
  if (trace.pool_guesses.empty()) return s;
  using Turns = std::vector<std::pair<uint32_t, uint16_t>>;  // (group, pool) as the inference takes
  const std::vector<PoolGuess> guesses = trace.pool_guesses;  // the inference rewrites the trace's
  const uint64_t end = trace.events.size();
  // A bound on the time a file with many guesses takes to read.
  constexpr uint64_t kMaxReplays = 64;
  // Turns kept without moving the departure, each because the replay then misplaced the same
  // request in another guessed segment: the segments of one capture turn together.
  constexpr int kMaxChain = 4;
  std::vector<uint8_t> tried(guesses.size(), 0);  // times each was tried
  std::set<uint32_t> stretch_tried;
  Turns best_turns, turns;
  Departure best = departure(trace);
  Departure now = best;  // where the replay under `turns` departs
  int chain = 0;
  s.replays = 1;

  // The latest untried guess whose first request comes before `limit`.
  auto latest_before = [&](uint64_t limit) {
    std::optional<size_t> pick;
    for (size_t g = 0; g < guesses.size(); ++g) {
      if (tried[g] == 0 && guesses[g].first_request < limit &&
          (!pick || guesses[g].first_request > guesses[*pick].first_request))
        pick = g;
    }
    return pick;
  };
  // The guess whose segment held `address` at `event`, tried at most twice.
  auto holding = [&](uint64_t address, uint64_t event) -> std::optional<size_t> {
    for (size_t g = 0; g < guesses.size(); ++g) {
      const PoolGuess& x = guesses[g];
      if (tried[g] < 2 && x.begin <= address && address < x.end && x.first_request <= event &&
          event < x.released)
        return g;
    }
    return std::nullopt;
  };
  // Where the replay first put a request elsewhere than the run, up to its departure: the segment
  // the replay put it in, or the one the run did, was the other pool's. Failing that, the latest
  // untried guess before the departure; failing that, the one whose request made the departing
  // segment operation (recorded just before its alloc).
  auto next_pick = [&](const Departure& d, bool hints_only) -> std::optional<size_t> {
    uint64_t request = d.event;
    while (request < end && trace.events[request].action != TraceAction::kAlloc &&
           trace.events[request].action != TraceAction::kOom) {
      ++request;
    }
    std::optional<size_t> pick;
    if (d.misplaced_event <= request && d.misplaced_event < end) {
      pick = holding(d.misplaced_address, d.misplaced_event);
      if (!pick) pick = holding(trace.events[d.misplaced_event].addr, d.misplaced_event);
    }
    // A segment released (or not) where the run did otherwise: its pool was the other.
    if (!pick && d.replayed_segment) pick = holding(d.replayed_segment, d.event);
    if (!pick && d.recorded_segment) pick = holding(d.recorded_segment, d.event);
    if (hints_only) return pick;
    if (!pick) pick = latest_before(d.event);
    if (!pick) pick = latest_before(request + 1);
    return pick;
  };
  auto later = [](const Departure& a, const Departure& b) {
    return a.event != b.event ? a.event > b.event : a.misplaced_event > b.misplaced_event;
  };

  while (best.event < end && s.replays < kMaxReplays) {
    const std::optional<size_t> pick = next_pick(now, chain > 0);
    if (!pick) {
      if (chain == 0) break;
      turns = best_turns;  // the chain led nowhere
      now = best;
      chain = 0;
      continue;
    }
    const Turns before = turns;
    // The first time a guess of a stretch is picked, the whole stretch is turned to vanished
    // pools (one capture's segments turn together); then each guess on its own. A guess turned
    // already is turned back (a later misplacement may show the turn was wrong).
    const PoolGuess& x = guesses[*pick];
    bool whole_stretch = false;
    if (x.stretch != PoolGuess::kNoStretch && stretch_tried.insert(x.stretch).second) {
      for (const PoolGuess& y : guesses) {
        if (y.stretch != x.stretch || y.taken == PoolGuess::kVanishedPool) continue;
        const std::pair<uint32_t, uint16_t> turn{y.group, PoolGuess::kVanishedPool};
        if (std::find(turns.begin(), turns.end(), turn) != turns.end()) continue;
        turns.push_back(turn);
        whole_stretch = true;
      }
    }
    if (!whole_stretch) {
      ++tried[*pick];
      const std::pair<uint32_t, uint16_t> turn{x.group, x.other};
      if (const auto it = std::find(turns.begin(), turns.end(), turn); it != turns.end()) {
        turns.erase(it);
      } else {
        turns.push_back(turn);
      }
    }
    infer_private_pools(trace, turns);
    const Departure d = departure(trace);
    ++s.replays;
    if (later(d, best)) {
      best = now = d;
      best_turns = turns;
      chain = 0;
      ++s.changed;
    } else if (d.event == now.event && d.misplaced_event == now.misplaced_event &&
               d.misplaced_address != now.misplaced_address && chain < kMaxChain) {
      now = d;  // the same request, misplaced elsewhere: go on turning from there
      ++chain;
    } else if (chain > 0) {
      turns = best_turns;
      now = best;
      chain = 0;
    } else {
      turns = before;
    }
  }
  s.inference = infer_private_pools(trace, best_turns);  // the best routing found
  s.departs_still = best.event < end;
  return s;
}

}  // namespace allocsim
