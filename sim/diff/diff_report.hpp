// A RunDiff as JSON and as text: the runs side by side, how their requests paired, where the
// difference lies at the peaks, where their reserved memory first parts, and the program and
// allocator parts of the difference.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/diff/run_diff.hpp"

namespace allocsim {

// Every group in which something differs (the others counted in `groups_alike`).
nlohmann::json diff_json(const RunDiff& diff);

// The `listed` groups with the most at stake, the rest counted.
std::string diff_text(const RunDiff& diff, size_t listed = 12);

// "+1.50 GiB", "-20.00 MiB", "0 bytes".
std::string format_signed_size(int64_t bytes);

}  // namespace allocsim
