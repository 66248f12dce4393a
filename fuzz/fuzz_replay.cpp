// Fuzzes the whole replay: a snapshot from the bytes, replayed on a small device (so that OOMs,
// retries and releases happen) with the invariants checked after every event. Differential as
// well: the replay of the trace prepared for many replays (PreparedTrace, as plan runs it), for
// this device or another, must report the same, or fail the same way.
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/replay_outcome.hpp"
#include "sim/replay/prepared_trace.hpp"
#include "sim/replay/replay.hpp"
#include "sim/report/replay_report.hpp"
#include "sim/trace/input_error.hpp"
#include "sim/trace/snapshot_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  allocsim::ReplayOptions options;
  options.capacity = (uint64_t{64} << 20) * (1 + data[0] % 64);
  options.context_bytes = 0;
  options.check_invariants = true;
  options.on_oom = data[0] & 0x80 ? allocsim::OnOom::kContinue : allocsim::OnOom::kStop;
  std::vector<allocsim::Trace> devices;
  try {
    devices = allocsim::read_snapshot_devices(
        std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), "fuzz");
  } catch (const allocsim::InputError&) {
    return 0;
  }
  using allocsim::fuzzing::replay_outcome;
  for (const allocsim::Trace& trace : devices) {  // each device on its own, as the CLI does
    const std::string ordinary = replay_outcome(
        [&] { return allocsim::replay_report_json_text(trace, allocsim::replay(trace, options)); });
    const allocsim::PreparedTrace prepared(trace, options.capacity << (data[0] & 0x40 ? 1 : 0));
    const std::string again = replay_outcome([&] {
      return allocsim::replay_report_json_text(trace, allocsim::replay(prepared, options));
    });
    if (again != ordinary) __builtin_trap();
  }
  return 0;
}
