#include "sim/trace/trace_file.hpp"

#include "sim/trace/compact_trace.hpp"
#include "sim/trace/file_bytes.hpp"
#include "sim/trace/rmm_csv_reader.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim {

Trace read_trace_bytes(std::string_view bytes, const std::string& source, EventFeed* feed) {
  if (looks_like_rmm_csv(bytes)) return read_rmm_csv_bytes(bytes, source);
  if (looks_like_compact_trace(bytes)) return read_compact_trace(bytes, source);
  return read_snapshot_bytes(bytes, source, feed);
}

Trace read_trace_file(const std::string& path, EventFeed* feed) {
  return read_trace_bytes(read_file_bytes(path), path, feed);
}

}  // namespace allocsim
