// Reads a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot, plain or gzip) into a Trace.
#pragma once

#include <string>
#include <string_view>

#include "sim/trace.hpp"

namespace allocsim {

// Throws InputError naming the file and the byte offset or trace entry that is wrong.
Trace read_snapshot_file(const std::string& path);
Trace read_snapshot_bytes(std::string_view pickle_bytes, const std::string& source);

}  // namespace allocsim
