// Fuzzes the RMM log reader and the replay of what it reads: a Trace or an InputError, and a
// replay that keeps the allocator's invariants.
#include <string_view>

#include "sim/replay/replay.hpp"
#include "sim/trace/input_error.hpp"
#include "sim/trace/rmm_csv_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const allocsim::Trace trace = allocsim::read_rmm_csv_bytes(
        std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    allocsim::ReplayOptions options;
    options.capacity = uint64_t{1} << 30;
    options.context_bytes = 0;
    options.check_invariants = true;
    options.on_oom = allocsim::OnOom::kContinue;
    (void)allocsim::replay(trace, options);
  } catch (const allocsim::InputError&) {
  }
  return 0;
}
