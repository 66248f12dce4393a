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

// The replay options of a settling replay on `device`: the recorded settings, every request.
ReplayOptions settling_options(const ReplayOptions& device) {
  ReplayOptions options;
  options.capacity = device.capacity;
  options.context_bytes = device.context_bytes;
  options.memory_fraction = device.memory_fraction;
  options.memory_limit = device.memory_limit;
  options.replace_recorded_caps = device.replace_recorded_caps;
  options.on_oom = OnOom::kContinue;
  return options;
}

Departure departure(const Trace& trace, const ReplayOptions& options) {
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
    const auto kind = device_op_kind(trace.events[i].action);
    if (!kind) continue;
    if (k >= result.device_ops.size()) return at(i);
    const DeviceOp& op = result.device_ops[k++];
    const TraceEvent& e = trace.events[i];
    if (op.kind != *kind || op.size != e.size || op.stream != e.stream) return at(i, op.address);
  }
  return at(k == result.device_ops.size() ? trace.events.size() : trace.events.size() - 1);
}

using Turns = std::vector<std::pair<uint32_t, uint16_t>>;  // (group, pool) as the inference takes

// The search for the guesses under which the replay repeats the recording longest: each step
// turns one guess (or a capture's stretch of them), replays, and keeps the turn where the replay
// departs later.
class Settler {
 public:
  // `recorded_first`: where a request was misplaced, turn first the guess of the segment the run
  // put it in rather than the one the replay put it in.
  Settler(Trace& trace, const ReplayOptions& device, bool recorded_first = false)
      : recorded_first_(recorded_first),
        trace_(trace),
        options_(settling_options(device)),
        guesses_(trace.pool_guesses),  // the inference rewrites the trace's
        end_(trace.events.size()),
        tried_(guesses_.size(), 0),
        cursor_(guesses_.size(), 0),
        best_(departure(trace, options_)),
        now_(best_) {}

  bool departs_later_than(const Settler& o) const { return later(best_, o.best_); }
  const Turns& best_turns() const { return best_turns_; }

  PoolGuessSettling run() {
    PoolGuessSettling s;
    s.guesses = guesses_.size();
    s.replays = 1;
    while (best_.event < end_ && s.replays < kMaxReplays) {
      const std::optional<size_t> pick = next_pick(now_, chain_ > 0);
      if (!pick) {
        if (chain_ == 0) break;
        give_up_chain();  // the chain led nowhere
        continue;
      }
      const Turns before = turns_;
      turn(*pick);
      infer_private_pools(trace_, turns_);
      const Departure d = departure(trace_, options_);
      ++s.replays;
      if (later(d, best_)) {
        best_ = now_ = d;
        best_turns_ = turns_;
        chain_ = 0;
        ++s.changed;
        // A guess tried while an earlier one still made the replay depart was judged by that
        // departure: every guess may be tried again from here.
        std::fill(tried_.begin(), tried_.end(), 0);
      } else if (d.event == now_.event && d.misplaced_event == now_.misplaced_event &&
                 d.misplaced_address != now_.misplaced_address && chain_ < kMaxChain) {
        now_ = d;  // the same request, misplaced elsewhere: go on turning from there
        ++chain_;
      } else if (chain_ > 0) {
        give_up_chain();
      } else {
        turns_ = before;
      }
    }
    s.inference = infer_private_pools(trace_, best_turns_);  // the best routing found
    s.departs_still = best_.event < end_;
    return s;
  }

 private:
  // A bound on the time a file with many guesses takes to read.
  static constexpr uint64_t kMaxReplays = 64;
  // Turns kept without moving the departure, each because the replay then misplaced the same
  // request in another guessed segment: the segments of one capture turn together.
  static constexpr int kMaxChain = 4;

  static bool later(const Departure& a, const Departure& b) {
    return a.event != b.event ? a.event > b.event : a.misplaced_event > b.misplaced_event;
  }

  void give_up_chain() {
    turns_ = best_turns_;
    now_ = best_;
    chain_ = 0;
  }

  // The latest untried guess whose first request comes before `limit`.
  std::optional<size_t> latest_before(uint64_t limit) const {
    std::optional<size_t> pick;
    for (size_t g = 0; g < guesses_.size(); ++g) {
      if (tried_[g] == 0 && guesses_[g].first_request < limit &&
          (!pick || guesses_[g].first_request > guesses_[*pick].first_request))
        pick = g;
    }
    return pick;
  }

