// Settles the guesses of the private-pool inference (Trace::pool_guesses) against the recorded
// segment operations: a replay at the recorded settings that routes a segment's requests to the
// wrong pool departs from the recorded cudaMalloc / cudaFree sequence soon after.
#pragma once

#include <cstdint>

#include "sim/replay/replay.hpp"
#include "sim/trace/private_pool_inference.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

struct PoolGuessSettling {
  uint64_t guesses = 0;
  uint64_t changed = 0;            // guesses the replays turned to the other pool
  uint64_t replays = 0;            // replays it took
  bool departs_still = false;      // the best routing found still departs from the recording
  PrivatePoolInference inference;  // of the best routing found
};

// Replays `trace` at its recorded settings; while the replay departs from the recorded segment
// operations, turns a guess and keeps the turn where the departure (or, at the same departure, the
// first request placed elsewhere than the run placed it) moves later. The guess turned is, in this
// order: the one whose segment held the first misplaced request, in the replay or in the run; the
// one whose segment the departing operation was on; the latest untried one before the departure.
// A stretch's guesses turn together the first time (one capture's segments); a turn that leaves
// the same request misplaced in another guessed segment is kept for a few more turns (segments
// that only turn right together). Where the replay still departs, a second such search turns the
// segment the run put a misplaced request in before the one the replay put it in, and the one
// that got further is kept. Bounded in replays; leaves the best routing found in the trace
// (request_pools, private_pools). Does nothing for a trace without guesses. The replays run on
// `device`'s capacity, context and cap (the device the run had: under a cap, which requests ran
// out of memory decides what the recorded segment operations can be); its other options are not
// used.
PoolGuessSettling settle_pool_guesses(Trace& trace, const ReplayOptions& device = {});

}  // namespace allocsim
