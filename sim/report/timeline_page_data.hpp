// What a timeline page reads, in two parts. The summary: a header (each trace's streams and
// allocation sites, each run's limit, OOM and the segment maps at its moments) and each run's
// multi-resolution summary (timeline_series.hpp), enough to draw any view down to buckets of
// kTimelineLevelBase events. The events: every event of each trace (action, size, stream, site)
// and each run's allocated / active / reserved after it, which the page reads after its first
// picture, for views of single events. Each part is a JSON header and columns of LEB128 numbers
// (zig-zag deltas for the series), deflated (zlib's format, which the browser's
// DecompressionStream("deflate") reads) and base64-encoded for a <script> element.
//
// A part before deflating: the header's length as 4 bytes little-endian, the header (JSON), then
// the columns the header's "columns" list names with their offsets and lengths in bytes.
#pragma once

#include <string>
#include <vector>

#include "sim/report/timeline_run.hpp"

namespace allocsim {

// The finest summary level's events per bucket, and the factor from one level to the next.
inline constexpr uint64_t kTimelineLevelBase = 64, kTimelineLevelFanout = 8;

struct TimelinePageData {
  std::string summary, events;
};

// The parts before deflating (for tests and decoders), and as the page embeds them.
TimelinePageData timeline_page_bytes(const std::vector<TimelineRun>& runs);
TimelinePageData timeline_page_data(const std::vector<TimelineRun>& runs);

// Helpers the encoding uses, exposed for tests.
void append_leb128(std::string& out, uint64_t value);
uint64_t zigzag(int64_t value);
std::string deflate_bytes(const std::string& bytes);
std::string base64(const std::string& bytes);

}  // namespace allocsim
