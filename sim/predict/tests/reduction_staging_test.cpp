#include "sim/predict/reduction_staging.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

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

// The fit bisects on the rows per value: it holds only while no buffer falls as the rows grow.
TEST(ReductionStaging, BuffersDoNotFallAsTheRowsGrow) {
  for (const int sms : {1, 80, 108, 132}) {
    for (const int64_t columns : {1, 7, 64, 96, 768, 1000, 3072, 50257}) {
      for (const uint32_t vec : {1u, 2u, 4u}) {
        if (columns % vec != 0) continue;
        uint64_t before = 0;
        for (int64_t rows = 1; rows <= 200'000; rows += 1 + rows / 64) {
          const std::optional<StagingBytes> s = reduction_staging({columns, rows, vec, 4}, sms);
          const uint64_t buffer = s ? s->buffer : 0;
          ASSERT_GE(buffer, before) << columns << " columns, " << rows << " rows, " << sms;
          before = buffer;
        }
      }
    }
  }
}

// Shapes of every width, staged at three values (the smallest below the GPU's fill), found again
// from their buffers alone.
TEST(ReductionStaging, FindsTheShapeThatMadeTheBuffers) {
  int checked = 0;
  for (const int64_t columns : {64, 96, 768, 1000, 3072, 4096}) {
    for (const int64_t rows_per_value : {128, 197, 1024, 4096}) {
      for (const std::vector<int64_t>& values :
           {std::vector<int64_t>{1, 2, 4}, std::vector<int64_t>{8, 16, 24}}) {
        const ColumnReduction smallest{columns, rows_per_value * values.front(),
                                       columns % 4 == 0 ? 4u : 1u, 4};
        std::vector<uint64_t> buffers;
        uint64_t semaphores = 0;
        for (const int64_t v : values) {
          ColumnReduction r = smallest;
          r.rows = rows_per_value * v;
          const std::optional<StagingBytes> s = reduction_staging(r, kDefaultMultiprocessors);
          if (s) buffers.push_back(s->buffer), semaphores = s->semaphores;
        }
        // Staged at every value, and growing: the smallest below the GPU's fill.
        if (buffers.size() != values.size() || buffers[0] == buffers[1]) continue;
        const std::vector<StagingShape> fits =
            fit_staging_shapes(values, buffers, semaphores, kDefaultMultiprocessors);
        ++checked;
        const bool found = std::any_of(fits.begin(), fits.end(), [&](const StagingShape& f) {
          return f.columns == columns && f.rows_per_value == rows_per_value;
        });
        EXPECT_TRUE(found) << columns << " columns, " << rows_per_value << " rows per value at "
                           << values.front() << ".." << values.back();
      }
    }
  }
  EXPECT_EQ(checked, 24);  // of the 48: the rest stage nothing at some value, or fill the GPU
}

}  // namespace
}  // namespace allocsim
