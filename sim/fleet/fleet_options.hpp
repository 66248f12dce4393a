// What every job of a fleet is replayed and planned under.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/torch_version.hpp"

namespace allocsim {

struct FleetOptions {
  uint64_t card_bytes = 0;               // 0: kDefaultCapacityBytes
  uint64_t context_bytes = 0;            // 0: kDefaultContextBytes
  std::vector<std::string> alloc_confs;  // planned beside the recorded one; empty: a useful set
  // The PyTorch release whose allocator every job's replays follow; none: each job's own
  // (Trace::torch_version, else 2.11).
  std::optional<TorchVersion> torch_version;
  std::string cache_dir;  // where each job's result is kept by content hash; empty: none
};

}  // namespace allocsim
