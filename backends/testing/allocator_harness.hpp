// Test support: drives a CachingAllocator over a SimulatedDevice with an operation stream and
// checks, after every step, the properties any correct caching allocator keeps. Shared by the
// property tests (proptests/) and the fuzzers (fuzz/).
#pragma once

#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/fault_injecting_device.hpp"
#include "backends/simulated_device.hpp"
#include "core/caching_allocator.hpp"

namespace allocsim::testing {

struct Op {
  enum Kind : uint8_t {
    kMalloc,
    kFree,
    kFreeDeferred,
    kCompleteDeferred,
    kEmptyCache,
    kSetFraction,
    kReleasePool
  };
  Kind kind = kMalloc;
  uint64_t size = 0;    // kMalloc: bytes
  StreamId stream = 0;  // kMalloc
  // kMalloc: 0, or k to serve it from the private pool (k, 0) as a capture on its stream would;
  // kReleasePool: the pool (k, 0) that loses one user (a graph destroyed).
  uint8_t pool = 0;
  uint32_t which = 0;   // kFree*, kCompleteDeferred: picks a live (or pending) block, modulo count
  double fraction = 1;  // kSetFraction
};
std::string to_string(const Op& op);

struct HarnessConfig {
  AllocConf conf;
  uint64_t capacity = uint64_t{1} << 30;
  uint64_t context_bytes = 0;
  std::vector<uint64_t> failing_mallocs;  // 1-based device call numbers made to fail
  std::vector<uint64_t> failing_maps;
};
std::string to_string(const HarnessConfig& config);
// How RapidCheck prints them in a counterexample.
inline void showValue(const HarnessConfig& config, std::ostream& os) {
  os << to_string(config);
}
inline void showValue(const Op& op, std::ostream& os) {
  os << to_string(op);
}

// A broken property: the message names it and the operation that broke it.
class PropertyViolation : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AllocatorHarness {
 public:
  explicit AllocatorHarness(const HarnessConfig& config);

  void apply(const Op& op);             // throws PropertyViolation
  static constexpr uint8_t kPools = 2;  // the private pools (1, 0) and (2, 0)
  // Frees everything, completes deferred frees, releases every private pool's users, empties the
  // cache: nothing may stay reserved.
  void finish();

  const CachingAllocator& allocator() const { return allocator_; }
  const SimulatedDevice& device() const { return device_; }
  size_t live_blocks() const { return live_.size(); }
  uint64_t ooms() const { return ooms_; }

 private:
  struct Live {
    BlockId block;
    uint64_t requested;
  };
  void check(const Op& op);
  // What a malloc's checks need to know of the moment before it.
  struct BeforeMalloc {
    uint64_t injected_failures;
    bool had_pending;      // deferred frees the malloc's retry may complete
    uint64_t device_free;  // bytes
    uint64_t reserved;     // bytes
  };
  void check_malloc(const Op& op, BlockId block, const BeforeMalloc& before);
  [[noreturn]] void fail(const Op& op, const std::string& what) const;
  void forget_completed_pending();

  HarnessConfig config_;
  SimulatedDevice device_;
  FaultInjectingDevice faults_;  // over device_: the allocator's device
  CachingAllocator allocator_;
  std::vector<Live> live_;
  std::vector<BlockId> pending_;
  uint64_t pool_users_[kPools + 1] = {};  // by Op::pool: the captures not yet released
  int64_t syncs_seen_ = 0;
  uint64_t ooms_ = 0;
  uint64_t step_ = 0;
};

}  // namespace allocsim::testing
