// A pair of a fleet: one job's two runs (yesterday's and today's, before and after a change), the
// second against the first as `allocsim diff` compares them, reduced to a row: the peaks, the
// program's and the allocator's parts of the difference, the lines that hold most of it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/fleet/fleet_options.hpp"

namespace allocsim {

struct FleetPairGroup {
  std::string label;  // a source line, or a step and position
  int64_t delta_at_peak = 0;
};

struct FleetPairRow {
  int device = 0;
  int64_t peak_reserved_a = 0, peak_reserved_b = 0;
  int64_t program = 0, allocator = 0;  // of peak reserved: they add up to b - a
  bool same_allocator = false;
  std::vector<FleetPairGroup> top_groups;  // the most at the allocated peaks first
};

struct FleetPairResult {
  std::string a, b;
  std::vector<FleetPairRow> devices;  // the devices both files recorded, by index
  std::optional<std::string> error;   // the one-line error of a file allocsim cannot read
};

// Never throws for bad input: the error is the result's.
FleetPairResult analyze_fleet_pair(const std::string& a, const std::string& b,
                                   const FleetOptions& options);

nlohmann::json fleet_pair_json(const FleetPairResult& pair);

}  // namespace allocsim
