#include "sim/stack_site.hpp"

namespace allocsim {
namespace {

bool framework_file(const std::string& f) {
  return f.find("/site-packages/") != std::string::npos ||
         f.find("/dist-packages/") != std::string::npos || f.find("/torch/") != std::string::npos ||
         f.find("/lib/python") != std::string::npos;
}

}  // namespace

std::string frame_text(const Frame& f) {
  return f.filename + ":" + std::to_string(f.line) + " (" + f.name + ")";
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

}  // namespace allocsim
