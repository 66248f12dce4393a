#include "sim/trace/trace_file.hpp"

#include "sim/trace/compact_trace.hpp"
#include "sim/trace/file_bytes.hpp"
#include "sim/trace/rmm_csv_reader.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim {

std::vector<Trace> read_trace_bytes_devices(std::string_view bytes, const std::string& source,
                                            EventFeed* feed) {
  std::vector<Trace> devices;
  if (looks_like_rmm_csv(bytes)) {
    devices.push_back(read_rmm_csv_bytes(bytes, source));
  } else if (looks_like_compact_trace(bytes)) {
    devices.push_back(read_compact_trace(bytes, source));
  } else {
    devices = read_snapshot_devices(bytes, source, feed);
  }
  return devices;
}

Trace read_trace_bytes(std::string_view bytes, const std::string& source, EventFeed* feed) {
  std::vector<Trace> devices = read_trace_bytes_devices(bytes, source, feed);
  return std::move(devices.front());
}

std::vector<Trace> read_trace_file_devices(const std::string& path, EventFeed* feed) {
  return read_trace_bytes_devices(read_file_bytes(path), path, feed);
}

Trace read_trace_file(const std::string& path, EventFeed* feed) {
  return read_trace_bytes(read_file_bytes(path), path, feed);
}

}  // namespace allocsim
