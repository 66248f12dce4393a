// Reads any trace file allocsim understands, telling the format from its bytes: a PyTorch
// snapshot pickle, an RMM logging_resource_adaptor CSV, or allocsim's compact trace (each plain
// or gzip).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sim/trace/trace.hpp"

namespace allocsim {

class EventFeed;

// Every device the file recorded, in device order (one for any file but a snapshot of a process
// that used several GPUs). With a feed, a snapshot's events are published to it as they are
// decoded (see StreamedReplay).
[[nodiscard]] std::vector<Trace> read_trace_file_devices(const std::string& path,
                                                         EventFeed* feed = nullptr);
// The first device's.
[[nodiscard]] Trace read_trace_file(const std::string& path, EventFeed* feed = nullptr);
// The same for bytes already read (and inflated); `source` names them in messages.
std::vector<Trace> read_trace_bytes_devices(std::string_view bytes, const std::string& source,
                                            EventFeed* feed = nullptr);
Trace read_trace_bytes(std::string_view bytes, const std::string& source,
                       EventFeed* feed = nullptr);

}  // namespace allocsim
