// allocsim's own compact trace format: the events a replay needs, 5-10 bytes each.
//
//   "ATRACE1\n"                          magic
//   varint n, n bytes                    PYTORCH_CUDA_ALLOC_CONF the trace was recorded under
//   varint event count
//   per event: 1 byte action (TraceAction), then varints: zigzag(addr - previous addr),
//              size, stream, zigzag(time_us - previous time_us), and for oom events device_free.
// Varints are LEB128. Stack frames and the final segments are not kept: convert traces that
// hold their whole history; keep the snapshot for frames.
#pragma once

#include <string>
#include <string_view>

#include "sim/trace/trace.hpp"

namespace allocsim {

bool looks_like_compact_trace(std::string_view bytes);
[[nodiscard]] std::string write_compact_trace(const Trace& trace);
// Throws InputError naming the file and the byte offset.
[[nodiscard]] Trace read_compact_trace(std::string_view bytes, const std::string& source);

}  // namespace allocsim
