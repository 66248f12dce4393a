// What a fleet keeps of one file: per device history the figures a fleet report weighs (OOM or
// not, the memory it needs, the best setting and its margin, fragmentation, leaks, the source
// lines at its OOM), or the one-line error of a file allocsim cannot read; and their JSON form,
// which `fleet --job` prints, `fleet --results` reads back and the cache keeps.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace allocsim {

struct FleetSetting {
  std::string alloc_conf;
  uint64_t min_limit_bytes = 0;
  bool fits = false;
};

struct FleetSite {
  std::string site;  // describe_site()
  uint64_t bytes = 0;
};

// The release the replays followed, where it is not the default (as replay's report names it).
struct FleetTorchVersion {
  std::string version;
  std::string told_by;
};

struct FleetDeviceRow {
  int device = 0;
  uint64_t events = 0;
  std::string alloc_conf;     // the recorded setting
  bool oom = false;           // the recorded run ran out of memory
  uint64_t needed_bytes = 0;  // the recorded setting's min limit
  bool fits = false;
  int64_t margin_bytes = 0;
  std::string best_alloc_conf;
  int64_t best_margin_bytes = 0;
  std::optional<uint64_t> limit_bytes;  // the OOM advisor's limit, where it planned under one
  int64_t peak_reserved_bytes = 0;
  double fragmentation = 0;  // 1 - peak active / peak reserved
  uint64_t reserved_unallocated_at_peak_bytes = 0;
  bool leak = false;  // live memory grows at every step
  double growth_bytes_per_step = 0;
  std::vector<FleetSetting> settings;  // the recorded one first
  std::vector<FleetSite> sites_at_oom;
  std::optional<FleetTorchVersion> torch_version;
};

// One file's result: its rows (one per device history) and the warnings its reading gave, or
// `error`.
struct FleetJobResult {
  std::string file;
  std::string content_hash;  // empty where the file could not be opened
  std::vector<FleetDeviceRow> devices;
  std::vector<std::string> warnings;
  std::optional<std::string> error;
  std::optional<bool> cached;  // from the cache or not; none where the file could not be opened
};

nlohmann::json fleet_row_json(const FleetDeviceRow& row);
// The job as `fleet --job` prints it: `file`, `content_hash`, `devices` and `warnings` (or
// `error`), `cached`.
nlohmann::json fleet_job_json(const FleetJobResult& job);
// The part the cache keeps: `devices` and `warnings`, or `error`.
nlohmann::json fleet_outcome_json(const FleetJobResult& job);

// Reads what fleet_job_json wrote (or a worker's failure: `file` and `error`); throws
// std::invalid_argument naming the first key missing or of the wrong type.
FleetJobResult fleet_job_from_json(const nlohmann::json& json);

}  // namespace allocsim
