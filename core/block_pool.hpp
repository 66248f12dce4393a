// A pool of cached free blocks, ordered for best fit (PyTorch's BlockPool).
#pragma once

#include <boost/container/flat_set.hpp>
#include <memory_resource>
#include <tuple>

#include "core/block.hpp"

namespace allocsim {

// Free mapped blocks ordered by (stream, size, address): lower_bound is best fit on a stream.
struct SizeKey {
  StreamId stream;
  uint64_t size;
  uint64_t ptr;
  BlockId id;
  bool operator<(const SizeKey& o) const {
    return std::tie(stream, size, ptr) < std::tie(o.stream, o.size, o.ptr);
  }
};

// Unmapped address ranges of expandable segments ordered by (stream, address).
struct AddressKey {
  StreamId stream;
  uint64_t ptr;
  BlockId id;
  bool operator<(const AddressKey& o) const {
    return std::tie(stream, ptr) < std::tie(o.stream, o.ptr);
  }
};

// Sorted vectors, not trees: a pool holds tens to a few thousand free blocks, where binary search
// over contiguous keys and a memmove on insert beat a node allocation and pointer chasing.
struct BlockPool {
  explicit BlockPool(bool is_small) : small(is_small) {}

  boost::container::flat_set<SizeKey> blocks;
  boost::container::flat_set<AddressKey> unmapped;
  bool small;
  int64_t get_free_blocks_call_count = 0;
};

}  // namespace allocsim
