// The allocator's state at the first event of a history that starts mid-run (a snapshot recorded
// with a bounded max_entries): reconstructed from the trace and the snapshot's final segments.
#pragma once

#include <cstdint>
#include <vector>

#include "core/alloc_conf.hpp"
#include "core/caching_allocator.hpp"
#include "sim/trace.hpp"

namespace allocsim {

struct InitialSegment {
  uint64_t address;
  uint64_t size;
  StreamId stream;
  bool small;
  std::vector<RestoredBlock> blocks;  // allocated at the first event, by address
};

struct InitialState {
  std::vector<InitialSegment> segments;
  uint64_t blocks_outside_segments = 0;  // freed in the window but in no known segment
  bool empty() const { return segments.empty(); }
};

// Empty for a trace that holds its whole history. Blocks the trace frees before allocating them
// existed at its start; so did segments it frees without allocating, and the final segments it
// never allocated. A block's size comes from the final snapshot when it is still there, else from
// the rounding and split rules (the space up to the next block, when the allocator would not
// have split it off).
InitialState reconstruct_initial_state(const Trace& trace, const AllocConf& conf);

}  // namespace allocsim
