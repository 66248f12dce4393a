// Capacity planning over world sizes: for each allocator setting, the fewest ranks of a
// data-parallel job on which each rank fits under a card or a limit, found by search over
// per-rank predictions (sim/predict/world_size_sweep) each planned as a recording is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/plan/plan.hpp"
#include "sim/predict/world_size_sweep.hpp"

namespace allocsim {

struct RankTrial {
  int64_t ranks = 0;
  uint64_t min_limit_bytes = 0;
  uint64_t peak_reserved_bytes = 0;  // under that limit
  bool fits = false;
};

struct RankPlan {
  AllocConf conf;
  int64_t min_ranks = 0;         // the fewest ranks that fit (0: none up to the search's bound)
  std::vector<RankTrial> tried;  // in the order tried
};

struct RankPlanResult {
  std::vector<RankPlan> plans;
  int64_t bound = 0;  // the most ranks searched
  uint64_t card_bytes = 0;
  uint64_t context_bytes = 0;
  std::optional<uint64_t> limit_bytes;
};

// `options.settings` empty: the recorded setting (of the recording with the most ranks) and the
// useful set beside it, as plan() takes them. Assumes that each rank's memory does not grow with
// the ranks.
[[nodiscard]] RankPlanResult plan_ranks(const WorldSizeSweep& sweep, const PlanOptions& options,
                                        int64_t bound);
nlohmann::json rank_plan_json(const RankPlanResult& result);
std::string rank_plan_text(const RankPlanResult& result);

}  // namespace allocsim
