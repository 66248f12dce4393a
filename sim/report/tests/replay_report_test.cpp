// The text and JSON reports of a replay.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "sim/replay/replay.hpp"
#include "sim/report/replay_report.hpp"
#include "sim/trace/private_pool_inference.hpp"
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

// A recorded OOM is never passed over in silence: replayed without the cap that caused it, the
// request is served, and the report says the replay departs there; under the cap it does not.
TEST(ReplayReport, ARecordedOomTheReplayServesIsADeparture) {
  const Trace trace = workload("gpt2_default_cap100");
  ReplayOptions options;
  options.capacity = uint64_t{150109880320};
  const ReplayResult uncapped = replay(trace, options);
  EXPECT_EQ(uncapped.outcome.recorded_ooms_not_reproduced, 1u);
  const nlohmann::json json = nlohmann::json::parse(replay_report_json_text(trace, uncapped));
  ASSERT_TRUE(json.contains("departure"));
  EXPECT_EQ(json["departure"]["kind"], "oom");
  EXPECT_EQ(json["departure"]["event_index"], *uncapped.outcome.first_recorded_oom_not_reproduced);
  EXPECT_EQ(json["departure"]["replayed"], "the request served");
  // Nor does it keep the segment its malloc took for the request: the run never had it.
  bool given_back = false;
  for (size_t k = 1; k < uncapped.device_ops.size(); ++k) {
    const DeviceOp& a = uncapped.device_ops[k - 1];
    const DeviceOp& b = uncapped.device_ops[k];
    given_back |= a.kind == DeviceOpKind::kSegmentAlloc && b.kind == DeviceOpKind::kSegmentFree &&
                  a.address == b.address && a.size == b.size;
  }
  EXPECT_TRUE(given_back);
  bool warned = false;
  for (const auto& w : json["warnings"])
    warned |= w.get<std::string>().find("departs") != std::string::npos;
  EXPECT_TRUE(warned);

  options.memory_limit = uint64_t{17423138816};  // the recorded cap
  const ReplayResult capped = replay(trace, options);
  EXPECT_EQ(capped.outcome.recorded_ooms_not_reproduced, 0u);
  EXPECT_FALSE(nlohmann::json::parse(replay_report_json_text(trace, capped)).contains("departure"));
}

// A trace without OOMs that the replay runs out of memory on is the answer to a smaller cap,
// unless the replay had the room the run reserved at its peak: then it departs, and says so.
// Here the first segment's request is routed to the capture's pool (as an unsettled guess may
// route it), so the empty_cache() that gave it back in the run keeps it.
TEST(ReplayReport, AnOomWithTheRoomTheRunHadIsADeparture) {
  constexpr uint64_t MiB = 1 << 20;
  constexpr StreamId s = 7;
  Trace t;
  t.source = "routed.pickle";
  t.events = {
      {.action = TraceAction::kSegmentAlloc, .addr = 100 * MiB, .size = 20 * MiB, .stream = s},
      {.action = TraceAction::kAlloc, .addr = 100 * MiB, .size = 20 * MiB, .stream = s},
      {.action = TraceAction::kFreeRequested, .addr = 100 * MiB, .size = 20 * MiB, .stream = s},
      {.action = TraceAction::kFreeCompleted, .addr = 100 * MiB, .size = 20 * MiB, .stream = s},
      {.action = TraceAction::kSegmentFree, .addr = 100 * MiB, .size = 20 * MiB, .stream = s},
      {.action = TraceAction::kSegmentAlloc, .addr = 200 * MiB, .size = 30 * MiB, .stream = s},
      {.action = TraceAction::kAlloc, .addr = 200 * MiB, .size = 30 * MiB, .stream = s}};
  t.segments = {SnapshotSegment{200 * MiB, 30 * MiB, s, false, false, {}, MempoolId{1, 0}}};
  infer_private_pools(t);
  ASSERT_EQ(t.request_pools[1], 1);  // the guess: the capture's, as the request after it
  ReplayOptions options;
  options.memory_limit = 30 * MiB;  // what the run reserved at its peak
  const ReplayResult at_peak = replay(t, options);
  ASSERT_EQ(at_peak.outcome.ooms, 1u);
  const nlohmann::json json = nlohmann::json::parse(replay_report_json_text(t, at_peak));
  ASSERT_TRUE(json.contains("departure"));
  EXPECT_EQ(json["departure"]["kind"], "segment_operation");
  EXPECT_EQ(json["departure"]["event_index"], 4);

  options.memory_limit = 25 * MiB;  // less than the run had: a what-if's answer
  const ReplayResult smaller = replay(t, options);
  ASSERT_EQ(smaller.outcome.ooms, 1u);
  EXPECT_FALSE(nlohmann::json::parse(replay_report_json_text(t, smaller)).contains("departure"));
}

