#include "sim/plan/rank_plan.hpp"

#include <algorithm>
#include <map>

#include "core/format_size.hpp"

namespace allocsim {
namespace {

class RankSearch {
 public:
  RankSearch(const WorldSizeSweep& sweep, const PlanOptions& options, const AllocConf& conf)
      : sweep_(sweep), options_(options), conf_(conf) {}

  bool fits(int64_t ranks) {
    const auto known = by_ranks_.find(ranks);
    if (known != by_ranks_.end()) return known->second;
    PlanOptions o = options_;
    o.settings = {conf_};
    o.progress = nullptr;
    const Plan p = plan(sweep_.predict(ranks), o).plans.at(0);
    tried_.push_back({ranks, p.min_limit_bytes, p.peak_reserved_bytes, p.fits});
    return by_ranks_[ranks] = p.fits;
  }

  // The fewest ranks up to `bound` that fit: doubling from one until one fits, then halving the
  // gap to the last that did not.
  RankPlan run(int64_t bound) {
    RankPlan out{conf_, 0, {}};
    int64_t lo = 0, hi = 1;  // lo does not fit (0: none tried), hi fits once found
    while (!fits(hi)) {
      if (hi >= bound) {
        out.tried = tried_;
        return out;
      }
      lo = hi;
      hi = std::min(bound, hi * 2);
    }
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (fits(mid) ? hi : lo) = mid;
    }
    out.min_ranks = hi;
    out.tried = tried_;
    return out;
  }

 private:
  const WorldSizeSweep& sweep_;
  const PlanOptions& options_;
  AllocConf conf_;
  std::map<int64_t, bool> by_ranks_;
  std::vector<RankTrial> tried_;
};

}  // namespace

RankPlanResult plan_ranks(const WorldSizeSweep& sweep, const PlanOptions& options, int64_t bound) {
  RankPlanResult result;
  result.bound = bound;
  result.card_bytes = options.card_bytes;
  result.context_bytes = options.context_bytes;
  result.limit_bytes = options.limit_bytes;
  const std::vector<AllocConf> settings =
      options.settings.empty() ? default_plan_settings(sweep.predict(sweep.ranks().back()))
                               : options.settings;
  for (size_t i = 0; i < settings.size(); ++i) {
    RankSearch search(sweep, options, settings[i]);
    result.plans.push_back(search.run(bound));
    if (options.progress) options.progress(i + 1, settings.size());
  }
  return result;
}

nlohmann::json rank_plan_json(const RankPlanResult& r) {
  nlohmann::json plans = nlohmann::json::array();
  for (const RankPlan& p : r.plans) {
    nlohmann::json tried = nlohmann::json::array();
    for (const RankTrial& t : p.tried) {
      tried.push_back({{"ranks", t.ranks},
                       {"min_limit_bytes", t.min_limit_bytes},
                       {"peak_reserved_bytes", t.peak_reserved_bytes},
                       {"fits", t.fits}});
    }
    plans.push_back(
        {{"alloc_conf", p.conf.to_string()}, {"min_ranks", p.min_ranks}, {"tried", tried}});
  }
  nlohmann::json json = {{"plans", plans},
                         {"bound", r.bound},
                         {"card_bytes", r.card_bytes},
                         {"context_bytes", r.context_bytes}};
  if (r.limit_bytes) json["limit_bytes"] = *r.limit_bytes;
  return json;
}

std::string rank_plan_text(const RankPlanResult& r) {
  const std::string under = r.limit_bytes ? "under a limit of " + format_size(*r.limit_bytes)
                                          : "on a " + format_size(r.card_bytes) + " card with " +
                                                format_size(r.context_bytes) + " outside PyTorch";
  std::string out = "fewest ranks on which each rank fits " + under + ":";
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const RankPlan& p = r.plans[i];
    const std::string conf = p.conf.to_string().empty() ? "defaults" : p.conf.to_string();
    out +=
        (i ? ", " : " ") +
        (p.min_ranks > 0 ? std::to_string(p.min_ranks) : "more than " + std::to_string(r.bound)) +
        " (" + conf + ")";
  }
  out += "\n(world sizes searched up to " + std::to_string(r.bound) +
         "; each rank's trace predicted from the recordings, then planned as a recording)\n";
  return out;
}

}  // namespace allocsim
