// A fleet report: the jobs' results (analyze_fleet_job's, or a cluster's workers') put together —
// per setting how many of the jobs that ran out of memory it would have fitted, how many jobs fit
// the card, the memory reserved but unallocated across the fleet, the source lines holding the
// most memory at OOMs across jobs, the jobs that leak, and the files that could not be read — as
// JSON and as one self-contained HTML page with a sortable table and histograms.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/fleet/fleet_pair.hpp"
#include "sim/fleet/fleet_row.hpp"

namespace allocsim {

// The snapshot files under `paths` (files as given; directories searched recursively for
// *.pickle, *.pickle.gz and *.atrace), sorted, each once.
std::vector<std::string> find_fleet_files(const std::vector<std::string>& paths);

// `pairs`, where any, are the report's `pairs`: one job's two runs each, the second against the
// first.
nlohmann::json fleet_report_json(const std::vector<FleetJobResult>& jobs, uint64_t card_bytes,
                                 const std::vector<FleetPairResult>& pairs = {});
std::string fleet_report_html(const nlohmann::json& report);
std::string fleet_report_text(const nlohmann::json& report);

}  // namespace allocsim
