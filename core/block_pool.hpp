// A pool of cached free blocks, ordered for best fit (PyTorch's BlockPool).
#pragma once

#include <tuple>

#include "core/block.hpp"
#include "core/sorted_keys.hpp"

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

struct BlockPool {
  explicit BlockPool(bool is_small) : small(is_small) {}

  SortedKeys<SizeKey> blocks;
  SortedKeys<AddressKey> unmapped;
  bool small;
  int64_t get_free_blocks_call_count = 0;
};

}  // namespace allocsim
