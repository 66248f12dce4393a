// Leaks across iterations on real traces: gpt2-leak keeps each step's logits, gpt2 does not.
#include <gtest/gtest.h>

#include "sim/report/step_analysis.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim {
namespace {

StepAnalysis analyze(const std::string& name) {
  return analyze_steps(
      read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + name + ".pickle.gz"));
}

TEST(StepAnalysis, FlagsTheLeakThatKeepsEachStepsLogits) {
  const StepAnalysis a = analyze("gpt2-leak_default_stacks");
  EXPECT_EQ(a.boundaries.size(), 6u);
  ASSERT_TRUE(a.growing);
  const double gib = static_cast<double>(1 << 30);
  EXPECT_NEAR(a.growth_bytes_per_step / gib, 1.53, 0.05);  // 8 x 1024 x 50257 fp32 logits a step
  ASSERT_FALSE(a.sites.empty());
  EXPECT_NE(a.sites[0].site.find("record_pytorch_trace.py"), std::string::npos) << a.sites[0].site;
  EXPECT_EQ(a.sites[0].steps, 5u);
}

TEST(StepAnalysis, DoesNotFlagASteadyJob) {
  for (const char* name :
       {"gpt2_default", "llama-varlen-bf16_default", "resnet50_default", "multistream_default"}) {
    const StepAnalysis a = analyze(name);
    EXPECT_FALSE(a.growing) << name << ": " << a.growth_bytes_per_step << " bytes a step";
  }
}

TEST(StepAnalysis, NoAnnotationsNoSteps) {
  Trace trace;
  trace.events.push_back(
      {.action = TraceAction::kAlloc, .addr = 1 << 20, .size = 512, .time_us = 5});
  const StepAnalysis a = analyze_steps(trace);
  EXPECT_TRUE(a.marker.empty());
  EXPECT_TRUE(a.boundaries.empty());
}

}  // namespace
}  // namespace allocsim
