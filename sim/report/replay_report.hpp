// What a replay tells its reader: the JSON report (design.md's contract) and the human report.
#pragma once

#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/replay/replay.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

nlohmann::json replay_report_json(const Trace& trace, const ReplayResult& result);
// The JSON report as text; bytes of a snapshot's strings that are not UTF-8 become U+FFFD.
std::string replay_report_json_text(const Trace& trace, const ReplayResult& result);
std::string replay_report_text(const Trace& trace, const ReplayResult& result);

// The reports of a file's devices. One device: its report as above. Several: the JSON holds
// `devices`, one report each with its `device`, and the totals over them at the top (`trace`,
// `events_total`, `events_replayed`, `ooms`, `recorded_ooms`, `oom_devices`, `warnings`); the text
// has a section per device.
nlohmann::json replay_report_json(std::span<const DeviceReplay> devices);
std::string replay_report_json_text(std::span<const DeviceReplay> devices);
std::string replay_report_text(std::span<const DeviceReplay> devices);

}  // namespace allocsim
