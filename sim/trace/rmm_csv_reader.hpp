// Reads RMM's logging_resource_adaptor CSV (Thread,Time,Action,Pointer,Size,Stream) into a Trace,
// in its recorded order: allocate -> alloc, deallocate -> a free that completes at once,
// allocate failure -> an OOM the real run had.
#pragma once

#include <string>
#include <string_view>

#include "sim/trace/trace.hpp"

namespace allocsim {

// Whether the bytes start like an RMM log (its header line).
bool looks_like_rmm_csv(std::string_view bytes);

// Throws InputError naming the file, the line and what was expected.
[[nodiscard]] Trace read_rmm_csv_bytes(std::string_view bytes, const std::string& source);

}  // namespace allocsim