  // The guess whose segment held `address` at `event` (or was released by it), tried at most
  // once for each pool it may have been beside the one taken, and once more.
  std::optional<size_t> holding(uint64_t address, uint64_t event) const {
    for (size_t g = 0; g < guesses_.size(); ++g) {
      const PoolGuess& x = guesses_[g];
      if (tried_[g] < (x.third ? 3 : 2) && x.begin <= address && address < x.end &&
          x.first_request <= event && event <= x.released)
        return g;
    }
    return std::nullopt;
  }

  // Where the replay first put a request elsewhere than the run, up to its departure: the
  // segment the replay put it in, or the one the run did, was the other pool's. Failing that,
  // the latest untried guess before the departure; failing that, the one whose request made the
  // departing segment operation (recorded just before its alloc).
  std::optional<size_t> next_pick(const Departure& d, bool hints_only) const {
    uint64_t request = d.event;
    while (request < end_ && trace_.events[request].action != TraceAction::kAlloc &&
           trace_.events[request].action != TraceAction::kOom) {
      ++request;
    }
    std::optional<size_t> pick;
    if (d.misplaced_event <= request && d.misplaced_event < end_) {
      const uint64_t recorded_at = trace_.events[d.misplaced_event].addr;
      pick = holding(recorded_first_ ? recorded_at : d.misplaced_address, d.misplaced_event);
      if (!pick)
        pick = holding(recorded_first_ ? d.misplaced_address : recorded_at, d.misplaced_event);
    }
    // A segment released (or not) where the run did otherwise: its pool was the other.
    if (!pick && d.replayed_segment) pick = holding(d.replayed_segment, d.event);
    if (!pick && d.recorded_segment) pick = holding(d.recorded_segment, d.event);
    if (hints_only) return pick;
    if (!pick) pick = latest_before(d.event);
    if (!pick) pick = latest_before(request + 1);
    return pick;
  }

  // The first time a guess of a stretch is picked, the whole stretch is turned to vanished
  // pools (one capture's segments turn together); then each guess on its own. A guess turned
  // already is turned back (a later misplacement may show the turn was wrong).
  void turn(size_t pick) {
    const PoolGuess& x = guesses_[pick];
    bool whole_stretch = false;
    if (x.stretch && stretch_tried_.insert(*x.stretch).second) {
      for (const PoolGuess& y : guesses_) {
        if (y.stretch != x.stretch || y.taken == PoolGuess::kVanishedPool) continue;
        const std::pair<uint32_t, uint16_t> t{y.group, PoolGuess::kVanishedPool};
        if (std::find(turns_.begin(), turns_.end(), t) != turns_.end()) continue;
        turns_.push_back(t);
        whole_stretch = true;
      }
    }
    if (whole_stretch) return;
    ++tried_[pick];
    if (x.third) {  // taken, then other, then third, then taken again
      const uint16_t third = *x.third;
      std::erase_if(turns_, [&](const auto& t) {
        return t.first == x.group && (t.second == x.other || t.second == third);
      });
      cursor_[pick] = static_cast<uint8_t>((cursor_[pick] + 1) % 3);
      if (cursor_[pick] != 0) turns_.emplace_back(x.group, cursor_[pick] == 1 ? x.other : third);
      return;
    }
    const std::pair<uint32_t, uint16_t> t{x.group, x.other};
    if (const auto it = std::find(turns_.begin(), turns_.end(), t); it != turns_.end()) {
      turns_.erase(it);
    } else {
      turns_.push_back(t);
    }
  }

  const bool recorded_first_;
  Trace& trace_;
  const ReplayOptions options_;
  const std::vector<PoolGuess> guesses_;
  const uint64_t end_;
  std::vector<uint8_t> tried_;   // times each was tried since the replay last departed later
  std::vector<uint8_t> cursor_;  // of a guess of three pools, the one it was turned to last
  std::set<uint32_t> stretch_tried_;
  Turns best_turns_, turns_;
  Departure best_;
  Departure now_;  // where the replay under turns_ departs
  int chain_ = 0;
};

}  // namespace

PoolGuessSettling settle_pool_guesses(Trace& trace, const ReplayOptions& device) {
  if (trace.pool_guesses.empty()) return PoolGuessSettling{};
  Settler first(trace, device);
  PoolGuessSettling s = first.run();
  if (!s.departs_still) return s;
  // A greedy search keeps a turn that moved the departure later though it was wrong: a second one
  // that turns guesses in another order, from the routing first inferred, may get further.
  infer_private_pools(trace);
  Settler second(trace, device, true);
  PoolGuessSettling t = second.run();
  t.replays += s.replays;
  if (second.departs_later_than(first)) return t;
  s.replays = t.replays;
  s.inference = infer_private_pools(trace, first.best_turns());
  return s;
}

}  // namespace allocsim
