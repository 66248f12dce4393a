// The text and JSON reports of a replay.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "sim/replay/replay.hpp"
#include "sim/report/replay_report.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim {
namespace {

Trace workload(const std::string& name) {
  return read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + name + ".pickle.gz");
}

// A bounded history starts mid-run: the blocks allocated before its first event have no alloc
// event, and the reports say they were there before the trace instead of naming an event.
TEST(ReplayReport, BlocksFromBeforeTheTraceAreLabelledSo) {
  const Trace trace = workload("llama-varlen-bf16_default_stacks_window");
  const ReplayResult result = replay(trace, ReplayOptions{});
  ASSERT_GT(result.restored.blocks, 0u);
  const std::string text = replay_report_text(trace, result);
  EXPECT_NE(text.find("there before the trace's first event"), std::string::npos);
  EXPECT_EQ(text.find(std::to_string(kBeforeTrace)), std::string::npos);
  const nlohmann::json json = nlohmann::json::parse(replay_report_json_text(trace, result));
  size_t before = 0;
  for (const auto& b : json["leaks"]["blocks"]) {
    if (b.value("before_trace", false)) {
      EXPECT_TRUE(b["event_index"].is_null());
      ++before;
    } else {
      EXPECT_TRUE(b["event_index"].is_number_unsigned());
    }
  }
  EXPECT_GT(before, 0u);
}

TEST(ReplayReport, BlocksOfAWholeHistoryNameTheirAllocEvent) {
  const Trace trace = workload("gpt2-ckpt_default");
  const ReplayResult result = replay(trace, ReplayOptions{});
  const std::string text = replay_report_text(trace, result);
  EXPECT_NE(text.find("allocated at event "), std::string::npos);
  EXPECT_EQ(text.find("before the trace"), std::string::npos);
}

}  // namespace
}  // namespace allocsim
