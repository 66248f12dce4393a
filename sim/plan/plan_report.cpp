// plan's table of remedies as JSON and as text.
#include <cstdio>

#include "core/format_size.hpp"
#include "sim/plan/plan.hpp"

namespace allocsim {
namespace {

nlohmann::json device_calls_json(const DeviceCallCost& c) {
  return {{"cap_bytes", c.cap_bytes}, {"cuda_malloc", c.allocs}, {"cuda_free", c.frees},
          {"maps", c.maps},           {"unmaps", c.unmaps},      {"estimated_seconds", c.seconds}};
}

// The smallest card the best setting fits on, with the memory held outside PyTorch.
uint64_t smallest_card(const PlanResult& r) {
  return r.plans[r.best].min_limit_bytes + r.context_bytes;
}

std::string setting_text(const AllocConf& conf) {
  return conf.to_string().empty() ? "(defaults)" : conf.to_string();
}

}  // namespace

nlohmann::json plan_json(const PlanResult& r) {
  nlohmann::json plans = nlohmann::json::array();
  for (const Plan& p : r.plans) plans.push_back(plan_row_json(p));
  nlohmann::json json = {
      {"plans", plans},
      {"card_bytes", r.card_bytes},
      {"context_bytes", r.context_bytes},
      {"best_alloc_conf", r.plans.empty() ? "" : r.plans[r.best].conf.to_string()},
      {"device_call_times", r.call_times_device}};
  if (r.limit_bytes) json["limit_bytes"] = *r.limit_bytes;
  if (r.torch_version) json["torch_version"] = r.torch_version->to_string();
  if (!r.limit_bytes && !r.plans.empty()) json["smallest_card_bytes"] = smallest_card(r);
  if (!r.empty_cache_before.empty()) json["empty_cache_before_events"] = r.empty_cache_before;
  if (r.empty_cache_every_step && !r.plans.empty()) {
    const Plan& e = *r.empty_cache_every_step;
    nlohmann::json row = plan_row_json(e);
    row["empty_cache_calls"] = r.empty_cache_calls;
    row["extra_device_allocs"] = e.calls.allocs - r.plans[0].calls.allocs;
    row["extra_device_seconds"] = e.calls.seconds - r.plans[0].calls.seconds;
    json["empty_cache_every_step"] = std::move(row);
  }
  json["cheapest"] = nullptr;
  if (r.cheapest) {
    json["cheapest"] = {
        {"alloc_conf", remedy_plan(r, *r.cheapest).conf.to_string()},
        {"empty_cache_every_step", r.cheapest->kind == Remedy::Kind::kEmptyCacheEveryStep}};
  }
  return json;
}

namespace {

std::string verdict_text(const Plan& p) {
  return p.fits ? "fits, " + format_size(static_cast<uint64_t>(p.margin_bytes)) + " to spare"
                : "does not fit: " + format_size(static_cast<uint64_t>(-p.margin_bytes)) + " short";
}

std::string seconds_text(double s) {
  char buf[32];
  if (s < 10) {
    std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  }
  return buf;
}

}  // namespace

std::string plan_table_header(const std::string& label, bool under_limit) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-40s %11s %11s %13s %7s %7s %9s  %s\n", label.c_str(),
                "min limit", "peak alloc", "peak reserved", "frag", "calls", "time",
                under_limit ? "under the limit" : "on the card");
  return buf;
}

std::string plan_table_row(const std::string& label, const Plan& p, const std::string& marks) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-40s %11s %11s %13s %7.4f %7lld %9s  %s%s\n", label.c_str(),
                format_size(p.min_limit_bytes).c_str(), format_size(p.peak_allocated_bytes).c_str(),
                format_size(p.peak_reserved_bytes).c_str(), p.fragmentation,
                static_cast<long long>(p.calls.calls()), seconds_text(p.calls.seconds).c_str(),
                verdict_text(p).c_str(), marks.c_str());
  return buf;
}

namespace {

std::string marks(const PlanResult& r, const Remedy& remedy) {
  std::string m;
  if (remedy == Remedy{Remedy::Kind::kSetting, r.best}) m = "best";
  if (r.cheapest == remedy) m += m.empty() ? "cheapest" : ", cheapest";
  return m.empty() ? "" : "  <- " + m;
}

std::string footer(const PlanResult& r) {
  std::string out =
      "\nmin limit: the smallest cap on reserved memory (set_per_process_memory_fraction x "
      "device) with no OOM, within 2 MiB.\n"
      "calls: cudaMalloc, cudaFree, maps and unmaps of a run under that cap (the card's, or the "
      "min limit where larger); time: theirs as measured on " +
      r.call_times_device + " (--call-times).\n";
  if (!r.empty_cache_before.empty()) {
    out += "every setting with torch.cuda.empty_cache() called before " +
           std::to_string(r.empty_cache_before.size()) + " events (--empty-cache-at).\n";
  }
  if (r.limit_bytes) {
    out += "limit: " + format_size(*r.limit_bytes) + "; a setting fits when min limit <= it.\n";
  } else {
    out += "card: " + format_size(r.card_bytes) + " with " + format_size(r.context_bytes) +
           " outside PyTorch; a setting fits when min limit + that <= the card";
    if (!r.plans.empty()) {
      out += " (the smallest card that fits: " + format_size(smallest_card(r)) + ", with " +
             setting_text(r.plans[r.best].conf) + ")";
    }
    out += ".\n";
  }
  out +=
      "mixed precision and activation checkpointing change the program itself: record a short run "
      "of each variant and plan it.\n";
  if (r.cheapest) {
    out += "cheapest: the remedy that fits with the least device-call time.\n";
  } else if (!r.plans.empty() && !r.limit_bytes) {
    out +=
        "no setting here fits this card: a card of " + format_size(smallest_card(r)) + " would.\n";
  } else if (!r.plans.empty()) {
    out +=
        "no setting here fits under this limit: " + format_size(r.plans[r.best].min_limit_bytes) +
        " would do.\n";
  }
  return out;
}

}  // namespace

std::string plan_text(const PlanResult& r) {
  std::string out = plan_table_header("PYTORCH_CUDA_ALLOC_CONF", r.limit_bytes.has_value());
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const Plan& p = r.plans[i];
    out += plan_table_row(setting_text(p.conf), p, marks(r, {Remedy::Kind::kSetting, i}));
  }
  if (r.empty_cache_every_step && !r.plans.empty()) {
    const Plan& e = *r.empty_cache_every_step;
    out += "with torch.cuda.empty_cache() before every step (" +
           std::to_string(r.empty_cache_calls) + " calls):\n";
    out +=
        plan_table_row(setting_text(e.conf), e, marks(r, {Remedy::Kind::kEmptyCacheEveryStep, 0}));
  }
  return out + footer(r);
}

nlohmann::json plan_row_json(const Plan& p) {
  return {{"alloc_conf", p.conf.to_string()},
          {"min_limit_bytes", p.min_limit_bytes},
          {"peak_allocated_bytes", p.peak_allocated_bytes},
          {"peak_reserved_bytes", p.peak_reserved_bytes},
          {"fragmentation", p.fragmentation},
          {"unconstrained_peak_reserved_bytes", p.unconstrained_peak_reserved_bytes},
          {"replays", p.replays},
          {"fits", p.fits},
          {"margin_bytes", p.margin_bytes},
          {"device_calls", device_calls_json(p.calls)}};
}

}  // namespace allocsim
