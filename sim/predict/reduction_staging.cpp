#include "sim/predict/reduction_staging.hpp"

#include <algorithm>
#include <set>
#include <utility>

namespace allocsim {
namespace {

constexpr int64_t kMaxThreads = 512;        // mnt_wrapper<T>::MAX_NUM_THREADS, real types
constexpr int64_t kMaxThreadsPerSm = 2048;  // sm70 to sm90
constexpr int64_t kWarp = 32;
constexpr int64_t kMinValuesPerThread = 16;
constexpr int64_t kMaxValuesPerThread = 256;
constexpr uint64_t kMaxSemaphoreBytes = 1 << 20;  // beyond any reduction's grid

int64_t div_up(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

int64_t last_pow2(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// The block of a column reduction: its width (columns, output_vec at a time) and height (rows).
struct Block {
  int64_t width;
  int64_t height;
};

Block block_of(const ColumnReduction& r) {
  const int64_t max_threads = kMaxThreads / r.output_vec;
  const int64_t dim0 = r.columns / r.output_vec, dim1 = r.rows;
  const int64_t dim0_pow2 = dim0 < max_threads ? last_pow2(dim0) : max_threads;
  const int64_t dim1_pow2 = dim1 < max_threads ? last_pow2(dim1) : max_threads;
  Block b{std::min(dim0_pow2, kWarp), 0};
  b.height = std::min(dim1_pow2, max_threads / b.width);
  b.width = std::min(dim0_pow2, max_threads / b.height);
  return b;
}

uint32_t natural_output_vec(int64_t columns) {
  uint32_t vec = 4;
  while (columns % vec != 0) vec /= 2;
  return vec;
}

// The staging buffer of `shape` at `value`, or 0 where it stages nothing. It does not fall as the
// rows grow: under a block's worth of rows nothing is staged, and from there the block is fixed
// and the blocks per column only grow (with the rows, up to the GPU's fill).
uint64_t buffer_at(const StagingShape& shape, int64_t value, int multiprocessors) {
  const std::optional<StagingBytes> s = reduction_staging(shape.at(value), multiprocessors);
  return s ? s->buffer : 0;
}

// The first r in [lo, hi) at which `below` no longer holds, hi where it holds throughout; `below`
// holds up to some r and from there on not.
template <typename Below>
int64_t first_not_below(int64_t lo, int64_t hi, const Below& below) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (below(mid))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// The rows per value, within [1, end], at which every recording's buffer is the one it recorded:
// [first, last], empty (first > last) where none. Found by bisection, the buffers being monotone
// in the rows.
std::pair<int64_t, int64_t> rows_per_value_giving(const StagingShape& shape,
                                                  const std::vector<int64_t>& values,
                                                  const std::vector<uint64_t>& buffers,
                                                  int multiprocessors, int64_t end) {
  int64_t first = 1, last = end;
  for (size_t i = 0; i < values.size() && first <= last; ++i) {
    const auto buffer = [&](int64_t r) {
      StagingShape at = shape;
      at.rows_per_value = r;
      return buffer_at(at, values[i], multiprocessors);
    };
    // The first r whose buffer is not below the recording's, and the first whose is above it.
    const int64_t from =
        first_not_below(first, last + 1, [&](int64_t r) { return buffer(r) < buffers[i]; });
    last = first_not_below(from, last + 1, [&](int64_t r) { return buffer(r) <= buffers[i]; }) - 1;
    first = from;
  }
  return {first, last};
}

int64_t max_end(const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  int64_t end = 0;
  for (const auto& [lo, hi] : ranges) end = std::max(end, hi);
  return end;
}

// The values within [first, last] that lie in any of `ranges` (inclusive), ascending.
std::vector<int64_t> in_ranges(std::vector<std::pair<int64_t, int64_t>> ranges, int64_t first,
                               int64_t last) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<int64_t> out;
  int64_t next = first;  // the least value not yet listed
  for (const auto& [lo, hi] : ranges) {
    for (int64_t r = std::max(lo, next); r <= std::min(hi, last); ++r) out.push_back(r);
    next = std::max(next, hi + 1);
  }
  return out;
}

}  // namespace

std::optional<StagingBytes> reduction_staging(const ColumnReduction& r, int multiprocessors) {
  if (r.columns < r.output_vec || r.rows < 1 || r.output_vec < 1 || multiprocessors < 1)
    return std::nullopt;
  const Block b = block_of(r);
  // The columns are split across the block's lanes; its rows across its warps where that leaves
  // each thread 16 values or more, and then across blocks.
  int64_t step_output = b.width, step_input = 1;
  const bool split_across_warps = r.rows >= std::min(b.height * 16, kMaxValuesPerThread);
  if (split_across_warps) {
    step_input = b.height;
  } else {
    step_output *= b.height;
  }
  const int64_t grid = div_up(r.columns / r.output_vec, step_output);
  const int64_t target = multiprocessors * (kMaxThreadsPerSm / (b.width * b.height));
  const int64_t values = div_up(r.rows, step_input);
  if (!split_across_warps || values < kMaxValuesPerThread || grid > target) return std::nullopt;
  const int64_t ctas = std::max(std::min(div_up(target, grid), div_up(values, kMinValuesPerThread)),
                                div_up(values, kMaxValuesPerThread));
  if (ctas <= 1) return std::nullopt;
  return StagingBytes{static_cast<uint64_t>(r.accumulate_bytes) * static_cast<uint64_t>(r.columns) *
                          static_cast<uint64_t>(ctas) * static_cast<uint64_t>(b.width) *
                          r.output_vec,
                      4 * static_cast<uint64_t>(grid)};
}

std::vector<StagingShape> fit_staging_shapes(const std::vector<int64_t>& values,
                                             const std::vector<uint64_t>& buffers,
                                             uint64_t semaphore_bytes, int multiprocessors) {
  std::vector<StagingShape> fits;
  if (values.empty() || values.size() != buffers.size() || semaphore_bytes % 4 != 0 ||
      semaphore_bytes == 0 || semaphore_bytes > kMaxSemaphoreBytes || values.front() < 1)
    return fits;
  const int64_t grid = static_cast<int64_t>(semaphore_bytes / 4);
  // A grid of `grid` blocks across covers the columns (output_vec at a time) in steps of a warp's
  // lanes, or of fewer where there are fewer than a warp's worth (a grid of 1 or 2): the columns
  // lie within the last step, up to 4 x 32 of them for each output_vec, or among the first 256.
  std::set<int64_t> columns_tried;
  for (int64_t columns = 1; columns <= std::min<int64_t>(256, grid * kWarp * 4); ++columns)
    columns_tried.insert(columns);
  for (int64_t vec : {1, 2, 4}) {
    for (int64_t columns = (grid - 1) * kWarp * vec + 1; columns <= grid * kWarp * vec; ++columns)
      columns_tried.insert(columns);
  }
  for (uint32_t accumulate : {4u, 8u}) {
    for (int64_t columns : columns_tried) {
      const uint32_t vec = natural_output_vec(columns);
      // The block of many rows (the only one that stages): as wide as the columns allow, up to
      // a warp, and its blocks across the columns the semaphores' grid.
      const int64_t width = std::min(last_pow2(columns / vec), kWarp);
      const int64_t height = kMaxThreads / vec / width;
      if (div_up(columns / vec, width) != grid) continue;
      const bool divides = std::all_of(buffers.begin(), buffers.end(), [&](uint64_t s) {
        return s % (static_cast<uint64_t>(accumulate) * static_cast<uint64_t>(columns)) == 0;
      });
      if (!divides) continue;
      // The rows per value that give each recording's blocks per column, below the GPU's fill
      // (a thread's 16 values) or above it (its 256): a range around each, the union tried.
      const uint64_t unit = static_cast<uint64_t>(accumulate) * static_cast<uint64_t>(columns) *
                            static_cast<uint64_t>(width) * vec;
      std::vector<std::pair<int64_t, int64_t>> ranges;
      for (size_t i = 0; i < values.size(); ++i) {
        if (buffers[i] % unit != 0) continue;
        const int64_t ctas = static_cast<int64_t>(buffers[i] / unit);
        for (int64_t per : {kMinValuesPerThread, kMaxValuesPerThread}) {
          const int64_t lo = (ctas - 1) * per * height / values[i];
          const int64_t hi = ctas * per * height / values[i] + 1;
          ranges.emplace_back(std::max<int64_t>(lo, 1), hi);
        }
      }
      if (ranges.empty()) continue;
      const StagingShape shape{columns, 0, vec, accumulate};
      const auto [first, last] =
          rows_per_value_giving(shape, values, buffers, multiprocessors, max_end(ranges));
      for (int64_t r : in_ranges(ranges, first, last)) {
        StagingShape fit = shape;
        fit.rows_per_value = r;
        bool all = true;
        for (size_t i = 0; i < values.size() && all; ++i) {
          const std::optional<StagingBytes> s =
              reduction_staging(fit.at(values[i]), multiprocessors);
          all = s && s->buffer == buffers[i] && s->semaphores == semaphore_bytes;
        }
        if (all) fits.push_back(fit);
      }
    }
  }
  return fits;
}

}  // namespace allocsim
