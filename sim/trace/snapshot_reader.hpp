// Reads a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot, plain or gzip) into a Trace.
#pragma once

#include <string>
#include <string_view>

#include "sim/trace/trace.hpp"

namespace allocsim {

class EventFeed;

// Throws InputError naming the file and the byte offset or trace entry that is wrong.
Trace read_snapshot_file(const std::string& path);
// With a feed, the events are published to it as they are decoded; it is finished once they are
// known to be the trace's, and abandoned otherwise.
Trace read_snapshot_bytes(std::string_view pickle_bytes, const std::string& source,
                          EventFeed* feed = nullptr);

}  // namespace allocsim
