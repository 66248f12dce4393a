// Fuzzes the trace readers (snapshot pickle, RMM CSV, compact trace, chosen from the bytes as
// `allocsim replay` chooses): any bytes give a Trace or an InputError.
#include <string_view>

#include "sim/trace/input_error.hpp"
#include "sim/trace/trace_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    allocsim::read_trace_bytes_devices(std::string_view(reinterpret_cast<const char*>(data), size),
                                       "fuzz");
  } catch (const allocsim::InputError&) {
  }
  return 0;
}
