// Replays the shipped recordings of CUDA-graph jobs (workloads/cuda_graphs/: torch.cuda.graph
// captures, a shared pool, a destroyed graph, torch.compile's reduce-overhead mode; the same jobs
// with the moments of each empty_cache() and capture marked in workloads/cuda_graph_syncs/) with
// the private pools inferred from their final segments, and compares them with what PyTorch
// reported.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "backends/testing/device_op_list.hpp"
#include "core/memory_summary.hpp"
#include "sim/replay/pool_guess_settling.hpp"
#include "sim/replay/replay.hpp"
#include "sim/testing/shipped_workloads.hpp"
#include "sim/trace/private_pool_inference.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim {
namespace {

// A parameter is FOLDER/NAME.
class GraphWorkload : public ::testing::TestWithParam<std::string> {};

std::vector<std::string> graph_workloads() {
  std::vector<std::string> all;
  for (const char* folder : {"cuda_graphs", "cuda_graph_syncs"}) {
    for (const std::string& name : testing_workloads::shipped_workload_names(folder))
      all.push_back(std::string(folder) + "/" + name);
  }
  return all;
}

// The empty_cache() calls of a recording with markers that left no entry in its trace (only the
// recorder's own `snapshot` entries lie between the marks before and after the call): each
// synchronised all streams, which no replay can see.
int64_t unseen_syncs(const nlohmann::json& markers, const Trace& trace) {
  int64_t unseen = 0;
  for (size_t i = 0; i < markers.size(); ++i) {
    if (markers[i]["what"] != "empty_cache:before") continue;
    size_t end = i + 1;
    while (end < markers.size() && markers[end]["what"] != "empty_cache:after") ++end;
    if (end == markers.size()) break;
    const auto from = markers[i]["at"].get<int64_t>();
    const auto to = markers[end]["at"].get<int64_t>();
    EXPECT_GE(from, 0) << "a marker without its trace position";
    bool seen = false;
    for (auto e = static_cast<size_t>(std::max<int64_t>(from, 0));
         e < static_cast<size_t>(std::max<int64_t>(to, 0)) && e < trace.events.size(); ++e)
      seen |= trace.events[e].action != TraceAction::kOther;
    unseen += seen ? 0 : 1;
  }
  return unseen;
}

testing::OpList recorded_ops(const Trace& trace) {
  testing::OpList recorded;
  for (const TraceEvent& e : trace.events) {
    if (e.action >= TraceAction::kSegmentAlloc && e.action <= TraceAction::kSegmentUnmap)
      recorded.emplace_back(to_string(e.action), e.size);
  }
  return recorded;
}

TEST_P(GraphWorkload, MatchesPyTorch) {
  const std::string base = std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + GetParam();
  std::ifstream in(base + ".json");
  const nlohmann::json meta = nlohmann::json::parse(in);
  Trace trace = read_snapshot_file(base + ".pickle.gz");
  ASSERT_FALSE(trace.private_pools.empty());
  settle_pool_guesses(trace);
  ReplayOptions options;
  options.capacity = meta["total_bytes"].get<uint64_t>();
  const ReplayResult result = replay(trace, options);

  EXPECT_EQ(testing::op_list(result.device_ops), recorded_ops(trace));
  EXPECT_EQ(result.addresses.mismatches, 0u);
  // A bounded history (max_entries) starts mid-run: counters and peaks from before it are
  // unknowable, the state at its end is not.
  const bool windowed =
      meta.contains("history_max_entries") && !meta["history_max_entries"].is_null();
  for (const auto& [key, value] : meta["memory_stats"].items()) {
    if (windowed && key.find(".current") == std::string::npos) continue;
    // Each capture begins with an empty_cache; one that frees nothing leaves no trace entry, so
    // the synchronisations it counts cannot all be seen: the replay counts those it can see,
    // exactly those where the recording marks where they were.
    if (key == "num_sync_all_streams") {
      if (meta.contains("markers")) {
        EXPECT_EQ(result.stats.get(key),
                  value.get<int64_t>() - unseen_syncs(meta["markers"], trace))
            << key;
      } else {
        EXPECT_LE(result.stats.get(key), value.get<int64_t>()) << key;
      }
      continue;
    }
    EXPECT_EQ(result.stats.get(key), value.get<int64_t>()) << key;
  }
  if (windowed) {
    EXPECT_GT(result.restored.segments, 0u);
  } else {
    EXPECT_EQ(memory_summary(result.stats), meta["memory_summary"].get<std::string>());
  }
  // The breakdown by pool accounts for every reserved byte, private pools' included.
  uint64_t reserved = 0;
  for (const BreakdownRow& row : result.breakdown_end.by_pool) reserved += row.reserved;
  EXPECT_EQ(static_cast<int64_t>(reserved), result.stats.reserved_bytes[kAggregate].current);
}

// As a bounded max_entries would cut it: the last events and the final segments. The segments
// from before the cut (expandable segments' mapped ranges too) are restored into the pools they
// belonged to, which the inference finds from the final segments and the requests in the window,
// so that every recorded segment operation and address follows, and the state at the end is the
// whole trace's.
TEST_P(GraphWorkload, ACutHistoryRestoresItsSegmentsIntoTheirPools) {
  const std::string base = std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + GetParam();
  std::ifstream in(base + ".json");
  const nlohmann::json meta = nlohmann::json::parse(in);
  Trace whole = read_snapshot_file(base + ".pickle.gz");
  settle_pool_guesses(whole);
  ReplayOptions options;
  options.capacity = meta["total_bytes"].get<uint64_t>();
  const ReplayResult full = replay(whole, options);
  const size_t n = whole.events.size();
  for (const size_t cut : {n / 10, n / 4, n / 3, n / 2, 2 * n / 3, 9 * n / 10}) {
    Trace tail = whole;  // the inference below redoes the routing from the events kept
    tail.events.erase(tail.events.begin(), tail.events.begin() + static_cast<long>(cut));
    infer_private_pools(tail);
    settle_pool_guesses(tail);
    const ReplayResult r = replay(tail, options);
    EXPECT_GT(r.restored.segments, 0u) << "cut at " << cut;
    EXPECT_EQ(testing::op_list(r.device_ops), recorded_ops(tail)) << "cut at " << cut;
    EXPECT_EQ(r.addresses.mismatches, 0u) << "cut at " << cut;
    ASSERT_EQ(r.breakdown_end.by_pool.size(), full.breakdown_end.by_pool.size());
    for (size_t i = 0; i < r.breakdown_end.by_pool.size(); ++i) {
      const BreakdownRow& got = r.breakdown_end.by_pool[i];
      const BreakdownRow& want = full.breakdown_end.by_pool[i];
      EXPECT_EQ(got.group, want.group) << "cut at " << cut;
      EXPECT_EQ(got.segments, want.segments) << got.group << ", cut at " << cut;
      EXPECT_EQ(got.reserved, want.reserved) << got.group << ", cut at " << cut;
      EXPECT_EQ(got.allocated, want.allocated) << got.group << ", cut at " << cut;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    CudaGraphs, GraphWorkload, ::testing::ValuesIn(graph_workloads()),
    testing_workloads::workload_test_name<::testing::TestParamInfo<std::string>>);

}  // namespace
}  // namespace allocsim
