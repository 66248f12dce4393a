// Settles the guesses of the private-pool inference (Trace::pool_guesses) against the recorded
// segment operations: a replay at the recorded settings that routes a segment's requests to the
// wrong pool departs from the recorded cudaMalloc / cudaFree sequence soon after.
#pragma once

#include <cstdint>

#include "sim/trace/trace.hpp"

namespace allocsim {

struct PoolGuessSettling {
  uint64_t guesses = 0;
  uint64_t changed = 0;        // guesses the replays turned to the other pool
  uint64_t replays = 0;        // replays it took
  bool departs_still = false;  // the best routing found still departs from the recording
};

// Replays `trace` at its recorded settings; while the replay departs from the recorded segment
// operations, tries the other pool for the guesses made before the departure, the latest first,
// keeping each change that moves the departure later. Leaves the best routing found in the trace
// (request_pools, private_pools). Does nothing for a trace without guesses.
PoolGuessSettling settle_pool_guesses(Trace& trace);

}  // namespace allocsim
