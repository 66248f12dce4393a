#include "sim/plan/sweep_plan.hpp"

#include <algorithm>
#include <map>

#include "core/format_size.hpp"

namespace allocsim {
namespace {

class Search {
 public:
  Search(const SizeSweep& sweep, const PlanOptions& options, const AllocConf& conf,
         GuessedSizes guessed = GuessedSizes::kContinued)
      : sweep_(sweep), options_(options), conf_(conf), guessed_(guessed) {}

  bool fits(int64_t value) {
    const auto known = by_value_.find(value);
    if (known != by_value_.end()) return known->second;
    PlanOptions o = options_;
    o.settings = {conf_};
    o.progress = nullptr;
    const PlanResult r = plan(sweep_.predict(value, guessed_), o);
    const Plan& p = r.plans.at(0);
    tried_.push_back({value, p.min_limit_bytes, p.peak_reserved_bytes, p.fits});
    return by_value_[value] = p.fits;
  }

  SweepPlan run(int64_t start, int64_t bound) {
    SweepPlan out{conf_, 0, {}, std::nullopt};
    int64_t lo = 0, hi = 0;  // lo fits (0: nothing), hi does not (0: not found yet)
    if (fits(start)) {
      lo = start;
      while (lo < bound) {  // doubling until it does not fit
        const int64_t next = std::min(bound, lo * 2);
        if (!fits(next)) {
          hi = next;
          break;
        }
        lo = next;
      }
      if (hi == 0) hi = bound + 1;
    } else {
      hi = start;
    }
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (fits(mid) ? lo : hi) = mid;
    }
    out.max_value = lo;
    out.tried = tried_;
    return out;
  }

 private:
  const SizeSweep& sweep_;
  const PlanOptions& options_;
  AllocConf conf_;
  GuessedSizes guessed_;
  std::map<int64_t, bool> by_value_;
  std::vector<SweepTrial> tried_;
};

}  // namespace

SweepPlanResult plan_sweep(const SizeSweep& sweep, const PlanOptions& options, int64_t bound) {
  SweepPlanResult result;
  result.bound = bound;
  result.card_bytes = options.card_bytes;
  result.context_bytes = options.context_bytes;
  result.limit_bytes = options.limit_bytes;
  const int64_t largest = sweep.values().back();
  const std::vector<AllocConf> settings =
      options.settings.empty() ? default_plan_settings(sweep.predict(largest)) : options.settings;
  result.largest_recorded = largest;
  result.guessed_at_bound = sweep.guessed_at(bound);
  for (size_t i = 0; i < settings.size(); ++i) {
    Search search(sweep, options, settings[i]);
    result.plans.push_back(search.run(std::min(largest, bound), bound));
    SweepPlan& p = result.plans.back();
    if (result.guessed_at_bound.allocations > 0) {
      // Held sizes need no more memory than continued ones: the search starts where that one
      // ended.
      Search held(sweep, options, settings[i], GuessedSizes::kHeld);
      p.max_value_held = held.run(std::max<int64_t>(p.max_value, 1), bound).max_value;
    }
    if (options.progress) options.progress(i + 1, settings.size());
  }
  return result;
}

nlohmann::json sweep_plan_json(const SweepPlanResult& r) {
  nlohmann::json plans = nlohmann::json::array();
  for (const SweepPlan& p : r.plans) {
    nlohmann::json tried = nlohmann::json::array();
    for (const SweepTrial& t : p.tried) {
      tried.push_back({{"value", t.value},
                       {"min_limit_bytes", t.min_limit_bytes},
                       {"peak_reserved_bytes", t.peak_reserved_bytes},
                       {"fits", t.fits}});
    }
    nlohmann::json plan = {
        {"alloc_conf", p.conf.to_string()}, {"max_value", p.max_value}, {"tried", tried}};
    if (p.max_value_held) plan["max_value_held"] = *p.max_value_held;
    plans.push_back(std::move(plan));
  }
  nlohmann::json json = {{"plans", plans},
                         {"bound", r.bound},
                         {"card_bytes", r.card_bytes},
                         {"context_bytes", r.context_bytes}};
  if (r.limit_bytes) json["limit_bytes"] = *r.limit_bytes;
  if (r.guessed_at_bound.allocations > 0) {
    json["guessed_sizes"] = {{"allocations", r.guessed_at_bound.allocations},
                             {"beyond", r.largest_recorded},
                             {"continued_bytes_at_bound", r.guessed_at_bound.continued_bytes},
                             {"held_bytes_at_bound", r.guessed_at_bound.held_bytes}};
  }
  return json;
}

std::string sweep_plan_text(const SweepPlanResult& r) {
  const std::string under = r.limit_bytes ? "under a limit of " + format_size(*r.limit_bytes)
                                          : "on a " + format_size(r.card_bytes) + " card with " +
                                                format_size(r.context_bytes) + " outside PyTorch";
  std::string out = "largest value that fits " + under + ":";
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const SweepPlan& p = r.plans[i];
    const std::string conf = p.conf.to_string().empty() ? "defaults" : p.conf.to_string();
    out += (i ? ", " : " ") + std::to_string(p.max_value) +
           (p.max_value == r.bound ? " or more" : "") + " (" + conf + ")";
  }
  out += "\n(values searched up to " + std::to_string(r.bound) +
         "; each predicted from the recordings, then planned as a recording)\n";
  if (r.guessed_at_bound.allocations > 0) {
    out += std::to_string(r.guessed_at_bound.allocations) + " allocations' sizes beyond " +
           std::to_string(r.largest_recorded) +
           " are guesses (growing on no line through every recording: a workspace with a floor, or "
           "kernels chosen by size): continued as they "
           "grew last, as above; held at their size at " +
           std::to_string(r.largest_recorded) + ", the largest values would be:";
    for (size_t i = 0; i < r.plans.size(); ++i) {
      const SweepPlan& p = r.plans[i];
      const std::string conf = p.conf.to_string().empty() ? "defaults" : p.conf.to_string();
      out += (i ? ", " : " ") + std::to_string(p.max_value_held.value_or(p.max_value)) + " (" +
             conf + ")";
    }
    out += ". The real largest lies between; a recording at a larger value settles it.\n";
  }
  return out;
}

}  // namespace allocsim
