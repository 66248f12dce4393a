// allocsim diff on shipped recordings: a run against itself, the same job under two settings, at
// two batch sizes, and with a leak; and on small traces built here, the pairing's cases.
#include <gtest/gtest.h>

#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "sim/diff/diff_report.hpp"
#include "sim/diff/run_diff.hpp"
#include "sim/trace/trace_file.hpp"

namespace allocsim {
namespace {

std::string workload(const std::string& name) {
  return std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + name + ".pickle.gz";
}

nlohmann::json recorded_stats(const std::string& name) {
  std::ifstream in(std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + name + ".json");
  return nlohmann::json::parse(in);
}

int64_t summed_delta(const RunDiff& d) {
  return std::accumulate(d.groups.begin(), d.groups.end(), int64_t{0},
                         [](int64_t s, const DiffGroup& g) { return s + g.delta_at_peak(); });
}

TEST(RunDiff, ARunAgainstItselfDiffersNowhere) {
  const Trace t = read_trace_file(workload("gpt2_default"));
  const RunDiff d = diff_runs(t, t);
  EXPECT_EQ(d.paired_by, PairedBy::kSizeAndSite);
  EXPECT_EQ(d.same, d.a.allocations);
  EXPECT_EQ(d.changed + d.only_a + d.only_b, 0u);
  EXPECT_FALSE(d.reserved_parting);
  EXPECT_TRUE(d.same_allocator);
  EXPECT_EQ(d.peak_reserved.difference(), 0);
  for (const DiffGroup& g : d.groups) EXPECT_EQ(g.delta_at_peak(), 0) << g.label;
  EXPECT_TRUE(diff_json(d)["groups"].empty());
  EXPECT_NE(diff_text(d).find("the runs make the same requests"), std::string::npos);
}

// The same job recorded with the defaults and with expandable segments: the same requests, so
// every byte of the difference is the allocator's, and it is the recorded one.
TEST(RunDiff, TwoSettingsOfOneJobAreAllAllocator) {
  const Trace a = read_trace_file(workload("gpt2_default"));
  const Trace b = read_trace_file(workload("gpt2_expandable"));
  const RunDiff d = diff_runs(a, b);
  EXPECT_EQ(d.same, d.a.allocations);
  EXPECT_EQ(d.only_a + d.only_b + d.changed, 0u);
  EXPECT_FALSE(d.same_allocator);
  EXPECT_EQ(d.peak_reserved.program(), 0);
  EXPECT_EQ(d.peak_reserved.allocator(), d.peak_reserved.difference());
  EXPECT_EQ(d.peak_reserved.program() + d.peak_reserved.allocator(), d.peak_reserved.difference());
  const int64_t recorded = recorded_stats("gpt2_expandable")["max_memory_reserved"].get<int64_t>() -
                           recorded_stats("gpt2_default")["max_memory_reserved"].get<int64_t>();
  EXPECT_EQ(d.peak_reserved.difference(), recorded);
  ASSERT_TRUE(d.reserved_parting);  // expandable segments map 20 MiB pages from the first request
  EXPECT_NE(d.reserved_parting->a_reserved, d.reserved_parting->b_reserved);
}

// One job at batch 2 and 4: sizes grow, pairing follows them, and the groups split the whole
// difference of the bytes live at the peaks.
TEST(RunDiff, TwoBatchSizesPairByGrowingSizesAndAddUp) {
  const Trace a =
      read_trace_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/sweeps/gpt2_batch-2.pickle.gz");
  const Trace b =
      read_trace_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/sweeps/gpt2_batch-4.pickle.gz");
  const RunDiff d = diff_runs(a, b);
  EXPECT_EQ(d.paired_by, PairedBy::kGrowingSizes);
  EXPECT_EQ(d.same + d.changed + d.only_a, d.a.allocations);
  EXPECT_EQ(d.same + d.changed + d.only_b, d.b.allocations);
  EXPECT_GT(d.changed, d.a.allocations / 2);
  EXPECT_EQ(summed_delta(d),
            static_cast<int64_t>(d.b.live_at_peak) - static_cast<int64_t>(d.a.live_at_peak));
  EXPECT_TRUE(d.same_allocator);
  EXPECT_EQ(d.peak_reserved.program(), d.peak_reserved.difference());
  const int64_t recorded =
      recorded_stats("sweeps/gpt2_batch-4")["max_memory_reserved"].get<int64_t>() -
      recorded_stats("sweeps/gpt2_batch-2")["max_memory_reserved"].get<int64_t>();
  EXPECT_EQ(d.peak_reserved.difference(), recorded);
  // Without frames, groups are runs of requests by step and position.
  EXPECT_FALSE(d.sites);
  EXPECT_EQ(d.groups.front().label.rfind("step ", 0), 0u) << d.groups.front().label;
}

// A job that keeps a tensor of every step (recorded with stack frames) against the same job
// without: the same requests, held longer; the line that holds them named.
TEST(RunDiff, ALeakIsNamedByItsSourceLine) {
  const Trace a = read_trace_file(workload("gpt2_default"));
  const Trace b = read_trace_file(workload("gpt2-leak_default_stacks"));
  const RunDiff d = diff_runs(a, b);
  EXPECT_TRUE(d.sites);
  ASSERT_FALSE(d.groups.empty());
  const DiffGroup& top = d.groups.front();
  EXPECT_EQ(top.delta_at_peak(),
            static_cast<int64_t>(d.b.live_at_peak) - static_cast<int64_t>(d.a.live_at_peak));
  EXPECT_NE(top.label.find("(forward)"), std::string::npos) << top.label;
  EXPECT_EQ(summed_delta(d), top.delta_at_peak());
}

// Small traces: one request inserted, one resized, one dropped.
Trace small(const std::vector<std::pair<uint64_t, uint32_t>>& allocs) {
  Trace t;
  t.source = "small";
  t.frames = {{"f", "model.py", 10}, {"g", "model.py", 20}, {"h", "model.py", 30}};
  t.stacks = {{0}, {1}, {2}};
  uint64_t addr = 1 << 20;
  for (const auto& [size, stack] : allocs) {
    TraceEvent e;
    e.action = TraceAction::kAlloc;
    e.addr = addr;
    e.size = size;
    e.stack = stack;
    t.events.push_back(e);
    addr += size;
  }
  return t;
}

TEST(RunPairing, InsertedResizedAndDroppedRequests) {
  const Trace a = small({{512, 0}, {1024, 1}, {2048, 2}, {768, 0}});
  const Trace b = small({{512, 0}, {4096, 1}, {300, 0}, {2048, 2}});
  const std::vector<RecordedRequest> qa = recorded_requests(a), qb = recorded_requests(b);
  const RunPairing p = pair_allocations(a, qa, b, qb);
  ASSERT_EQ(p.by, PairedBy::kSizeAndSite);
  std::vector<std::pair<int64_t, int64_t>> got;
  for (const AllocationPair& x : p.pairs) got.emplace_back(x.a, x.b);
  // 512 with 512; 1024 with 4096 (model.py:20, resized); B's 300 inserted; 2048 with 2048; A's
  // last, 768, only in A.
  const std::vector<std::pair<int64_t, int64_t>> want = {{0, 0}, {1, 1}, {-1, 2}, {2, 3}, {3, -1}};
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace allocsim
