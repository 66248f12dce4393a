// Which of a trace's requests CUDA graphs' private pools served.
//
// During a capture (torch.cuda.graph, torch.compile's cudagraph trees) PyTorch serves the requests
// of the capturing stream from the capture's private pool, but its 2.11 trace entries do not say
// which pool: only the snapshot's final `segments` carry a `segment_pool_id`. A block lies in the
// segment it was carved from, so each request's pool is that of the recorded segment its address
// fell in, found by walking the trace backwards from the final segments. Segments gone before the
// end have no recorded pool: theirs is that of the requests on the same stream around their first
// one (a capture is one unbroken stretch of a stream's requests). Where those disagree, or only
// private-pool requests follow or precede it (the stream may have served ordinary requests before
// a capture began or after it ended), the choice is a guess, listed in trace.pool_guesses for a
// replay to settle (sim/replay/pool_guess_settling.hpp). A pool's segments freed after its last
// request mark when its graphs were gone and the cache emptied.
// A pool whose graphs were dropped, and the cache emptied, before the end is named by no final
// segment: a segment gone before the end that a release of the whole cache kept though none of its
// blocks was allocated was such a vanished pool's (empty_cache() gives back every free segment of
// the ordinary pools), and so was one whose stream's requests on both sides were; those are taken
// into vanished pools (one for the segments a capture filled, as the stream's requests show it),
// and every other segment gone before the end has the vanished pool as its other guess. In a
// history that starts mid-run, the segments there at its first event are listed with their pools
// (trace.initial_pools) for the replay to restore them into; one with no request of known pool on
// its stream (the window began during or after its capture) takes the pool of its stream's final
// segments, a guess too.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

#include "sim/trace/trace.hpp"

namespace allocsim {

struct PrivatePoolInference {
  uint64_t allocs = 0;
  uint64_t served = 0;    // allocs inferred to have been served from private pools
  uint64_t vanished = 0;  // segments taken into pools no final segment names
};

// Fills trace.private_pools, request_pools and pool_guesses, the guesses taken as `overrides`
// say (PoolGuess::group, pool) where they name them. Leaves a trace whose final segments all belong
// to the ordinary pools as it is, unless it shows a CUDA graph registered (the default
// generator's seed and offset allocated on a side stream) and a release of the whole cache that
// kept a free segment.
PrivatePoolInference infer_private_pools(
    Trace& trace, std::span<const std::pair<uint32_t, uint16_t>> overrides = {});

// The warning line for an inference that found private pools.
std::string private_pool_warning(const Trace& trace, const PrivatePoolInference& inference);

}  // namespace allocsim
