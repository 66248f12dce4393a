// Naming where memory was allocated, from a trace's stack frames.
#pragma once

#include <cstdint>
#include <string>

#include "sim/trace.hpp"

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

}  // namespace allocsim
