// The remedies for a job at a batch size it was not recorded at, side by side: every allocator
// setting and torch.cuda.empty_cache() per step at the full batch, and gradient accumulation over
// micro-batches of batch / k for k = 2, 4, 8 (each predicted from the recordings, then
// planned as a recording is), with the cheapest that fits marked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/plan/plan.hpp"
#include "sim/predict/size_sweep.hpp"

namespace allocsim {

struct MicroBatchPlan {
  int passes = 0;  // forward and backward passes per optimizer step
  int64_t micro_batch = 0;
  Plan plan;  // under the first setting
};

struct AccumulationPlan {
  int64_t batch = 0;
  PlanResult at_batch;  // the settings (and options.step_starts' empty_cache row) at the batch
  std::vector<MicroBatchPlan> micro_batches;
  // Where no remedy at the full batch fits: the fewest passes that do (an index).
  std::optional<size_t> cheapest_micro_batch;
};

inline constexpr int kAccumulationPasses[] = {2, 4, 8};

// `options.step_starts`: the full batch's predicted steps, for the empty_cache row. Throws
// InputError where the recordings lack the optimizer's annotations (accumulate_gradients).
[[nodiscard]] AccumulationPlan plan_accumulation(const SizeSweep& sweep, const PlanOptions& options,
                                                 int64_t batch);
nlohmann::json accumulation_plan_json(const AccumulationPlan& plan);
std::string accumulation_plan_text(const AccumulationPlan& plan);

}  // namespace allocsim
