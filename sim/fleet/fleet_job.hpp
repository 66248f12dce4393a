// One job of a fleet: a snapshot file replayed at its recorded settings and planned for each
// allocator setting, reduced to its FleetDeviceRows.
#pragma once

#include <string>

#include "sim/fleet/fleet_options.hpp"
#include "sim/fleet/fleet_row.hpp"

namespace allocsim {

// The result of one file: its rows, or the one-line error of a file allocsim cannot read. Never
// throws for bad input. Kept in (and taken from) the cache of options.cache_dir. A snapshot
// beside the OOM advisor's JSON (oom-*.pickle and oom-*.json) is planned under the limit the
// advisor recorded instead of the card.
FleetJobResult analyze_fleet_job(const std::string& path, const FleetOptions& options);

}  // namespace allocsim
