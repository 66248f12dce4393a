// predict against real runs: short recordings of a training job at three values of one size
// parameter (H100, PyTorch 2.11), the trace predicted at four times the largest, replayed, against
// the real run's max_memory_reserved at that value (its JSON; the run itself is not shipped).
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
  EXPECT_GE(check.exact * 100, check.requests * 99) << sweep.summary_text();
  EXPECT_LT(check.bytes_error, 0.01) << sweep.summary_text();

  std::ifstream in(dir + std::to_string(s.to) + ".json");
  const nlohmann::json real = nlohmann::json::parse(in);
  ReplayOptions options;
  options.capacity = real.at("total_bytes").get<uint64_t>();
  const ReplayResult r = replay(sweep.predict(s.to), options);
  EXPECT_EQ(r.outcome.ooms, 0u);
  const double predicted = static_cast<double>(r.stats.reserved_bytes[kAggregate].peak);
  const double measured = real.at("max_memory_reserved").get<double>();
  EXPECT_NEAR(predicted / measured, 1.0, 0.01) << predicted << " against " << measured;
}

INSTANTIATE_TEST_SUITE_P(Sweeps, SweepWorkload,
                         ::testing::Values(Sweep{"gpt2_batch", {1, 2, 4}, 16},
                                           Sweep{"llama-bf16_seq", {256, 512, 1024}, 4096}),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           for (char& c : n)
                             c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

}  // namespace
}  // namespace allocsim
