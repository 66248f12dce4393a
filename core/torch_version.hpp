// The PyTorch release whose allocator the core behaves as, and what changed between releases.
//
// 2.11 is the release every recorded workload was checked against on a GPU. The later releases'
// changes come from their sources (headers and compiled allocator of the 2.13 and 2.14 wheels,
// the pull requests named in docs/snapshots.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace allocsim {

struct TorchVersion {
  int major = 2;
  int minor = 11;

  // "2.13", "2.13.0", "2.13.0+cu130", "2.14.0a0+git1234": the release it names; nullopt if the
  // text names none.
  static std::optional<TorchVersion> parse(std::string_view text);
  std::string to_string() const;  // "2.13"
  friend constexpr bool operator==(TorchVersion a, TorchVersion b) { return a.rank() == b.rank(); }
  friend constexpr bool operator<(TorchVersion a, TorchVersion b) { return a.rank() < b.rank(); }
  friend constexpr bool operator>(TorchVersion a, TorchVersion b) { return b < a; }
  friend constexpr bool operator>=(TorchVersion a, TorchVersion b) { return !(a < b); }

  // PYTORCH_CUDA_ALLOC_CONF's throw_on_cudamalloc_oom and memory_stats' num_oom_rejections.
  bool has_oom_rejections() const { return *this >= TorchVersion{2, 12}; }
  // set_per_process_memory_fraction: the byte limit is rounded (it was truncated).
  bool rounds_fraction_limit() const { return *this >= TorchVersion{2, 13}; }
  // memory_stats' reserved_bytes_by_private_pools.
  bool has_private_pool_reserved_bytes() const { return *this >= TorchVersion{2, 13}; }

 private:
  constexpr int64_t rank() const { return int64_t{major} * 1000000 + minor; }
};

inline constexpr TorchVersion kDefaultTorchVersion{2, 11};
// The releases allocsim knows the policy of.
inline constexpr TorchVersion kOldestTorchVersion{2, 11};
inline constexpr TorchVersion kNewestTorchVersion{2, 14};

}  // namespace allocsim
