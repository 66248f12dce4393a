// Naming where memory was allocated, from a trace's stack frames, and which sites hold the most.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/trace/trace.hpp"

namespace allocsim {

// "file:line (function)".
std::string frame_text(const Frame& frame);

struct StackSite {
  std::string user;       // the first frame outside Python's and the frameworks' own files
  std::string innermost;  // the frame that allocated
};

// Empty strings when the stack is kNoStack or empty; `user` is the innermost frame when every
// frame is framework code.
StackSite stack_site(const Trace& trace, uint32_t stack);

// "user, in innermost" (or one of them when they are the same), "(no stack recorded)" if none.
std::string describe_site(const Trace& trace, uint32_t stack);

struct SiteUsage {
  std::string site;  // describe_site() of the blocks' stack
  uint64_t bytes = 0;
  uint64_t blocks = 0;
};

// The allocation sites (from the trace's stack frames) of the blocks live just before an event,
// largest first. Empty when the trace carries no frames.
std::vector<SiteUsage> sites_live_at(const Trace& trace, uint64_t event_index, size_t top = 5);

}  // namespace allocsim
