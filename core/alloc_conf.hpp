// PYTORCH_CUDA_ALLOC_CONF: the settings that steer the caching allocator, and their parser.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/size_rounding.hpp"
#include "core/torch_version.hpp"

namespace allocsim {

inline constexpr uint64_t kNoMaxSplitSize = std::numeric_limits<uint64_t>::max();

struct AllocConf {
  uint64_t max_split_size = kNoMaxSplitSize;  // bytes; oversize blocks are never split
  // The segment of a large request under kMinLargeAlloc, and the page of a large-pool expandable
  // segment (large_segment_size_mb).
  uint64_t large_segment_size = kLargeBuffer;
  uint64_t max_non_split_rounding = kLargeBuffer;  // slack allowed when reusing oversize blocks
  double garbage_collection_threshold = 0.0;       // 0 = off; only active with a memory fraction
  RoundupDivisions roundup_power2_divisions{};     // all zero = round to 512 bytes only
  bool expandable_segments = false;
  bool release_lock_on_cudamalloc = false;
  bool use_malloc_async = false;  // backend:cudaMallocAsync (not simulated; refused by replay)
  std::optional<double> per_process_memory_fraction;
  // PyTorch 2.12 on: a request past per_process_memory_fraction of the card (1.0 without one) is
  // refused before any device call or cache release, and counted in num_oom_rejections.
  bool throw_on_cudamalloc_oom = false;
  std::string source;  // the string as given, kept for reports

  // A canonical PYTORCH_CUDA_ALLOC_CONF string that parses back to the same settings.
  std::string to_string() const;
  bool same_policy(const AllocConf& other) const;
  bool operator==(const AllocConf&) const = default;
};

// A settings string refused: by PyTorch's parser (with the Python exception it raises and its
// exact message, or the process aborted by one of its internal assertions), or by allocsim.
class AllocConfError : public std::invalid_argument {
 public:
  enum class Kind {
    kValueError,    // PyTorch raises ValueError
    kIndexError,    // ... IndexError (std::out_of_range: a number beyond its type)
    kRuntimeError,  // ... RuntimeError (an internal assertion, raised)
    kAbort,         // an internal assertion PyTorch cannot raise: the process aborts
    kAllocsim,      // PyTorch accepts it; allocsim cannot replay it
  };
  AllocConfError(Kind kind, const std::string& pytorch_message);
  explicit AllocConfError(const std::string& allocsim_message)
      : AllocConfError(Kind::kAllocsim, allocsim_message) {}
  Kind kind() const { return kind_; }
  // PyTorch's words (for kAllocsim, allocsim's); what() adds an explanation where PyTorch's
  // are only the name of the C++ function that failed.
  const std::string& pytorch_message() const { return message_; }

 private:
  Kind kind_;
  std::string message_;
};

// Parses a settings string the way PyTorch `version` does: accepts what it accepts, and refuses
// what it refuses, with its message (throws AllocConfError).
[[nodiscard]] AllocConf parse_alloc_conf(std::string_view text,
                                         TorchVersion version = kDefaultTorchVersion);

// The settings after a run that had `current` sets `text`
// (torch._C._accelerator_setAllocatorSettings, torch.cuda.memory._set_allocator_settings): PyTorch
// parses the string over the settings in force, with max_split_size_mb, roundup_power2_divisions
// and garbage_collection_threshold back at their defaults first (throws AllocConfError where
// PyTorch refuses it). parse_alloc_conf is this over the defaults.
[[nodiscard]] AllocConf change_alloc_conf(const AllocConf& current, std::string_view text,
                                          TorchVersion version = kDefaultTorchVersion);

// Throws the AllocConfError PyTorch `version`'s parser gives for a key of `conf` it does not know
// (settings parsed for a later release).
void check_known_to(const AllocConf& conf, TorchVersion version);

}  // namespace allocsim
