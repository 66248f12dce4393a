// Writes a simulated run as a PyTorch memory snapshot (the pickle torch.cuda.memory._dump_snapshot
// writes), so that PyTorch's own viewers open it: pytorch.org/memory_viz, torch.cuda._memory_viz.
#pragma once

#include <span>
#include <string>

#include "sim/replay/replay.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

// `result` must come from a replay with record_trace set; `trace` is the replayed trace (for
// stack frames and annotations).
[[nodiscard]] std::string snapshot_pickle(const Trace& trace, const ReplayResult& result);
// Every device's, in one snapshot (segments with their `device`, a trace list per device).
[[nodiscard]] std::string snapshot_pickle(std::span<const DeviceReplay> devices);
// A request stream (a predicted or traced trace, with no segments of its own) as a snapshot, for
// PyTorch's viewers and for anything that reads snapshots: replayed with its settings on a
// simulated device large enough that none fails (every request in a segment of its own would
// fit), which gives the segments and addresses a snapshot has.
[[nodiscard]] std::string requests_snapshot_pickle(const Trace& requests);

}  // namespace allocsim
