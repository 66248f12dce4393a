#include "sim/replay/prepared_trace.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "sim/report/replay_report.hpp"
#include "sim/report/snapshot_writer.hpp"
#include "sim/testing/shipped_workloads.hpp"
#include "sim/trace/trace_file.hpp"

namespace allocsim {
namespace {

Trace read_workload(const std::string& name) {
  return read_trace_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + name + ".pickle.gz");
}

// Everything a replay reports: the JSON report, the device operations, and with record_trace the
// simulated run as a snapshot.
std::string everything(const Trace& trace, const ReplayResult& result) {
  std::string out = replay_report_json_text(trace, result);
  for (const DeviceOp& op : result.device_ops) {
    out += std::string(to_string(op.kind)) + " " + std::to_string(op.address) + " " +
           std::to_string(op.size) + "\n";
  }
  if (!result.recording.trace.empty()) out += snapshot_pickle(trace, result);
  return out;
}

// The settings a prepared trace is replayed under in these tests: as recorded; a what-if that
// runs out of memory and records the run; a capacity other than the one it was prepared for; and
// a rounding that changes the blocks a bounded history starts with.
std::vector<ReplayOptions> test_options(uint64_t prepared_capacity) {
  ReplayOptions recorded;
  recorded.capacity = prepared_capacity;
  ReplayOptions what_if = recorded;
  what_if.memory_limit = uint64_t{3} << 30;
  what_if.alloc_conf = parse_alloc_conf("expandable_segments:True");
  what_if.on_oom = OnOom::kContinue;
  what_if.record_trace = true;
  ReplayOptions other_device;
  other_device.capacity = uint64_t{12} << 30;
  other_device.on_oom = OnOom::kContinue;
  ReplayOptions rounding = recorded;
  rounding.alloc_conf = parse_alloc_conf("roundup_power2_divisions:4");
  return {recorded, what_if, other_device, rounding};
}

class PreparedTraceTest : public testing::TestWithParam<std::string> {};

// Every shipped workload: a replay of the prepared trace reports exactly what replay() does.
TEST_P(PreparedTraceTest, SameResultAsReplayingTheTrace) {
  const Trace trace = read_workload(GetParam());
  const uint64_t capacity = uint64_t{80} << 30;
  const PreparedTrace prepared(trace, capacity);
  for (const ReplayOptions& options : test_options(capacity)) {
    SCOPED_TRACE(options.alloc_conf ? options.alloc_conf->to_string() : "recorded");
    EXPECT_EQ(everything(trace, replay(prepared, options)),
              everything(trace, replay(trace, options)));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Workloads, PreparedTraceTest, testing::ValuesIn(testing_workloads::shipped_workload_names()),
    testing_workloads::workload_test_name<testing::TestParamInfo<std::string>>);

// plan's threads replay one prepared trace at once, each with its own requests' cursor.
TEST(PreparedTrace, ReplaysFromSeveralThreadsAtOnce) {
  const Trace trace = read_workload("llama-varlen-bf16_default");
  const PreparedTrace prepared(trace, uint64_t{80} << 30);
  const std::string expected = everything(trace, replay(trace, ReplayOptions{}));
  std::vector<std::string> got(4);
  std::vector<std::thread> threads;
  for (std::string& out : got) {
    threads.emplace_back([&] { out = everything(trace, replay(prepared, ReplayOptions{})); });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& out : got) EXPECT_EQ(out, expected);
}

// A replay stopped at an OOM reads the rest of the trace, in which a block it still holds is freed
// and its slot taken by a later alloc: the live blocks it reports are still the ones it holds.
TEST(PreparedTrace, LiveBlocksAfterAStopAtAnOomAreTheBlocksTheReplayHolds) {
  constexpr uint64_t GiB = uint64_t{1} << 30;
  const uint64_t a = 0x7f0000000000;
  Trace trace;
  trace.events = {{.action = TraceAction::kAlloc, .addr = a, .size = GiB},
                  {.action = TraceAction::kAlloc, .addr = a + 2 * GiB, .size = 8 * GiB},
                  {.action = TraceAction::kFreeRequested, .addr = a, .size = GiB},
                  {.action = TraceAction::kFreeCompleted, .addr = a, .size = GiB},
                  {.action = TraceAction::kAlloc, .addr = a, .size = 4096}};
  ReplayOptions options;
  options.capacity = 4 * GiB;
  options.use_recorded_addresses = false;
  const PreparedTrace prepared(trace, options.capacity);
  for (const ReplayResult& result : {replay(trace, options), replay(prepared, options)}) {
    ASSERT_TRUE(result.outcome.stopped_at_oom);
    ASSERT_EQ(result.live_blocks.size(), 1u);
    EXPECT_EQ(result.live_blocks[0].event_index, 0u);
    EXPECT_EQ(result.live_blocks[0].requested, GiB);
  }
}

}  // namespace
}  // namespace allocsim
