// What a replay went on past, one line each for the user (stderr) and for the JSON `warnings`:
// events that contradict themselves (a free of a block never allocated, an alloc at a live
// address), counted with the first, and where the replay departs from the recorded run.
#pragma once

#include <string>
#include <vector>

#include "sim/replay/replay.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

std::vector<std::string> replay_warnings(const Trace& trace, const ReplayResult& result);
// The contradictions' lines alone (for a caller that has the departure already).
std::vector<std::string> contradiction_warnings(const Trace& trace, const ReplayResult& result);

}  // namespace allocsim
