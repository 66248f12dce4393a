// What a replay tells its reader: the JSON report (design.md's contract) and the human report.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/replay/replay.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

nlohmann::json replay_report_json(const Trace& trace, const ReplayResult& result);
// The JSON report as text; bytes of a snapshot's strings that are not UTF-8 become U+FFFD.
std::string replay_report_json_text(const Trace& trace, const ReplayResult& result);
std::string replay_report_text(const Trace& trace, const ReplayResult& result);

}  // namespace allocsim
