// Predicting a trace at a size the job was not recorded at (a batch size, a sequence length):
// recordings of the same program at several values of one size parameter are aligned request by
// request, each request's size is modelled as the simplest function of the value that reproduces
// every recording exactly, and the model writes the request stream at any other value, which the
// replay then runs like a recording (fragmentation, rounding and segment sizes and all).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/predict/reduction_staging.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

// The largest value of the size parameter (a batch size, a sequence length, tokens per step).
inline constexpr int64_t kMaxValue = int64_t{1} << 24;

// How a request's size follows the value, simplest first.
enum class SizeModel : uint8_t {
  kConstant,
  kLinear,      // a + b * value
  kSaturating,  // grows, then stops (the two largest recordings agree): a workspace
  kQuadratic,   // a + b * value + c * value^2 (attention over the sequence without fused kernels)
  // Growing, but on no line or parabola through every recording: a workspace with a floor, or
  // one whose kernel changes with the size (cuDNN's). Between recordings, the line between its
  // neighbours; beyond the largest, the line through the two largest, the latest growth.
  kLatestGrowth,
  kIrregular,  // none of the above reproduces every recording: the nearest recording's size
  // A reduction kernel's staging buffer (an allocation followed by its semaphores, both freed
  // before the next allocation): PyTorch's rule on the reduction's shape that reproduces every
  // recording (reduction_staging.hpp). Taken before any of the above.
  kReductionStaging,
};
inline constexpr size_t kSizeModels = 7;
const char* to_string(SizeModel model);

struct SweepSummary {
  size_t recordings = 0;
  size_t requests = 0;      // allocations, the blocks alive at the start included
  size_t in_some_only = 0;  // allocations of the largest recording that some others lack
  size_t dropped = 0;       // requests of the smaller recordings that the largest lacks
  std::array<size_t, kSizeModels> models{};  // allocations by model
  // With three recordings or more: the model fitted on all but the largest recording, checked on
  // that one.
  struct Validation {
    int64_t value = 0;
    size_t exact = 0;  // allocations whose size it predicted exactly
    size_t requests = 0;
    double bytes_error = 0;  // |predicted - recorded| / recorded, over all allocated bytes
  };
  std::optional<Validation> validation;
  // The values whose recording is a window of its run: its history starts in the middle of a
  // step, freeing blocks allocated before its first event (a bounded max_entries, a recording
  // begun after warm-up). Aligned as whole runs are, each window may cover another part of the
  // step from another cached state: said in the summary. A history begun after the model was
  // set up (its parameters alive throughout) is no window.
  std::vector<int64_t> windows;
  // Each recording's memory cached but free where its history starts (reserved less allocated
  // at its first event), by value. Where they differ by more than a large segment, steps at
  // each size ran before the history (a recording begun after warm-up): the prediction starts
  // from the largest recording's cache, made for its size (warm_starts_differ).
  std::vector<std::pair<int64_t, uint64_t>> cached_at_start;
  bool warm_starts_differ() const;
};

// How the allocations whose size beyond the largest recording is a guess are sized there: as
// their model continues them (kLatestGrowth: the line through the two largest recordings), or
// held at their size in the largest recording (none is smaller, sizes growing with the value).
// A kernel whose size changed between the recordings may go either way: the two bound what the
// recordings can tell, and a recording at a larger value settles them.
enum class GuessedSizes : uint8_t { kContinued, kHeld };

// The allocations whose size at a value is a guess, and their bytes summed each way.
struct SizeGuess {
  size_t allocations = 0;
  uint64_t continued_bytes = 0;
  uint64_t held_bytes = 0;
  [[nodiscard]] uint64_t at_stake() const {
    return continued_bytes > held_bytes ? continued_bytes - held_bytes : 0;
  }
};

class SizeSweep {
 public:
  // `traces[i]` recorded at `values[i]` (distinct, any order). Each recording is aligned to the
  // largest one: requests in the same order, on the same streams, each free of the same
  // allocation, with runs of requests present in one only skipped (kernels chosen by size).
  // Throws InputError naming the first request of each that cannot be matched.
  // `multiprocessors`: the GPU's, which sets where the reductions' staging buffers stop growing.
  SizeSweep(const std::vector<const Trace*>& traces, const std::vector<int64_t>& values,
            int multiprocessors = kDefaultMultiprocessors);

  // The request stream at `value` (1 to kMaxValue), with the largest recording's allocator
  // settings. Where that recording starts mid-run and the blocks alive at its start keep their
  // sizes at `value` (parameters, optimizer state), the trace starts from its segments as they
  // were then (`segments`, from which the replay reconstructs its start: the layout of those
  // blocks in their segments decides what fits beside them); else the blocks are allocated first,
  // by address, and the trace holds its whole history.
  Trace predict(int64_t value, GuessedSizes guessed = GuessedSizes::kContinued) const;
  // Beyond the largest recording: the allocations of kLatestGrowth whose continued size is not
  // their held one (none within the recordings' range), and those of kReductionStaging whose
  // shapes that fit the recordings disagree at the value (held: the smallest of their sizes).
  [[nodiscard]] SizeGuess guessed_at(int64_t value) const;
  const SweepSummary& summary() const { return summary_; }
  const std::vector<int64_t>& values() const { return values_; }  // ascending
  int multiprocessors() const { return multiprocessors_; }
  std::string summary_text() const;

  // One request of the aligned stream (exposed for tests).
  struct Request {
    TraceAction action;  // kAlloc, kFreeRequested or kFreeCompleted
    StreamId stream;
    uint64_t addr;       // the largest recording's: the replay pairs frees with allocs by it
    int64_t alloc = -1;  // a free: the index of its allocation in the stream
    // An allocation: its size in each recording that has it (ascending values).
    std::vector<int64_t> values;
    std::vector<uint64_t> sizes;
    SizeModel model = SizeModel::kConstant;
    uint64_t time_us = 0;  // the largest recording's (0 for a block alive at its start)
    // kReductionStaging: the shapes that reproduce every recording, the first the one written
    // (the most rows per value: the recordings' rows filling their last block).
    std::vector<StagingShape> staging;
  };
  const std::vector<Request>& requests() const { return requests_; }

 private:
  // A request's size at `value`, and the range its fits span (kReductionStaging).
  uint64_t size_at(const Request& q, int64_t value, GuessedSizes guessed) const;

  std::vector<int64_t> values_;  // ascending
  int multiprocessors_ = kDefaultMultiprocessors;
  std::vector<Request> requests_;
  std::optional<AllocConf> settings_;
  std::vector<Annotation> annotations_;  // the largest recording's: its step structure
  // The largest recording's segments at its first event, and how many of the requests (the first
  // ones) are the blocks alive in them then.
  std::vector<SnapshotSegment> initial_segments_;
  size_t initial_blocks_ = 0;
  std::string source_;
  SweepSummary summary_;
};

// The model of one request's sizes `sizes[i]` at `values[i]` (ascending), and its size at `value`.
SizeModel fit_size_model(const std::vector<int64_t>& values, const std::vector<uint64_t>& sizes);
uint64_t predict_size(SizeModel model, const std::vector<int64_t>& values,
                      const std::vector<uint64_t>& sizes, int64_t value);

}  // namespace allocsim
