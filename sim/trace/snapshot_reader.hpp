// Reads a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot, plain or gzip) into a Trace.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/trace/trace.hpp"

namespace allocsim {

class EventFeed;

// Every device the snapshot recorded events or segments on, in device order, each a Trace with
// its own events and segments (the settings, frames and annotations are the process's, in each).
// A snapshot of one device gives one. Throws InputError naming the file and the byte offset or
// trace entry that is wrong. With a feed, the first device's events are published to it as they
// are decoded; it is finished once they are known to be that trace's, and abandoned otherwise.
[[nodiscard]] std::vector<Trace> read_snapshot_devices(std::string_view pickle_bytes,
                                                       const std::string& source,
                                                       EventFeed* feed = nullptr);

// The first of read_snapshot_devices.
[[nodiscard]] Trace read_snapshot_file(const std::string& path);
[[nodiscard]] Trace read_snapshot_bytes(std::string_view pickle_bytes, const std::string& source,
                                        EventFeed* feed = nullptr);

}  // namespace allocsim
