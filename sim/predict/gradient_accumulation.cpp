#include "sim/predict/gradient_accumulation.hpp"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "sim/trace/input_error.hpp"
#include "sim/trace/steps.hpp"

namespace allocsim {
namespace {

bool is_free(TraceAction a) {
  return a == TraceAction::kFreeRequested || a == TraceAction::kFreeCompleted;
}

// One step's events: [pass, optimizer) is the forward and backward pass, [optimizer, end) the
// optimizer step and zero_grad; [begin, pass) comes before the pass (the first step's setup).
struct Step {
  size_t begin, pass, optimizer, end;
};

size_t allocs_in(const Trace& trace, size_t begin, size_t end) {
  size_t n = 0;
  for (size_t i = begin; i < end; ++i) n += trace.events[i].action == TraceAction::kAlloc;
  return n;
}

// The first step's pass starts where the trace's setup ends (the model's parameters, a history's
// blocks alive at its start): as many allocations before its optimizer step as the second step's
// pass makes; with one step only, after the allocations without a time (those a prediction makes
// first for the blocks alive at its recording's start).
void trim_first_pass(const Trace& trace, std::vector<Step>& steps) {
  Step& first = steps.front();
  if (steps.size() >= 2 && steps[1].optimizer > steps[1].begin) {
    size_t want = allocs_in(trace, steps[1].begin, steps[1].optimizer);
    size_t i = first.optimizer;
    while (i > first.begin && want > 0) {
      --i;
      want -= trace.events[i].action == TraceAction::kAlloc;
    }
    first.pass = i;
    return;
  }
  size_t i = first.begin;
  while (i < first.optimizer && trace.events[i].time_us == 0) ++i;
  first.pass = i;
}

std::vector<Step> steps_of(const Trace& trace) {
  const std::vector<uint64_t> ends = annotation_times(trace, "zero_grad", false);
  const std::vector<uint64_t> starts = annotation_times(trace, "Optimizer.step", true);
  if (ends.empty() || starts.empty()) {
    throw InputError(trace.source +
                     ": gradient accumulation needs the trace's steps: the optimizer's "
                     "record_function annotations (Optimizer.step, zero_grad), which it lacks");
  }
  std::vector<Step> steps;
  const auto& ev = trace.events;
  size_t i = 0;
  for (uint64_t end_time : ends) {
    Step s{i, i, i, i};
    const auto start =
        std::lower_bound(starts.begin(), starts.end(), i < ev.size() ? ev[i].time_us : end_time);
    // A step with no optimizer step in it is kept as it is (no pass to repeat).
    const bool has_optimizer = start != starts.end() && *start <= end_time;
    while (i < ev.size() && ev[i].time_us <= end_time) {
      if (has_optimizer && ev[i].time_us <= *start) s.optimizer = i + 1;
      ++i;
    }
    s.end = i;
    if (s.end > s.begin) steps.push_back(s);
  }
  if (i < ev.size()) steps.push_back({i, i, i, ev.size()});  // after the last step: as is
  if (!steps.empty()) trim_first_pass(trace, steps);
  return steps;
}

class Accumulator {
 public:
  Accumulator(const Trace& in, int k) : in_(in), k_(k) {
    next_address_ = 0;
    for (const TraceEvent& e : in.events) next_address_ = std::max(next_address_, e.addr + e.size);
    for (const SnapshotSegment& s : in.segments)
      next_address_ = std::max(next_address_, s.address + s.total_size);
    next_address_ = (next_address_ | ((uint64_t{1} << 40) - 1)) + 1;  // beyond every recorded one
  }

  Trace run() {
    Trace out;
    out.source = in_.source + " accumulating gradients over " + std::to_string(k_) + " passes";
    out.device = in_.device;
    out.settings = in_.settings;
    out.annotations = in_.annotations;
    // A history that starts mid-run rebuilds its first state from these; the passes added
    // allocate and free their own blocks, which the final state never holds.
    out.segments = in_.segments;
    out.addresses_recorded = in_.addresses_recorded;
    out.frames = in_.frames;
    out.stacks = in_.stacks;
    out_ = &out.events;
    for (const Step& s : steps_of(in_)) {
      const std::unordered_set<size_t> grads = gradients(s);
      append(s.begin, s.optimizer);
      for (int pass = 1; pass < k_; ++pass) repeat_pass(s, grads);
      append(s.optimizer, s.end);
    }
    return out;
  }

 private:
  // The allocations (by event index) of blocks the pass leaves for the optimizer: freed after
  // it begins, or never. By event, not address: the cache hands one address out many times.
  std::unordered_set<size_t> gradients(const Step& s) const {
    std::unordered_map<uint64_t, size_t> live;  // address -> its allocation
    for (size_t i = s.pass; i < s.optimizer; ++i) {
      const TraceEvent& e = in_.events[i];
      if (e.action == TraceAction::kAlloc) {
        live[e.addr] = i;
      } else if (is_free(e.action)) {
        live.erase(e.addr);
      }
    }
    std::unordered_set<size_t> kept;
    for (const auto& [address, alloc] : live) kept.insert(alloc);
    return kept;
  }

  void append(size_t begin, size_t end) {
    out_->insert(out_->end(), in_.events.begin() + static_cast<std::ptrdiff_t>(begin),
                 in_.events.begin() + static_cast<std::ptrdiff_t>(end));
  }

  // Another pass: its own blocks at fresh addresses; a gradient freed as soon as it is made.
  void repeat_pass(const Step& s, const std::unordered_set<size_t>& grads) {
    std::unordered_map<uint64_t, uint64_t> renamed;  // this pass's blocks
    const uint64_t time = s.optimizer > s.pass ? in_.events[s.optimizer - 1].time_us : 0;
    for (size_t i = s.pass; i < s.optimizer; ++i) {
      TraceEvent e = in_.events[i];
      e.time_us = time;
      if (e.action == TraceAction::kAlloc) {
        const uint64_t fresh = next_address_;
        next_address_ += (e.size + 511) / 512 * 512 + 512;
        e.addr = fresh;
        out_->push_back(e);
        if (grads.count(i)) {
          e.action = TraceAction::kFreeRequested;
          out_->push_back(e);
          e.action = TraceAction::kFreeCompleted;
          out_->push_back(e);
        } else {
          renamed[in_.events[i].addr] = fresh;
        }
      } else if (is_free(e.action)) {
        const auto it = renamed.find(e.addr);
        if (it == renamed.end()) continue;  // a block of an earlier pass, freed there
        e.addr = it->second;
        out_->push_back(e);
      }
      // Segment events and markers belong to the recorded pass only.
    }
  }

  const Trace& in_;
  int k_;
  uint64_t next_address_;
  std::vector<TraceEvent>* out_ = nullptr;
};

}  // namespace

Trace accumulate_gradients(const Trace& micro_batch, int k) {
  if (k < 1 || k > 64) {
    throw InputError("gradient accumulation over " + std::to_string(k) +
                     " passes: expected 1 to 64");
  }
  return Accumulator(micro_batch, k).run();
}

}  // namespace allocsim
