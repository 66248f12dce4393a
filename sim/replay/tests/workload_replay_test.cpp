// Replays every shipped workload and compares it with what PyTorch itself reported.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <tuple>

#include <nlohmann/json.hpp>

#include "backends/testing/device_op_list.hpp"
#include "core/memory_summary.hpp"
#include "sim/replay/replay.hpp"
#include "sim/report/replay_report.hpp"
#include "sim/testing/shipped_workloads.hpp"
#include "sim/trace/snapshot_reader.hpp"
#include "sim/trace/trace_file.hpp"

namespace allocsim {
namespace {

nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

ReplayOptions options_for(const nlohmann::json& meta) {
  ReplayOptions options;
  options.capacity = meta["total_bytes"].get<uint64_t>();
  if (meta.value("cap_bytes", uint64_t{0}) > 0) {
    options.memory_fraction = static_cast<double>(meta["cap_bytes"].get<uint64_t>()) /
                              static_cast<double>(options.capacity);
  }
  return options;
}

std::vector<std::string> oom_figures(const std::string& message) {
  static const char* const patterns[] = {
      R"(Tried to allocate ([\d.]+ \w+))",
      R"(([\d.]+ \w+) allowed)",
      R"(Of the allocated memory ([\d.]+ \w+) is allocated by PyTorch)",
      R"(and ([\d.]+ \w+) is reserved by PyTorch but unallocated)",
      R"(of which ([\d.]+ \w+) is free)",
      R"(total capacity of ([\d.]+ \w+))"};
  std::vector<std::string> out;
  for (const char* p : patterns) {
    std::smatch m;
    out.push_back(std::regex_search(message, m, std::regex(p)) ? m[1].str() : "");
  }
  return out;
}

// The device operations a trace recorded, as (action, size) pairs.
testing::OpList recorded_ops(const Trace& trace) {
  testing::OpList ops;
  for (const TraceEvent& e : trace.events) {
    if (e.action >= TraceAction::kSegmentAlloc && e.action <= TraceAction::kSegmentUnmap) {
      ops.emplace_back(to_string(e.action), e.size);
    }
  }
  return ops;
}

class WorkloadReplay : public ::testing::TestWithParam<std::string> {};

TEST_P(WorkloadReplay, MatchesPyTorch) {
  const std::string base = std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + GetParam();
  const nlohmann::json meta = load_json(base + ".json");
  const Trace trace = read_snapshot_file(base + ".pickle.gz");
  const ReplayResult result = replay(trace, options_for(meta));
  const bool windowed =
      meta.contains("history_max_entries") && !meta["history_max_entries"].is_null();

  // Device operations: every segment_alloc / free / map / unmap in order and size.
  EXPECT_EQ(testing::op_list(result.device_ops), recorded_ops(trace));

  // Every memory_stats() key, and the memory_summary() text.
  for (const auto& [key, value] : meta["memory_stats"].items()) {
    if (windowed && key.find(".current") == std::string::npos) continue;
    EXPECT_EQ(result.stats.get(key), value.get<int64_t>()) << key;
  }
  if (windowed) {
    EXPECT_GT(result.restored.segments, 0u);
    return;
  }
  EXPECT_EQ(memory_summary(result.stats), meta["memory_summary"].get<std::string>());

  // The breakdown by pool and by segment size accounts for every reserved and active byte.
  for (const auto* rows : {&result.breakdown_end.by_pool, &result.breakdown_end.by_segment_size}) {
    uint64_t reserved = 0, active = 0;
    for (const BreakdownRow& row : *rows) {
      reserved += row.reserved;
      active += row.allocated;
    }
    EXPECT_EQ(static_cast<int64_t>(reserved), result.stats.reserved_bytes[kAggregate].current);
    EXPECT_EQ(static_cast<int64_t>(active), result.stats.active_bytes()[kAggregate].current);
  }

  // Block addresses equal the recorded ones when the recorded segment addresses are used, and
  // every segment got a recorded address.
  EXPECT_GT(result.addresses.checks, 0u);
  EXPECT_EQ(result.addresses.mismatches, 0u);
  EXPECT_GT(result.addresses.segments_placed, 0u);
  EXPECT_EQ(result.addresses.segments_placed_by_model, 0u);

  // The OOM, if the real run had one, with the same figures.
  if (meta["oom"].is_null()) {
    EXPECT_FALSE(result.outcome.oom.has_value());
  } else {
    ASSERT_TRUE(result.outcome.oom.has_value());
    EXPECT_TRUE(result.outcome.oom->recorded);
    EXPECT_EQ(oom_figures(result.outcome.oom->message),
              oom_figures(meta["oom"].get<std::string>()));
  }
}

TEST_P(WorkloadReplay, SameReplayTwiceGivesIdenticalJson) {
  const std::string base = std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + GetParam();
  const nlohmann::json meta = load_json(base + ".json");
  const Trace trace = read_snapshot_file(base + ".pickle.gz");
  const std::string first = replay_report_json_text(trace, replay(trace, options_for(meta)));
  const std::string second = replay_report_json_text(read_snapshot_file(base + ".pickle.gz"),
                                                     replay(trace, options_for(meta)));
  EXPECT_EQ(first, second);
}

// A replay watched request by request (here, a timeline and the invariants checked) runs its own
// compiled copy of the loop: it must come to the same result as the unwatched one.
TEST_P(WorkloadReplay, WatchedReplayEqualsTheUnwatchedOne) {
  const std::string base = std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + GetParam();
  const nlohmann::json meta = load_json(base + ".json");
  const Trace trace = read_snapshot_file(base + ".pickle.gz");
  ReplayOptions options = options_for(meta);
  options.capacity = std::min<uint64_t>(options.capacity, uint64_t{12} << 30);  // OOMs, for some
  options.on_oom = OnOom::kContinue;
  const ReplayResult plain = replay(trace, options);
  options.record_timeline = true;
  const ReplayResult watched = replay(trace, options);
  EXPECT_EQ(replay_report_json_text(trace, watched), replay_report_json_text(trace, plain));
  EXPECT_TRUE(plain.recording.timeline.empty());
  EXPECT_FALSE(watched.recording.timeline.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Shipped, WorkloadReplay, ::testing::ValuesIn(testing_workloads::shipped_workload_names()),
    testing_workloads::workload_test_name<::testing::TestParamInfo<std::string>>);

TEST(WorkloadReplay, InvariantsHoldAfterEveryEvent) {
  const std::string base = std::string(ALLOCSIM_WORKLOADS_DIR) + "/";
  for (const char* name :
       {"multistream_default", "llama-varlen-bf16_expandable_cap100", "gpt2_maxsplit128"}) {
    const nlohmann::json meta = load_json(base + name + ".json");
    ReplayOptions options = options_for(meta);
    options.check_invariants = true;
    EXPECT_NO_THROW((void)replay(read_snapshot_file(base + name + ".pickle.gz"), options)) << name;
  }
}

// A history that starts mid-run, recorded without max_split_size, restores split blocks of 128 MiB
// and more; replayed with max_split_size_mb:128 under a cap, the slow path must not free one of
// them as if it were a whole segment (plan's search for that setting crashed on this).
TEST(WindowedHistory, RestoredSplitOversizeBlocksAreNotReleasedAsSegments) {
  const Trace trace = read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) +
                                         "/llama-varlen-bf16_default_stacks_window.pickle.gz");
  ReplayOptions options;
  options.alloc_conf = parse_alloc_conf("max_split_size_mb:128");
  options.capacity = uint64_t{1} << 50;
  options.context_bytes = 0;
  options.memory_limit = uint64_t{11517558784};
  options.check_invariants = true;
  EXPECT_NO_THROW((void)replay(trace, options));
}

// Without the recorded addresses (--no-recorded-addresses) the segments that existed before the
// first event are still restored where they were; the address model places the rest.
TEST(WindowedHistory, ReplaysWithTheAddressModelToo) {
  const Trace trace = read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) +
                                         "/llama-varlen-bf16_default_stacks_window.pickle.gz");
  ReplayOptions recorded;
  const ReplayResult with = replay(trace, recorded);
  ReplayOptions modelled;
  modelled.use_recorded_addresses = false;
  modelled.check_invariants = true;
  const ReplayResult without = replay(trace, modelled);
  ASSERT_GT(with.restored.segments, 0u);
  EXPECT_EQ(without.restored.segments, with.restored.segments);
  EXPECT_EQ(without.restored.blocks, with.restored.blocks);
  EXPECT_EQ(without.outcome.events_replayed, trace.events.size());
  EXPECT_EQ(without.addresses.checks, 0u);  // nothing to check against
  // The restored segments keep their addresses; the few the window allocates are the model's.
  EXPECT_EQ(with.addresses.segments_placed_by_model, 0u);
  EXPECT_EQ(without.addresses.segments_placed_by_model,
            without.addresses.segments_placed - with.restored.segments);
  // The same requests, so the same allocated memory whatever the addresses.
  EXPECT_EQ(without.stats.allocated_bytes, with.stats.allocated_bytes);
}

