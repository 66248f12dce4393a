// Capacity planning beyond the recorded run: for each allocator setting, the largest value of a
// size parameter (a batch size, a sequence length) whose predicted trace runs under a card or a
// limit, found by search over predictions (sim/predict) each planned as a recording is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/plan/plan.hpp"
#include "sim/predict/size_sweep.hpp"

namespace allocsim {

struct SweepTrial {
  int64_t value = 0;
  uint64_t min_limit_bytes = 0;
  uint64_t peak_reserved_bytes = 0;  // under that limit
  bool fits = false;
};

struct SweepPlan {
  AllocConf conf;
  int64_t max_value = 0;          // the largest value that fits (0: none, up to the search's bound)
  std::vector<SweepTrial> tried;  // in the order tried
  // Where sizes beyond the largest recording are guesses (SizeSweep::guessed_at): the largest
  // value that fits with them held at the largest recording's sizes. The real largest lies
  // between max_value and this, as far as the recordings can tell.
  std::optional<int64_t> max_value_held;
};

struct SweepPlanResult {
  std::vector<SweepPlan> plans;
  int64_t bound = 0;  // the largest value searched
  int64_t largest_recorded = 0;
  SizeGuess guessed_at_bound;  // the allocations whose size is a guess at the bound
  uint64_t card_bytes = 0;
  uint64_t context_bytes = 0;
  std::optional<uint64_t> limit_bytes;
};

// `options.settings` empty: the recorded setting (of the largest recording) and the useful set
// beside it, as plan() takes them. Assumes that memory grows with the value.
[[nodiscard]] SweepPlanResult plan_sweep(const SizeSweep& sweep, const PlanOptions& options,
                                         int64_t bound);
nlohmann::json sweep_plan_json(const SweepPlanResult& result);
std::string sweep_plan_text(const SweepPlanResult& result);

}  // namespace allocsim
