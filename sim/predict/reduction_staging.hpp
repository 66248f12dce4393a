// The staging buffers of PyTorch's CUDA reduction kernels, as predict models them. Where a sum
// over the rows of a matrix (a bias's gradient: the sum of the output gradient over the batch and
// sequence) splits each column's rows across several blocks, the kernel allocates a buffer for the
// blocks' partial sums and then 4 bytes of semaphore per column of blocks, and frees both when it
// returns. The number of blocks per column follows the rows until it fills the GPU: it grows in
// steps with the batch and then stops, at a point set by the GPU's multiprocessors, which no line
// through the recordings shows. PyTorch's setReduceConfig (ATen/native/cuda/Reduce.cuh) is the
// rule; predict finds the reduction's shape (its columns, and its rows per unit of the size
// parameter) that reproduces every recording's sizes and applies the rule at other values.
//
// Only reductions across rows (outputs in the fastest-moving dimension) are modelled: those within
// a row (a whole-tensor sum) stage a few bytes per output, constant or nearly so.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace allocsim {

// The multiprocessors of an H100 or H200 (SXM): the GPU predict assumes unless told.
inline constexpr int kDefaultMultiprocessors = 132;

// A reduction of `rows` values into each of `columns` outputs, the columns in the fastest-moving
// dimension, `output_vec` of them written per thread (4, 2 or 1: the largest that divides the
// columns), accumulating in `accumulate_bytes` (4 for float and half, 8 for double and int64).
struct ColumnReduction {
  int64_t columns = 0;
  int64_t rows = 0;
  uint32_t output_vec = 1;
  uint32_t accumulate_bytes = 4;
};

struct StagingBytes {
  uint64_t buffer = 0;
  uint64_t semaphores = 0;
  bool operator==(const StagingBytes&) const = default;
};

// The staging allocations of the reduction on a GPU of `multiprocessors`, or nullopt where the
// kernel needs none (each column's rows fit in one block).
std::optional<StagingBytes> reduction_staging(const ColumnReduction& r, int multiprocessors);

// A reduction whose rows grow in proportion to the size parameter: rows = rows_per_value * value.
struct StagingShape {
  int64_t columns = 0;
  int64_t rows_per_value = 0;
  uint32_t output_vec = 1;
  uint32_t accumulate_bytes = 4;
  [[nodiscard]] ColumnReduction at(int64_t value) const {
    return {columns, rows_per_value * value, output_vec, accumulate_bytes};
  }
};

// Every shape that gives a staging buffer of `buffers[i]` bytes at `values[i]` (ascending), and
// `semaphore_bytes` of semaphores at all of them, on a GPU of `multiprocessors`; empty where none
// does. The columns are those whose blocks need that many semaphores; the rows per value, those
// that give each recording's buffer.
std::vector<StagingShape> fit_staging_shapes(const std::vector<int64_t>& values,
                                             const std::vector<uint64_t>& buffers,
                                             uint64_t semaphore_bytes, int multiprocessors);

}  // namespace allocsim
