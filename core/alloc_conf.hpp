// PYTORCH_CUDA_ALLOC_CONF: the settings that steer the caching allocator, and their parser.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/size_rounding.hpp"

namespace allocsim {

inline constexpr uint64_t kNoMaxSplitSize = std::numeric_limits<uint64_t>::max();

struct AllocConf {
  uint64_t max_split_size = kNoMaxSplitSize;       // bytes; oversize blocks are never split
  uint64_t max_non_split_rounding = kLargeBuffer;  // slack allowed when reusing oversize blocks
  double garbage_collection_threshold = 0.0;       // 0 = off; only active with a memory fraction
  RoundupDivisions roundup_power2_divisions{};     // all zero = round to 512 bytes only
  bool expandable_segments = false;
  bool release_lock_on_cudamalloc = false;
  bool use_malloc_async = false;  // backend:cudaMallocAsync (not simulated; refused by replay)
  std::optional<double> per_process_memory_fraction;
  std::string source;  // the string as given, kept for reports

  // A canonical PYTORCH_CUDA_ALLOC_CONF string that parses back to the same settings.
  std::string to_string() const;
  bool same_policy(const AllocConf& other) const;
  bool operator==(const AllocConf&) const = default;
};

// Thrown with PyTorch's own wording when a settings string is refused.
class AllocConfError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Parses a settings string the way PyTorch 2.11 does: accepts what it accepts, refuses what it
// refuses (throws AllocConfError).
[[nodiscard]] AllocConf parse_alloc_conf(std::string_view text);

}  // namespace allocsim