TEST(WorkloadReplay, SaysHowManySegmentsTheAddressModelPlaced) {
  const Trace trace =
      read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/gpt2_default.pickle.gz");
  ReplayOptions modelled;
  modelled.use_recorded_addresses = false;
  const ReplayResult r = replay(trace, modelled);
  EXPECT_EQ(static_cast<int64_t>(r.addresses.segments_placed), r.stats.num_device_alloc);
  EXPECT_EQ(r.addresses.segments_placed_by_model, r.addresses.segments_placed);
  const std::string text = replay_report_text(trace, r);
  EXPECT_NE(text.find("segments placed by allocsim's model of the driver"), std::string::npos);
}

// As a bounded max_entries would cut it: the last events, and the final segments. With
// expandable segments, the ranges mapped at the cut are rebuilt at their reservations from the
// final segments and the maps and unmaps after it.
TEST(WindowedHistory, ReplayOfACutTraceMatchesTheTailOfTheWholeOne) {
  for (const char* name :
       {"llama-varlen-bf16_default", "llama-varlen-bf16_expandable", "gpt2_expandable"}) {
    const Trace whole =
        read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + name + ".pickle.gz");
    ReplayOptions options;
    options.capacity = uint64_t{150109880320};
    const ReplayResult full = replay(whole, options);
    const size_t n = whole.events.size();
    for (size_t cut : {size_t{1}, n / 10, n / 4, n / 2, 3 * n / 4, n - n / 20}) {
      Trace tail = whole;
      tail.events.erase(tail.events.begin(), tail.events.begin() + static_cast<long>(cut));
      options.check_invariants = cut == n / 2;
      const ReplayResult r = replay(tail, options);
      EXPECT_GT(r.restored.segments, 0u) << name << ", cut at " << cut;
      EXPECT_EQ(testing::op_list(r.device_ops), recorded_ops(tail)) << name << ", cut at " << cut;
      for (const auto& [key, value] : full.stats.flatten()) {
        if (key.find(".current") == std::string::npos) continue;
        EXPECT_EQ(r.stats.get(key), value) << name << ": " << key << ", cut at " << cut;
      }
      EXPECT_EQ(r.addresses.mismatches, 0u) << name << ", cut at " << cut;
      EXPECT_EQ(r.outcome.contradictions.frees_of_unknown_blocks, 0u) << name << ", cut at " << cut;
    }
  }
}

