// Fuzzes the pickle decoder and snapshot reader: any bytes give a Trace or an InputError.
#include <string_view>

#include "sim/input_error.hpp"
#include "sim/snapshot_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    allocsim::read_snapshot_bytes(std::string_view(reinterpret_cast<const char*>(data), size),
                                  "fuzz");
  } catch (const allocsim::InputError&) {
  }
  return 0;
}
