// What a timeline page reads: every event of each trace (action, size, stream, allocation site),
// each run's allocated / active / reserved after every event with their multi-resolution
// summary (timeline_series.hpp), and the segment maps at the runs' moments. A JSON header and
// columns of LEB128 numbers (zig-zag deltas for the series), deflated (zlib's format, which the
// browser's DecompressionStream("deflate") reads) and base64-encoded for a <script> element.
//
// Layout before deflating: the header's length as 4 bytes little-endian, the header (JSON), then
// the columns the header's "columns" list names with their offsets and lengths in bytes.
#pragma once

#include <string>
#include <vector>

#include "sim/report/timeline_run.hpp"

namespace allocsim {

// The finest summary level's events per bucket, and the factor from one level to the next.
inline constexpr uint64_t kTimelineLevelBase = 64, kTimelineLevelFanout = 8;

// The bytes before deflating (for tests and decoders) and as the page embeds them.
std::string timeline_page_bytes(const std::vector<TimelineRun>& runs);
std::string timeline_page_data(const std::vector<TimelineRun>& runs);

// Helpers the encoding uses, exposed for tests.
void append_leb128(std::string& out, uint64_t value);
uint64_t zigzag(int64_t value);
std::string deflate_bytes(const std::string& bytes);
std::string base64(const std::string& bytes);

}  // namespace allocsim
