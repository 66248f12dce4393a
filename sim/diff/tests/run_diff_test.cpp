// allocsim diff on shipped recordings: a run against itself, the same job under two settings, at
// two batch sizes, and with a leak; and on small traces built here, the pairing's cases.
#include <gtest/gtest.h>

#include <fstream>
#include <numeric>
#include <set>

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

// Two ranks of one DDP job (workloads/world_sizes/, four H200s), whose peaks differ by 0.7 GB
// though they run the same program on the same sizes: the whole difference at one line, DDP's
// _ddp_init_helper, a buffer alive at one run's peak and freed before the other's; all program.
TEST(RunDiff, TwoDdpRanksDifferAtOneBufferOfDdp) {
  const Trace a = read_trace_file(workload("world_sizes/ddp_b4_ws-2_rank-0"));
  const Trace b = read_trace_file(workload("world_sizes/ddp_b4_ws-4_rank-0"));
  const RunDiff d = diff_runs(a, b);
  ASSERT_FALSE(d.groups.empty());
  const DiffGroup& top = d.groups.front();
  EXPECT_NE(top.label.find("(_ddp_init_helper)"), std::string::npos) << top.label;
  EXPECT_GT(top.delta_at_peak(), int64_t{600} << 20);
  EXPECT_EQ(summed_delta(d),
            static_cast<int64_t>(d.b.live_at_peak) - static_cast<int64_t>(d.a.live_at_peak));
  EXPECT_TRUE(d.same_allocator);
  EXPECT_EQ(d.peak_reserved.program(), d.peak_reserved.difference());
  EXPECT_GT(d.peak_reserved.difference(), int64_t{600} << 20);
}

// Pairs recorded on a GPU with stack frames (tools/gpu/record_diff_pairs.sh): base_b8 against the
// same job at batch 12, with a twice as wide MLP, keeping each step's output, and under
// expandable segments. Each recording's JSON names the lines its variants change.
class DiffPair : public ::testing::TestWithParam<std::string> {};

std::string pair_file(const std::string& name) {
  return "diff_pairs/" + name;
}

// The groups' labels (source lines) naming the script's line tagged `tag`.
bool names_tagged_line(const DiffGroup& g, const nlohmann::json& stats, const std::string& tag) {
  const std::string line =
      "diff_pair_job.py:" + std::to_string(stats["tagged_lines"][tag].get<int>()) + " ";
  return g.label.find(line) != std::string::npos;
}

TEST_P(DiffPair, TheSplitAddsUpToTheRecordedDifference) {
  const Trace a = read_trace_file(workload(pair_file("base_b8")));
  const Trace b = read_trace_file(workload(pair_file(GetParam())));
  const RunDiff d = diff_runs(a, b);
  const nlohmann::json sa = recorded_stats(pair_file("base_b8"));
  const nlohmann::json sb = recorded_stats(pair_file(GetParam()));
  constexpr int64_t kSegment = 2 << 20;  // the smallest segment
  const int64_t reserved =
      sb["max_memory_reserved"].get<int64_t>() - sa["max_memory_reserved"].get<int64_t>();
  const int64_t allocated =
      sb["max_memory_allocated"].get<int64_t>() - sa["max_memory_allocated"].get<int64_t>();
  EXPECT_LE(std::abs(d.peak_reserved.program() + d.peak_reserved.allocator() - reserved), kSegment);
  EXPECT_LE(std::abs(d.peak_allocated.program() + d.peak_allocated.allocator() - allocated),
            kSegment);
  EXPECT_EQ(summed_delta(d),
            static_cast<int64_t>(d.b.live_at_peak) - static_cast<int64_t>(d.a.live_at_peak));
  EXPECT_TRUE(d.sites);
}

INSTANTIATE_TEST_SUITE_P(Recorded, DiffPair,
                         ::testing::Values("base_b12", "wider_b8", "keep_b8",
                                           "base_b8_expandable"));

TEST(RunDiff, TheLinesAChangeTouchesHoldItsDifference) {
  const Trace base = read_trace_file(workload(pair_file("base_b8")));
  const nlohmann::json tags = recorded_stats(pair_file("base_b8"));
  // Each step's output kept: every byte of the difference at the peak is the block's output line.
  {
    const RunDiff d = diff_runs(base, read_trace_file(workload(pair_file("keep_b8"))));
    ASSERT_FALSE(d.groups.empty());
    EXPECT_TRUE(names_tagged_line(d.groups.front(), tags, "block output"))
        << d.groups.front().label;
    EXPECT_EQ(d.groups.front().delta_at_peak(), d.peak_allocated.difference());
    EXPECT_EQ(d.only_a + d.only_b + d.changed, 0u);  // the same requests, held longer
  }
  // A wider MLP: its weights, its activations and the optimizer's state for them.
  {
    const RunDiff d = diff_runs(base, read_trace_file(workload(pair_file("wider_b8"))));
    std::set<std::string> named;
    for (size_t i = 0; i < 6 && i < d.groups.size(); ++i) {
      for (const char* tag : {"up weights", "up activations", "gelu activations"}) {
        if (names_tagged_line(d.groups[i], tags, tag)) named.insert(tag);
      }
    }
    EXPECT_EQ(named.size(), 3u) << d.groups.front().label;
  }
  // A larger batch: the activations grow, the weights do not.
  {
    const RunDiff d = diff_runs(base, read_trace_file(workload(pair_file("base_b12"))));
    ASSERT_GE(d.groups.size(), 2u);
    EXPECT_TRUE(names_tagged_line(d.groups[0], tags, "up activations") ||
                names_tagged_line(d.groups[0], tags, "gelu activations"))
        << d.groups[0].label;
    for (const DiffGroup& g : d.groups) {
      if (names_tagged_line(g, tags, "up weights")) {
        EXPECT_EQ(g.delta_at_peak(), 0) << g.label;
      }
    }
  }
  // Expandable segments: the same requests; all of the difference the allocator's.
  {
    const RunDiff d = diff_runs(base, read_trace_file(workload(pair_file("base_b8_expandable"))));
    EXPECT_EQ(d.peak_reserved.program(), 0);
    EXPECT_LT(d.peak_reserved.allocator(), 0);
  }
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
  const RunPairing p = pair_allocations(qa, stack_sites(a), qb, stack_sites(b));
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
