// The identifiers every stage shares: streams and blocks.
#pragma once

#include <cstdint>

namespace allocsim {

using StreamId = uint64_t;  // the raw cudaStream_t value; the legacy default stream is 0
using BlockId = uint32_t;   // a block of one CachingAllocator

// No block: what a malloc that failed returns (see core/detail/block.hpp for its other role).
inline constexpr BlockId kNoBlock = 0;

}  // namespace allocsim
