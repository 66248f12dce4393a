#include "sim/predict/reduction_staging.hpp"

#include <gtest/gtest.h>

namespace allocsim {
namespace {

// ViT-B/16's bias gradients (fp16 autocast, recorded on an H200): 768, 2304 and 3072 columns
// summed over 197 rows per image. The buffers grow with ceil(rows / 64) blocks per column until
// the blocks fill the GPU's 132 multiprocessors (16 blocks of 128 threads each).
TEST(ReductionStaging, FollowsSetReduceConfig) {
  const auto at = [](int64_t columns, int64_t rows, int sms = kDefaultMultiprocessors) {
    return reduction_staging({columns, rows, 4, 4}, sms);
  };
  EXPECT_EQ(at(768, 8 * 197), (StagingBytes{9'830'400, 24}));           // 25 blocks per column
  EXPECT_EQ(at(768, 48 * 197), (StagingBytes{58'195'968, 24}));         // 148
  EXPECT_EQ(at(3072, 24 * 197), (StagingBytes{116'391'936, 96}));       // 74
  EXPECT_EQ(at(3072, 48 * 197), (StagingBytes{138'412'032, 96}));       // 88: the GPU is full
  EXPECT_EQ(at(3072, 48 * 197, 108), (StagingBytes{113'246'208, 96}));  // 72 on an A100
  EXPECT_EQ(at(768, 1000), std::nullopt);  // each column's rows in one block
}

TEST(ReductionStaging, FitsTheShapeThatReproducesEveryRecording) {
  // 768 columns at batch 8, 16 and 24: 197 rows per image and no other count of them.
  const std::vector<StagingShape> fits =
      fit_staging_shapes({8, 16, 24}, {9'830'400, 19'660'800, 29'097'984}, 24, 132);
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0].columns, 768);
  EXPECT_EQ(fits[0].rows_per_value, 197);
  EXPECT_EQ(fits[0].output_vec, 4u);
  // Sizes no reduction stages: none.
  EXPECT_TRUE(
      fit_staging_shapes({8, 16, 24}, {9'830'401, 19'660'800, 29'097'984}, 24, 132).empty());
  EXPECT_TRUE(fit_staging_shapes({8, 16}, {9'830'400, 19'660'800}, 6, 132).empty());
}

}  // namespace
}  // namespace allocsim
