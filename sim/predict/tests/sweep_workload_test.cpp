// predict against real runs: short recordings of a training job at three values of one size
// parameter (H100 or H200, PyTorch 2.11), the trace predicted at two and four times the largest,
// replayed, against the real run's max_memory_reserved at that value (its JSON; the run is not
// shipped).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "sim/predict/size_sweep.hpp"
#include "sim/replay/replay.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim {
namespace {

struct Sweep {
  std::string name;  // workloads/sweeps/NAME-V.pickle.gz
  std::vector<int64_t> values;
  int64_t to;
  // The check on the largest recording, of a model fitted on the two others: allocated bytes off
  // by at most this, and 99% of the sizes exact (BERT's workspaces look linear from two
  // recordings and saturate by the third: 97% exact, 3.4% off, and the three-recording model
  // still within 0.1% of the real runs).
  double validation_error = 0.01;
  double validation_exact = 0.99;
  // The prediction's peak reserved against the real run's. ResNet-50's batch at 2x is 1.1% low:
  // between 32 and 64 cuDNN changes the algorithm of nine convolutions and their workspaces grow
  // fourfold, which no recording up to 32 shows.
  double tolerance = 0.01;
  std::string truth = "";  // the real run's JSON when not NAME-TO.json (the same run, swept by
                           // another parameter)
};

class SweepWorkload : public ::testing::TestWithParam<Sweep> {};

TEST_P(SweepWorkload, PeakReservedWithinOnePercentOfTheRealRun) {
  const Sweep& s = GetParam();
  const std::string dir = std::string(ALLOCSIM_WORKLOADS_DIR) + "/sweeps/" + s.name + "-";
  std::vector<Trace> traces;
  for (int64_t v : s.values)
    traces.push_back(read_snapshot_file(dir + std::to_string(v) + ".pickle.gz"));
  std::vector<const Trace*> recordings;
  for (const Trace& t : traces) recordings.push_back(&t);
  const SizeSweep sweep(recordings, s.values);

  // The model checked on the largest recording, fitted on the two others.
  ASSERT_TRUE(sweep.summary().validation);
  const SweepSummary::Validation& check = *sweep.summary().validation;
  EXPECT_GE(static_cast<double>(check.exact),
            static_cast<double>(check.requests) * s.validation_exact)
      << sweep.summary_text();
  EXPECT_LT(check.bytes_error, s.validation_error) << sweep.summary_text();

  std::ifstream in(s.truth.empty()
                       ? dir + std::to_string(s.to) + ".json"
                       : std::string(ALLOCSIM_WORKLOADS_DIR) + "/sweeps/" + s.truth + ".json");
  const nlohmann::json real = nlohmann::json::parse(in);
  ReplayOptions options;
  options.capacity = real.at("total_bytes").get<uint64_t>();
  const ReplayResult r = replay(sweep.predict(s.to), options);
  EXPECT_EQ(r.outcome.ooms, 0u);
  const double predicted = static_cast<double>(r.stats.reserved_bytes[kAggregate].peak);
  const double measured = real.at("max_memory_reserved").get<double>();
  EXPECT_NEAR(predicted / measured, 1.0, s.tolerance) << predicted << " against " << measured;
}

INSTANTIATE_TEST_SUITE_P(
    Sweeps, SweepWorkload,
    ::testing::Values(Sweep{"gpt2_batch", {1, 2, 4}, 16},
                      Sweep{"llama-bf16_seq", {256, 512, 1024}, 4096},
                      // from the smallest length (the real run at 1024 is the batch sweep's 4):
                      // 90% exact from two recordings
                      Sweep{"gpt2_seq", {128, 256, 512}, 1024, 0.07, 0.89, 0.01, "gpt2_batch-4"},
                      Sweep{"bert_batch", {4, 8, 16}, 32, 0.05, 0.97},
                      Sweep{"bert_batch", {4, 8, 16}, 64, 0.05, 0.97},
                      // cuDNN's workspaces: 96% exact from two recordings
                      Sweep{"resnet50_batch", {8, 16, 32}, 64, 0.03, 0.95, 0.015},
                      Sweep{"resnet50_batch", {8, 16, 32}, 128, 0.03, 0.95},
                      // the image side: two recordings cannot tell the square growth of
                      // activations from a line
                      Sweep{"resnet50_side", {96, 128, 256}, 512, 0.35, 0.65},
                      // ConvNeXt-Tiny (H200): 94% exact from two recordings, 0.15% at 2x
                      Sweep{"convnext_batch", {16, 32, 48}, 96, 0.03, 0.94, 0.002},
                      // ViT-B/16 under fp16 autocast (H200): its reductions' staging buffers
                      // sized by PyTorch's rule, exact at 2x (docs/predict.md)
                      Sweep{"vit-fp16_batch", {8, 16, 24}, 48, 0.01, 0.98, 0.0001},
                      // and under bf16 autocast (no GradScaler): the same kernels' sizes
                      Sweep{"vit-bf16_batch", {8, 16, 24}, 48, 0.01, 0.98, 0.0001}),
    [](const auto& info) {
      std::string n = info.param.name + "_to_" + std::to_string(info.param.to);
      for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return n;
    });

}  // namespace
}  // namespace allocsim
