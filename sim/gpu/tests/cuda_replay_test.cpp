// replay --backend cuda on shipped workloads. Skips (and passes) where there is no GPU.
#include "sim/gpu/cuda_replay.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include "sim/trace/trace_file.hpp"

namespace allocsim {
namespace {

// The GPU machine gets binaries built elsewhere: the workloads' path can be given at run time.
Trace read_workload(const std::string& name) {
  const char* dir = std::getenv("ALLOCSIM_WORKLOADS_DIR");
  return read_trace_file(std::string(dir ? dir : ALLOCSIM_WORKLOADS_DIR) + "/" + name +
                         ".pickle.gz");
}

class CudaReplayTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda_device_count(&why) == 0) GTEST_SKIP() << "no GPU: " << why;
  }
};

TEST_P(CudaReplayTest, GpuRunEqualsTheSimulation) {
  const Trace trace = read_workload(GetParam());
  const CudaReplayComparison c = replay_on_cuda(trace, ReplayOptions{}, CudaReplayOptions{});
  EXPECT_TRUE(c.ops.identical()) << cuda_replay_text(c);
  EXPECT_GT(c.ops.right_count, 0u);
  EXPECT_EQ(c.patterns.bad_words, 0u);
  EXPECT_GT(c.patterns.checks, 0u);
  EXPECT_FALSE(c.leaked()) << cuda_replay_text(c);
  EXPECT_EQ(c.gpu.stats.reserved_bytes[kAggregate].peak,
            c.simulated.stats.reserved_bytes[kAggregate].peak);
  EXPECT_TRUE(c.confirmed());
}

INSTANTIATE_TEST_SUITE_P(Workloads, CudaReplayTest,
                         ::testing::Values("multistream_default", "gpt2_expandable",
                                           "resnet50_default"));

TEST_F(CudaReplayTest, CapThatOomsInSimulationOomsOnTheGpu) {
  const Trace trace = read_workload("resnet50_default");
  ReplayOptions options;
  options.memory_limit = uint64_t{2} << 30;
  options.on_oom = OnOom::kContinue;
  const CudaReplayComparison c = replay_on_cuda(trace, options, CudaReplayOptions{});
  EXPECT_GT(c.gpu.outcome.ooms, 0u);
  EXPECT_EQ(c.gpu.outcome.ooms, c.simulated.outcome.ooms);
  EXPECT_TRUE(c.confirmed()) << cuda_replay_text(c);
}

}  // namespace
}  // namespace allocsim
