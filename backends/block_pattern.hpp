// BlockPattern: catches blocks that overlap on a real GPU. Each allocated block is filled by a
// kernel with words derived from a tag (the trace event that allocated it); when the block is
// freed another kernel checks the words. Two live blocks that share bytes overwrite each other's
// words, so the first of them to be freed fails its check.
//
// Everything is queued on the legacy default stream and counted on the device; collect() waits
// for it. The kernels and their counters are loaded in the constructor, before the allocator
// takes memory, so that lazy module loading does not move the driver's addresses mid-run.
#pragma once

#include <cstdint>

namespace allocsim {

struct PatternResult {
  uint64_t fills = 0;
  uint64_t checks = 0;
  uint64_t bytes_written = 0;
  uint64_t bad_words = 0;               // words that did not hold their block's pattern
  uint64_t first_bad_tag = UINT64_MAX;  // the smallest tag of a block that failed its check
};

class BlockPattern {
 public:
  BlockPattern();  // throws CudaError
  void fill(uint64_t address, uint64_t size, uint64_t tag);
  void check(uint64_t address, uint64_t size, uint64_t tag);
  PatternResult collect();  // synchronises; throws CudaError if a kernel failed

 private:
  PatternResult counts_;
};

}  // namespace allocsim
