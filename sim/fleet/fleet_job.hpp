// One job of a fleet: a snapshot file replayed at its recorded settings and planned for each
// allocator setting, reduced to the figures a fleet report weighs (OOM or not, the memory it
// needs, the best setting and its margin, fragmentation, leaks, the source lines at its OOM).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/alloc_conf.hpp"
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

// The result of one file, as JSON: `file`, `content_hash`, and `devices` (one row each), or
// `error` (the one-line message of a file allocsim cannot read). Never throws for bad input.
// A snapshot beside the OOM advisor's JSON (oom-*.pickle and oom-*.json) is planned under the
// limit the advisor recorded instead of the card.
nlohmann::json analyze_fleet_job(const std::string& path, const FleetOptions& options);

// The key the cache keeps a job's result under: the file's path and content, the limit of an
// advisor's JSON beside it, the options and allocsim's version.
std::string fleet_job_key(const std::string& path, const std::string& content,
                          const FleetOptions& options);

}  // namespace allocsim
