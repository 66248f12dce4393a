// Reads any trace file allocsim understands, telling the format from its bytes: a PyTorch
// snapshot pickle (plain or gzip) or an RMM logging_resource_adaptor CSV (plain or gzip).
#pragma once

#include <string>

#include "sim/trace.hpp"

namespace allocsim {

Trace read_trace_file(const std::string& path);

}  // namespace allocsim
