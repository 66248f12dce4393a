// What a replay on real memory does with each block's bytes (replay --backend cuda writes a
// pattern into every allocated block and checks it when the block is freed).
#pragma once

#include <cstdint>

namespace allocsim {

class BlockObserver {
 public:
  virtual ~BlockObserver() = default;
  // `event_index` is the trace event that allocated the block, in both calls.
  virtual void allocated(uint64_t address, uint64_t size, uint64_t event_index) = 0;
  virtual void freeing(uint64_t address, uint64_t size, uint64_t event_index) = 0;
};

}  // namespace allocsim
