// Replays the shipped recordings of CUDA-graph jobs (workloads/cuda_graphs/: torch.cuda.graph
// captures, a shared pool, a destroyed graph, torch.compile's reduce-overhead mode) with the
// private pools inferred from their final segments, and compares them with what PyTorch reported.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "backends/testing/device_op_list.hpp"
#include "core/memory_summary.hpp"
#include "sim/replay/pool_guess_settling.hpp"
#include "sim/replay/replay.hpp"
#include "sim/testing/shipped_workloads.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim {
namespace {

class GraphWorkload : public ::testing::TestWithParam<std::string> {};

TEST_P(GraphWorkload, MatchesPyTorch) {
  const std::string base = std::string(ALLOCSIM_WORKLOADS_DIR) + "/cuda_graphs/" + GetParam();
  std::ifstream in(base + ".json");
  const nlohmann::json meta = nlohmann::json::parse(in);
  Trace trace = read_snapshot_file(base + ".pickle.gz");
  ASSERT_FALSE(trace.private_pools.empty());
  settle_pool_guesses(trace);
  ReplayOptions options;
  options.capacity = meta["total_bytes"].get<uint64_t>();
  const ReplayResult result = replay(trace, options);

  testing::OpList recorded;
  for (const TraceEvent& e : trace.events) {
    if (e.action >= TraceAction::kSegmentAlloc && e.action <= TraceAction::kSegmentUnmap)
      recorded.emplace_back(to_string(e.action), e.size);
  }
  EXPECT_EQ(testing::op_list(result.device_ops), recorded);
  EXPECT_EQ(result.addresses.mismatches, 0u);
  for (const auto& [key, value] : meta["memory_stats"].items()) {
    // Each capture begins with an empty_cache; one that frees nothing leaves no trace entry, so
    // the synchronisations it counts cannot all be seen.
    if (key == "num_sync_all_streams") continue;
    EXPECT_EQ(result.stats.get(key), value.get<int64_t>()) << key;
  }
  EXPECT_EQ(memory_summary(result.stats), meta["memory_summary"].get<std::string>());
  // The breakdown by pool accounts for every reserved byte, private pools' included.
  uint64_t reserved = 0;
  for (const BreakdownRow& row : result.breakdown_end.by_pool) reserved += row.reserved;
  EXPECT_EQ(static_cast<int64_t>(reserved), result.stats.reserved_bytes[kAggregate].current);
}

INSTANTIATE_TEST_SUITE_P(
    CudaGraphs, GraphWorkload,
    ::testing::ValuesIn(testing_workloads::shipped_workload_names("cuda_graphs")),
    testing_workloads::workload_test_name<::testing::TestParamInfo<std::string>>);

}  // namespace
}  // namespace allocsim
