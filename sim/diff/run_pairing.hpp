// Two runs of a job, their allocations paired one to one: the same request in both (of the same
// size or not), or a request only one run makes. The pairing is a shortest edit script (the one
// predict aligns recordings by) over the allocations: first on stream, source line and size; the
// runs of requests left between two pairs are then paired on stream and source line alone,
// whose sizes differ. Runs whose allocations differ in more places than one script can hold (a
// size parameter changed, and with it most sizes) are paired with sizes that grow, or shrink,
// from A to B, as predict pairs recordings at two sizes; then on stream and source line alone;
// failing that by their order on each stream.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/predict/request_alignment.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

struct AllocationPair {
  int64_t a = -1;  // the allocation's index among run A's requests; -1: only in B
  int64_t b = -1;  // and among B's; -1: only in A
};

enum class PairedBy : uint8_t {
  kSizeAndSite,     // stream, source line and size, then stream and source line between
  kGrowingSizes,    // stream and source line, B's size at least A's (a size parameter grew)
  kShrinkingSizes,  // or at most
  kSite,            // stream and source line, any size
  kStreamOrder,     // the n-th allocation on a stream to the n-th
};
// What a pairing went by, in words: "stream, source line and size", or without source lines
// (`sites` false: a run without frames) "stream and size".
std::string describe(PairedBy by, bool sites);

struct RunPairing {
  std::vector<AllocationPair> pairs;  // in the runs' order: B's own where they fall among A's
  PairedBy by = PairedBy::kSizeAndSite;
  bool sites = false;  // both runs carry stack frames: source lines took part
};

// The site of each of a trace's stacks (describe_site), for pairing and for grouping: empty
// where the trace has no frames.
std::vector<std::string> stack_sites(const Trace& trace);

// `sites_a` and `sites_b`: each run's stack_sites(); source lines take part where both have some.
RunPairing pair_allocations(const std::vector<RecordedRequest>& ra,
                            const std::vector<std::string>& sites_a,
                            const std::vector<RecordedRequest>& rb,
                            const std::vector<std::string>& sites_b);

}  // namespace allocsim