// The same segment operations with a block placed elsewhere than the run placed it is a
// departure too (kind "address"), never a silent pass.
TEST(ReplayReport, ABlockPlacedElsewhereIsADeparture) {
  constexpr uint64_t MiB = 1 << 20, base = 1000 * MiB;
  Trace t;
  t.source = "placed.pickle";
  t.events = {{.action = TraceAction::kSegmentAlloc, .addr = base, .size = 20 * MiB},
              {.action = TraceAction::kAlloc, .addr = base, .size = 4 * MiB},
              {.action = TraceAction::kAlloc, .addr = base + 8 * MiB, .size = 4 * MiB}};
  const ReplayResult result = replay(t, ReplayOptions{});
  ASSERT_EQ(result.addresses.mismatches, 1u);
  const nlohmann::json json = nlohmann::json::parse(replay_report_json_text(t, result));
  ASSERT_TRUE(json.contains("departure"));
  EXPECT_EQ(json["departure"]["kind"], "address");
  EXPECT_EQ(json["departure"]["event_index"], 2);
  EXPECT_EQ(json["departure"]["recorded"], "a block at 0x3f000000");
  EXPECT_EQ(json["departure"]["replayed"], "one at 0x3ec00000 (1 of 2 block addresses differ)");
}

// A predicted trace's addresses are no run's: where the replay places a block elsewhere, neither a
// departure nor a note that block addresses differ from recorded ones.
TEST(ReplayReport, APredictedTraceHasNoRecordedAddressesToDifferFrom) {
  constexpr uint64_t MiB = 1 << 20, base = 1000 * MiB;
  Trace t;
  t.source = "predicted.atrace";
  t.addresses_recorded = false;
  t.events = {{.action = TraceAction::kSegmentAlloc, .addr = base, .size = 20 * MiB},
              {.action = TraceAction::kAlloc, .addr = base, .size = 4 * MiB},
              {.action = TraceAction::kAlloc, .addr = base + 8 * MiB, .size = 4 * MiB}};
  const ReplayResult result = replay(t, ReplayOptions{});
  ASSERT_EQ(result.addresses.mismatches, 1u);
  EXPECT_FALSE(nlohmann::json::parse(replay_report_json_text(t, result)).contains("departure"));
  const std::string text = replay_report_text(t, result);
  EXPECT_EQ(text.find("block addresses differ"), std::string::npos);
  EXPECT_EQ(text.find("placed by allocsim's model"), std::string::npos);
  t.addresses_recorded = true;  // the same events as a recording: the note is there
  EXPECT_NE(replay_report_text(t, result).find("block addresses differ"), std::string::npos);
}

// A bounded history whose window records no segment operation still departs where a block lands
// elsewhere (the blocks of the segments restored from the snapshot are checked), and names what
// the trace does not show: blocks from before it left unsplit larger than their requests (a cut
// of the Llama run with a roundup_power2_divisions list, 10% from its end), the ages garbage
// collection goes by (a cut of the capped run with garbage collection, 30% in).
TEST(ReplayReport, ACutHistoryDepartsWithWhatItCannotShow) {
  auto cut = [](const char* name, double at) {
    Trace t = read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + name + ".pickle.gz");
    const auto n = static_cast<double>(t.events.size());
    t.events.erase(t.events.begin(), t.events.begin() + static_cast<long>(n * at));
    return t;
  };
  const Trace rounded = cut("llama-varlen-bf16_rounduplist", 0.9);
  ReplayOptions options;
  options.capacity = uint64_t{150109880320};
  nlohmann::json json =
      nlohmann::json::parse(replay_report_json_text(rounded, replay(rounded, options)));
  ASSERT_TRUE(json.contains("departure"));
  EXPECT_EQ(json["departure"]["kind"], "address");
  EXPECT_NE(json["departure"]["cause"].get<std::string>().find("larger than their requests"),
            std::string::npos);
  const Trace collected = cut("llama-varlen-bf16_maxsplit256_gc07_cap11000000000", 0.3);
  options.memory_limit = uint64_t{11000000000};
  json = nlohmann::json::parse(replay_report_json_text(collected, replay(collected, options)));
  ASSERT_TRUE(json.contains("departure"));
  EXPECT_NE(json["departure"]["cause"].get<std::string>().find("garbage collection"),
            std::string::npos);
}

}  // namespace
}  // namespace allocsim
