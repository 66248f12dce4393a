#include "sim/trace_file.hpp"

#include "sim/file_bytes.hpp"
#include "sim/rmm_csv_reader.hpp"
#include "sim/snapshot_reader.hpp"

namespace allocsim {

Trace read_trace_file(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  if (looks_like_rmm_csv(bytes)) return read_rmm_csv_bytes(bytes, path);
  return read_snapshot_bytes(bytes, path);
}

}  // namespace allocsim
