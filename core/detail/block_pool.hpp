// A pool of cached free blocks, ordered for best fit (PyTorch's BlockPool).
#pragma once

#include <set>
#include <tuple>

#include "core/detail/block.hpp"
#include "core/detail/size_key_set.hpp"

namespace allocsim {

// Unmapped address ranges of expandable segments ordered by (stream, address): one or two per
// expandable segment, changed only when pages are mapped or unmapped.
struct AddressKey {
  StreamId stream;
  uint64_t ptr;
  BlockId id;
  // PyTorch's order (stream, then address), and the block to break a tie: on a simulated device a
  // reservation placed at its recorded base can lie inside another's modelled range, where two
  // unmapped blocks may start at one address.
  bool operator<(const AddressKey& o) const {
    return std::tie(stream, ptr, id) < std::tie(o.stream, o.ptr, o.id);
  }
};

struct BlockPool {
  explicit BlockPool(bool is_small, uint16_t owner_index = 0)
      : small(is_small), owner(owner_index) {}

  SizeKeySet blocks;  // free mapped blocks: lower_bound is best fit on a stream
  std::set<AddressKey> unmapped;
  bool small;
  uint16_t owner;  // as Block::owner
  int64_t get_free_blocks_call_count = 0;
};

}  // namespace allocsim
