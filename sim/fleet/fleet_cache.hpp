// Where a fleet keeps each file's result, by a key of its content and the options, so that an
// unchanged file is not analysed again: one JSON file per key, written whole or not at all
// whatever else writes beside it.
#pragma once

#include <optional>
#include <string>

#include "sim/fleet/fleet_options.hpp"
#include "sim/fleet/fleet_row.hpp"

namespace allocsim {

// The key a job's result is kept under: the file's path and content, the limit of an advisor's
// JSON beside it (`advisor_limit`), the options and allocsim's version.
std::string fleet_job_key(const std::string& path, const std::string& content,
                          std::optional<uint64_t> advisor_limit, const FleetOptions& options);

class FleetCache {
 public:
  explicit FleetCache(std::string dir) : dir_(std::move(dir)) {}  // empty: keeps nothing

  // The devices and warnings (or error) kept under `key`; none where nothing readable is kept.
  [[nodiscard]] std::optional<FleetJobResult> load(const std::string& key) const;
  void store(const std::string& key, const FleetJobResult& result) const;

 private:
  std::string dir_;
};

}  // namespace allocsim
