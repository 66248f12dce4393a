// Differential fuzzing of the replay that runs alongside the decoding: for any snapshot bytes, the
// streamed replay (with its guess, its checks and its fallback) must report exactly what the
// ordinary replay after the decoding reports, errors included, and must let go of the decoder's
// events whenever the decoder abandons them (ASan).
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz/replay_outcome.hpp"
#include "sim/replay/replay.hpp"
#include "sim/replay/streamed_replay.hpp"
#include "sim/report/replay_report.hpp"
#include "sim/trace/input_error.hpp"
#include "sim/trace/snapshot_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  allocsim::ReplayOptions options;
  options.capacity = (uint64_t{64} << 20) * (1 + data[0] % 64);
  options.context_bytes = 0;
  options.on_oom = data[0] & 0x80 ? allocsim::OnOom::kContinue : allocsim::OnOom::kStop;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string ordinary = allocsim::fuzzing::replay_outcome([&] {
    const allocsim::Trace trace = allocsim::read_snapshot_bytes(bytes, "fuzz");
    return allocsim::replay_report_json_text(trace, allocsim::replay(trace, options));
  });
  const std::string streamed = allocsim::fuzzing::replay_outcome([&] {
    allocsim::StreamedReplay replay(options, "fuzz");
    const allocsim::Trace trace = allocsim::read_snapshot_bytes(bytes, "fuzz", &replay.feed());
    return allocsim::replay_report_json_text(trace, replay.finish(trace));
  });
  if (ordinary != streamed) std::abort();  // the streamed replay must never change an answer
  return 0;
}
