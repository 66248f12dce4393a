#include "sim/report/step_analysis.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "sim/report/stack_site.hpp"
#include "sim/trace/steps.hpp"

namespace allocsim {
namespace {

constexpr double kMinGrowthPerStep = 1 << 20;  // below 1 MiB a step, growth is noise

}  // namespace

StepAnalysis analyze_steps(const Trace& trace) {
  StepAnalysis out;
  out.marker = step_marker(trace);
  if (out.marker.empty()) return out;
  const std::vector<uint64_t> at = first_events_after(trace, step_end_times(trace, out.marker));

  struct Live {
    uint64_t size;
    uint32_t stack;
    size_t step;
  };
  std::unordered_map<uint64_t, Live> live;
  uint64_t live_bytes = 0;
  size_t next_end = 0;  // the steps closed so far
  const auto& ev = trace.events;
  for (uint64_t i = 0; i < ev.size(); ++i) {
    for (; next_end < at.size() && at[next_end] == i; ++next_end)
      out.boundaries.push_back({i, live_bytes});
    if (ev[i].action == TraceAction::kAlloc) {
      live[ev[i].addr] = Live{ev[i].size, ev[i].stack, next_end};
      live_bytes += ev[i].size;
    } else if (ev[i].action == TraceAction::kFreeRequested) {
      const auto it = live.find(ev[i].addr);
      if (it != live.end()) {
        live_bytes -= it->second.size;
        live.erase(it);
      }
    }
  }
  for (; next_end < at.size(); ++next_end) out.boundaries.push_back({ev.size(), live_bytes});

  // Steady growth: live memory rises at every boundary after the first (which holds the
  // optimizer's state, allocated once).
  const auto& b = out.boundaries;
  if (b.size() >= 3) {
    bool rising = true;
    for (size_t k = 1; k < b.size(); ++k) rising &= b[k].live_bytes > b[k - 1].live_bytes;
    out.growth_bytes_per_step =
        (static_cast<double>(b.back().live_bytes) - static_cast<double>(b.front().live_bytes)) /
        static_cast<double>(b.size() - 1);
    out.growing = rising && out.growth_bytes_per_step >= kMinGrowthPerStep;
  }
  if (!out.growing) return out;

  // Blocks allocated after the first boundary and still live at the end outlived their step.
  std::map<std::pair<std::string, std::string>, LeakSite> by_site;
  std::map<std::pair<std::string, std::string>, std::vector<bool>> steps_seen;
  for (const auto& [addr, l] : live) {
    if (l.step == 0 || l.step >= at.size()) continue;
    const StackSite where = stack_site(trace, l.stack);
    const std::string site = where.innermost.empty() ? "(no stack recorded)" : where.user;
    const std::string& operation = where.innermost;
    LeakSite& s = by_site[{site, operation}];
    s.site = site;
    s.operation = operation;
    s.bytes += l.size;
    ++s.blocks;
    auto& seen = steps_seen[{site, operation}];
    seen.resize(at.size() + 1, false);
    if (!seen[l.step]) {
      seen[l.step] = true;
      ++s.steps;
    }
  }
  for (auto& [key, s] : by_site) out.sites.push_back(s);
  std::sort(out.sites.begin(), out.sites.end(), [](const LeakSite& x, const LeakSite& y) {
    return x.bytes != y.bytes ? x.bytes > y.bytes : x.site < y.site;
  });
  return out;
}

}  // namespace allocsim
