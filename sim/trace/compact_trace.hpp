// allocsim's own compact trace format: the events a replay needs, 5-10 bytes each.
//
//   "ATRACE1\n"                          magic
//   varint n, n bytes                    PYTORCH_CUDA_ALLOC_CONF the trace was recorded under
//   varint event count
//   per event: 1 byte action (TraceAction), then varints: zigzag(addr - previous addr),
//              size, stream, zigzag(time_us - previous time_us), and for oom events device_free.
//   optionally, after the events: varint flags (1: the addresses are no recorded run's, as in a
//              predicted trace), varint segment count, per segment: varints address, total_size,
//              stream, 1 byte (1: small pool), varint block count, per block: varints
//              address - segment address, size, requested, 1 byte (1: active, 2: allocated)
// Varints are LEB128. Stack frames are not kept, and the final segments only where asked for (a
// predicted trace's: the state its replay reconstructs its start from); convert traces that hold
// their whole history; keep the snapshot for frames.
#pragma once

#include <string>
#include <string_view>

#include "sim/trace/trace.hpp"

namespace allocsim {

bool looks_like_compact_trace(std::string_view bytes);
// `with_segments`: the trace's final segments too (none expandable, none in a private pool).
[[nodiscard]] std::string write_compact_trace(const Trace& trace, bool with_segments = false);
// Throws InputError naming the file and the byte offset.
[[nodiscard]] Trace read_compact_trace(std::string_view bytes, const std::string& source);

}  // namespace allocsim
