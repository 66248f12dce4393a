// Per-rank memory at another world size: recordings of one rank of a data-parallel job (FSDP,
// DDP) at several world sizes are aligned request by request to the one with the most ranks, each
// allocation's size is modelled as constant (activations, full all-gather and reduce-scatter
// buffers) or sharded, a + b / N (parameters, gradients and optimizer state split over the ranks,
// the shards of the collectives' buffers), and the model writes that rank's request stream at
// any other world size, which replay and plan read like a recording.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/trace/trace.hpp"

namespace allocsim {

// The most ranks a prediction is made for.
inline constexpr int64_t kMaxWorldSize = int64_t{1} << 20;

// How an allocation's size follows the world size N.
enum class RankSizeModel : uint8_t {
  kConstant,
  kSharded,    // a + b / N, through the two recordings with the most ranks that have it
  kIrregular,  // neither reproduces every recording: the nearest recording's size
  // Only in the recording with the most ranks (a collective's buffer that a run on one rank does
  // without): held at that size, which a second recording with that many ranks would settle.
  kOnlyInReference,
  // Only in the recording with the most ranks, and a collective's shard by its rule: allocated
  // next to the full buffer, N times its size (an all-gather's input right before its output on
  // the all-gather's stream, a reduce-scatter's output on its side stream right after its input).
  // Its size times N is the full buffer's, which stays.
  kCollectiveShard,
};
inline constexpr size_t kRankSizeModels = 5;
const char* to_string(RankSizeModel model);

// The model of one allocation's sizes `sizes[i]` at world sizes `ranks[i]` (ascending, distinct),
// and its size at `ranks_to`. Sizes in a recording are rounded to the allocator's 512 bytes, so a
// sharded size lies within 512 bytes of its line. (kOnlyInReference and kCollectiveShard are set
// by the sweep, from the order of the allocations.)
RankSizeModel fit_rank_size_model(const std::vector<int64_t>& ranks,
                                  const std::vector<uint64_t>& sizes);
uint64_t predict_rank_size(RankSizeModel model, const std::vector<int64_t>& ranks,
                           const std::vector<uint64_t>& sizes, int64_t ranks_to);

struct WorldSizeSummary {
  size_t recordings = 0;
  size_t allocations = 0;  // of the recording with the most ranks
  std::array<size_t, kRankSizeModels> models{};
  uint64_t only_in_reference_bytes = 0;  // the kOnlyInReference allocations' bytes, summed
  size_t dropped = 0;  // requests of the other recordings that the reference lacks
  // With three recordings or more: the model fitted on all but the one with the most ranks,
  // checked on that one.
  struct Validation {
    int64_t ranks = 0;
    size_t exact = 0;  // allocations whose size it predicted to the byte
    size_t allocations = 0;
    double bytes_error = 0;  // |predicted - recorded| / recorded, over all allocated bytes
  };
  std::optional<Validation> validation;
};

class WorldSizeSweep {
 public:
  // `traces[i]`: one rank's recording at world size `ranks[i]` (distinct, any order; at least
  // two). Throws InputError where the recordings do not align (not the same program).
  WorldSizeSweep(const std::vector<const Trace*>& traces, const std::vector<int64_t>& ranks);

  // That rank's request stream at `ranks_to` ranks (1 to kMaxWorldSize): a whole trace with the
  // settings and step annotations of the recording with the most ranks.
  [[nodiscard]] Trace predict(int64_t ranks_to) const;

  const std::vector<int64_t>& ranks() const { return ranks_; }  // ascending
  const WorldSizeSummary& summary() const { return summary_; }
  std::string summary_text() const;

  // One request of the aligned stream, as SizeSweep's.
  struct Request {
    TraceAction action;
    StreamId stream;
    uint64_t addr;       // the reference recording's
    int64_t alloc = -1;  // a free: the index of its allocation in the stream
    // An allocation: its size in each recording that has it (ascending world sizes).
    std::vector<int64_t> ranks;
    std::vector<uint64_t> sizes;
    RankSizeModel model = RankSizeModel::kConstant;
    uint64_t time_us = 0;
  };
  const std::vector<Request>& requests() const { return requests_; }

 private:
  std::vector<int64_t> ranks_;  // ascending
  std::vector<Request> requests_;
  std::optional<AllocConf> settings_;
  std::vector<Annotation> annotations_;  // the reference recording's: its step structure
  std::string source_;
  WorldSizeSummary summary_;
};

}  // namespace allocsim
