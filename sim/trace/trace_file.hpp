// Reads any trace file allocsim understands, telling the format from its bytes: a PyTorch
// snapshot pickle, an RMM logging_resource_adaptor CSV, or allocsim's compact trace (each plain
// or gzip).
#pragma once

#include <string>
#include <string_view>

#include "sim/trace/trace.hpp"

namespace allocsim {

class EventFeed;

// With a feed, a snapshot's events are published to it as they are decoded (see StreamedReplay).
Trace read_trace_file(const std::string& path, EventFeed* feed = nullptr);
// The same for bytes already read (and inflated); `source` names them in messages.
Trace read_trace_bytes(std::string_view bytes, const std::string& source,
                       EventFeed* feed = nullptr);

}  // namespace allocsim
