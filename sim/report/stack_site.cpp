#include "sim/report/stack_site.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace allocsim {
namespace {

bool framework_file(const std::string& f) {
  return f.find("/site-packages/") != std::string::npos ||
         f.find("/dist-packages/") != std::string::npos || f.find("/torch/") != std::string::npos ||
         f.find("/lib/python") != std::string::npos;
}

}  // namespace

std::string frame_text(const Frame& f) {
  const std::string line = f.line == kUnknownLine ? "?" : std::to_string(f.line);
  return f.filename + ":" + line + " (" + f.name + ")";
}

StackSite stack_site(const Trace& trace, uint32_t stack) {
  StackSite site;
  if (stack == kNoStack || trace.stacks[stack].empty()) return site;
  const auto& frames = trace.stacks[stack];
  site.innermost = frame_text(trace.frames[frames.front()]);
  site.user = site.innermost;
  for (uint32_t f : frames) {
    if (!framework_file(trace.frames[f].filename)) {
      site.user = frame_text(trace.frames[f]);
      break;
    }
  }
  return site;
}

std::string describe_site(const Trace& trace, uint32_t stack) {
  const StackSite site = stack_site(trace, stack);
  if (site.innermost.empty()) return "(no stack recorded)";
  return site.user == site.innermost ? site.user : site.user + ", in " + site.innermost;
}

std::vector<SiteUsage> sites_live_at(const Trace& trace, uint64_t event_index, size_t top) {
  if (trace.stacks.empty()) return {};
  std::unordered_map<uint64_t, std::pair<uint64_t, uint32_t>> live;  // address -> size, stack
  for (uint64_t i = 0; i < event_index && i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.action == TraceAction::kAlloc) live[e.addr] = {e.size, e.stack};
    if (e.action == TraceAction::kFreeRequested) live.erase(e.addr);
  }
  std::map<std::string, SiteUsage> by_site;
  for (const auto& [addr, v] : live) {
    SiteUsage& s = by_site[describe_site(trace, v.second)];
    s.bytes += v.first;
    ++s.blocks;
  }
  std::vector<SiteUsage> out;
  for (auto& [site, usage] : by_site) {
    usage.site = site;
    out.push_back(usage);
  }
  std::sort(out.begin(), out.end(), [](const SiteUsage& a, const SiteUsage& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.site < b.site;
  });
  if (out.size() > top) out.resize(top);
  return out;
}

}  // namespace allocsim
