// Fuzzes the whole replay: a snapshot from the bytes, replayed on a small device (so that OOMs,
// retries and releases happen) with the invariants checked after every event.
#include <string_view>

#include "core/alloc_conf.hpp"
#include "sim/input_error.hpp"
#include "sim/replay.hpp"
#include "sim/replay_report.hpp"
#include "sim/snapshot_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  allocsim::ReplayOptions options;
  options.capacity = (uint64_t{64} << 20) * (1 + data[0] % 64);
  options.context_bytes = 0;
  options.check_invariants = true;
  options.on_oom = data[0] & 0x80 ? allocsim::OnOom::kContinue : allocsim::OnOom::kStop;
  try {
    const allocsim::Trace trace = allocsim::read_snapshot_bytes(
        std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), "fuzz");
    const auto result = allocsim::replay(trace, options);
    (void)allocsim::replay_report_json_text(trace, result);
  } catch (const allocsim::InputError&) {
  } catch (const allocsim::AllocConfError&) {
  }
  return 0;
}