// A device smaller than the memory held at a history's first event (what-if): that state is
// restored as it was, and the report says the run could not have got there on this device.
TEST(WindowedHistory, AFirstStateLargerThanTheDeviceIsRestoredAndSaidSo) {
  const std::string path =
      std::string(ALLOCSIM_WORKLOADS_DIR) + "/gpt2_expandable_window6000.pickle.gz";
  const Trace trace = read_snapshot_file(path);
  ReplayOptions options;
  options.capacity = uint64_t{150109880320};
  const ReplayResult fits = replay(trace, options);
  EXPECT_FALSE(fits.restored.over_capacity);
  options.capacity = uint64_t{12} << 30;
  options.check_invariants = true;
  const ReplayResult small = replay(trace, options);
  EXPECT_TRUE(small.restored.over_capacity);
  EXPECT_EQ(small.restored.blocks, fits.restored.blocks);
  EXPECT_GT(small.restored.reserved_bytes, options.capacity);
  const nlohmann::json report = nlohmann::json::parse(replay_report_json_text(trace, small));
  ASSERT_TRUE(report.contains("warnings"));
  EXPECT_NE(report["warnings"].dump().find("more than the device holds"), std::string::npos);
}

// A history whose first event frees a block from before it: allocated and reserved peaked
// before event 0, and the figures at the peak are the first state's, not the state after the free.
TEST(WindowedHistory, PeaksAtTheFirstStateAreReportedThere) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  constexpr uint64_t kBase = uint64_t{1} << 40;
  Trace trace;
  trace.events = {
      TraceEvent{.action = TraceAction::kFreeRequested, .addr = kBase, .size = 8 * kMiB},
      TraceEvent{.action = TraceAction::kFreeCompleted, .addr = kBase, .size = 8 * kMiB}};
  trace.segments = {{kBase, 20 * kMiB, 0, false, false, {{kBase, 20 * kMiB, 0, false, false}}}};
  ReplayOptions options;
  options.capacity = uint64_t{80} << 30;
  const ReplayResult r = replay(trace, options);
  ASSERT_EQ(r.restored.blocks, 1u);
  EXPECT_EQ(r.stats.allocated_bytes[kAggregate].peak, static_cast<int64_t>(8 * kMiB));
  EXPECT_EQ(r.allocated_peak_event, 0u);
  EXPECT_EQ(r.fragmentation.reserved_unallocated_at_peak, 12 * kMiB);
}

