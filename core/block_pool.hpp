// A pool of cached free blocks, ordered for best fit (PyTorch's BlockPool).
#pragma once

#include <memory_resource>
#include <set>
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

struct BlockPool {
  BlockPool(bool is_small, std::pmr::memory_resource* nodes)
      : blocks(nodes), unmapped(nodes), small(is_small) {}

  std::pmr::set<SizeKey> blocks;
  std::pmr::set<AddressKey> unmapped;
  bool small;
  int64_t get_free_blocks_call_count = 0;
};

}  // namespace allocsim
