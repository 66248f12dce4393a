#include "sim/plan/accumulation_plan.hpp"

#include "core/format_size.hpp"
#include "sim/predict/gradient_accumulation.hpp"

namespace allocsim {

AccumulationPlan plan_accumulation(const SizeSweep& sweep, const PlanOptions& options,
                                   int64_t batch) {
  AccumulationPlan out;
  out.batch = batch;
  const Trace full = sweep.predict(batch);
  out.at_batch = plan(full, options);
  PlanOptions micro = options;
  micro.settings = {out.at_batch.plans.front().conf};
  micro.step_starts.clear();
  micro.progress = nullptr;
  for (int k : kAccumulationPasses) {
    if (batch % k != 0) continue;
    const int64_t size = batch / k;
    const PlanResult r = plan(accumulate_gradients(sweep.predict(size), k), micro);
    out.micro_batches.push_back({k, size, r.plans.front()});
  }
  if (!out.at_batch.cheapest) {
    for (size_t i = 0; i < out.micro_batches.size(); ++i) {
      if (out.micro_batches[i].plan.fits) {
        out.cheapest_micro_batch = i;
        break;
      }
    }
  }
  return out;
}

nlohmann::json accumulation_plan_json(const AccumulationPlan& a) {
  nlohmann::json micro = nlohmann::json::array();
  for (const MicroBatchPlan& m : a.micro_batches) {
    nlohmann::json row = plan_row_json(m.plan);
    row["passes"] = m.passes;
    row["micro_batch"] = m.micro_batch;
    micro.push_back(std::move(row));
  }
  nlohmann::json json = {
      {"batch", a.batch}, {"at_batch", plan_json(a.at_batch)}, {"gradient_accumulation", micro}};
  if (a.cheapest_micro_batch) {
    const MicroBatchPlan& m = a.micro_batches[*a.cheapest_micro_batch];
    json["cheapest"] = {{"alloc_conf", m.plan.conf.to_string()},
                        {"passes", m.passes},
                        {"micro_batch", m.micro_batch}};
  } else {
    json["cheapest"] = json["at_batch"]["cheapest"];
  }
  return json;
}

std::string accumulation_plan_text(const AccumulationPlan& a) {
  std::string out = "at batch " + std::to_string(a.batch) + " (predicted from the recordings):\n" +
                    plan_text(a.at_batch);
  if (a.micro_batches.empty()) return out;
  const std::string conf = a.micro_batches.front().plan.conf.to_string();
  out += "\ngradient accumulation at batch " + std::to_string(a.batch) + ", with " +
         (conf.empty() ? "the defaults" : conf) + ":\n";
  out += plan_table_header("passes x micro-batch", a.at_batch.limit_bytes.has_value());
  for (size_t i = 0; i < a.micro_batches.size(); ++i) {
    const MicroBatchPlan& m = a.micro_batches[i];
    out += plan_table_row(std::to_string(m.passes) + " x " + std::to_string(m.micro_batch), m.plan,
                          a.cheapest_micro_batch == i ? "  <- cheapest" : "");
  }
  out +=
      "each pass a forward and backward over a micro-batch, one optimizer step after them: k "
      "passes take about k times the compute of one.\n";
  if (!a.at_batch.cheapest && !a.cheapest_micro_batch) {
    out += "nothing here fits: see the smallest card above.\n";
  }
  return out;
}

}  // namespace allocsim