TEST(WorkloadReplay, SmallerDeviceOoms) {
  // llama-varlen peaks at 11.1 GiB reserved: on a 10 GiB card the replay must stop with an OOM
  // that the recorded run did not have.
  const Trace trace = read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) +
                                         "/llama-varlen-bf16_default.pickle.gz");
  ReplayOptions options;
  options.capacity = uint64_t{10} << 30;
  const ReplayResult result = replay(trace, options);
  ASSERT_TRUE(result.outcome.oom.has_value());
  EXPECT_FALSE(result.outcome.oom->recorded);
  EXPECT_TRUE(result.outcome.stopped_at_oom);
  EXPECT_LT(result.outcome.events_replayed, trace.events.size());
  EXPECT_EQ(result.stats.num_ooms, 1);
  EXPECT_EQ(result.stats.num_alloc_retries, 1);
  EXPECT_NE(result.outcome.oom->message.find("GPU 0 has a total capacity of 10.00 GiB"),
            std::string::npos);
}

// Snapshots published by other people (workloads/public/): bounded histories of real jobs, each
// replayed with every block where the run put it, no departure, and the final segments the file's.
std::vector<std::tuple<uint64_t, uint64_t, bool, uint64_t, uint64_t, bool>> segment_shape(
    const std::vector<SnapshotSegment>& segments) {
  std::vector<std::tuple<uint64_t, uint64_t, bool, uint64_t, uint64_t, bool>> out;
  for (const SnapshotSegment& s : segments) {
    for (const SnapshotBlock& b : s.blocks)
      out.emplace_back(s.address, s.total_size, s.small, b.address, b.size, b.allocated);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PublicSnapshots, ReplayExactly) {
  for (const char* name :
       {"Wedsonlin_assignment2-systems_medium_512_training_memory_snapshot",
        "Hyperion-shuo_assignment2-systems_memory_snapshot_large_cl512_fw_with_grad_bf16"}) {
    SCOPED_TRACE(name);
    const Trace trace =
        read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/public/" + name + ".pickle.gz");
    ReplayOptions options;
    options.record_trace = true;
    const ReplayResult r = replay(trace, options);
    EXPECT_GT(r.restored.segments, 0u);
    EXPECT_EQ(r.outcome.events_replayed, trace.events.size());
    EXPECT_GT(r.addresses.checks, 2000u);
    EXPECT_EQ(r.addresses.mismatches, 0u);
    EXPECT_EQ(segment_shape(r.recording.final_segments), segment_shape(trace.segments));
  }
}

// Three GPUs under expandable segments on a card a little smaller than the default 80 GiB: each
// device's second reservation lies inside the first as an 80 GiB card reserves it. On the card
// the layout leaves room for, every address on every device is the recorded one.
TEST(PublicSnapshots, ThreeGpusReplayOnTheCardTheirReservationsShow) {
  const std::vector<Trace> devices =
      read_trace_file_devices(std::string(ALLOCSIM_WORKLOADS_DIR) +
                              "/public/ConstructorSun_code_location_memory_snapshot.pickle.gz");
  ASSERT_EQ(devices.size(), 3u);
  for (const Trace& trace : devices) {
    SCOPED_TRACE(trace.device);
    ReplayOptions options;
    options.record_trace = true;
    EXPECT_GT(replay(trace, options).addresses.mismatches, 0u);  // on the default card
    options.capacity_from_layout = true;
    const ReplayResult r = replay(trace, options);
    EXPECT_TRUE(r.setup.capacity_from_layout);
    EXPECT_EQ(r.setup.capacity, 85004561067u);  // 4560 pages of 20 MiB are 1 1/8 of it
    EXPECT_EQ(r.outcome.events_replayed, trace.events.size());
    EXPECT_GT(r.addresses.checks, 150u);
    EXPECT_EQ(r.addresses.mismatches, 0u);
    EXPECT_EQ(segment_shape(r.recording.final_segments), segment_shape(trace.segments));
  }
}

}  // namespace
}  // namespace allocsim
