// The identifiers every stage shares: streams and blocks.
#pragma once

#include <cstdint>

namespace allocsim {

using StreamId = uint64_t;  // the raw cudaStream_t value; the legacy default stream is 0
using BlockId = uint32_t;   // a block of one CachingAllocator

// A pool of blocks as PyTorch names it (MempoolId_t): (0, 0) is the ordinary pools; any other is a
// private pool of CUDA graphs (torch.cuda.graph, graph_pool_handle) or of a torch.cuda.MemPool.
struct MempoolId {
  uint64_t first = 0;
  uint64_t second = 0;
  bool ordinary() const { return first == 0 && second == 0; }
  friend bool operator==(const MempoolId&, const MempoolId&) = default;
};

// No block: what a malloc that failed returns (see core/detail/block.hpp for its other role).
inline constexpr BlockId kNoBlock = 0;

}  // namespace allocsim
