// Leaks across iterations: the step structure of a training trace, live memory at each step
// boundary, steady growth, and the allocation sites whose blocks outlive their step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/trace/trace.hpp"

namespace allocsim {

struct StepBoundary {
  uint64_t event_index;  // the first event after the boundary
  uint64_t live_bytes;   // requested bytes of the blocks live there
};

struct LeakSite {
  std::string site;       // the first frame in the user's own code
  std::string operation;  // the innermost frame
  uint64_t bytes = 0;     // still live at the end of the trace
  uint64_t blocks = 0;
  uint64_t steps = 0;  // in how many steps such blocks were allocated
};

struct StepAnalysis {
  std::string marker;  // the annotation whose END marks a step boundary; empty if none
  std::vector<StepBoundary> boundaries;
  bool growing = false;  // live memory rises at every boundary after the first
  double growth_bytes_per_step = 0;
  std::vector<LeakSite> sites;  // largest first
};

// Steps come from the snapshot's record_function annotations (the optimizer's zero_grad or step
// END); a trace without them gets no step structure.
StepAnalysis analyze_steps(const Trace& trace);

}  // namespace allocsim
