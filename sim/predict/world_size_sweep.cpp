#include "sim/predict/world_size_sweep.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "sim/predict/request_alignment.hpp"
#include "sim/trace/input_error.hpp"

namespace allocsim {
namespace {

__extension__ typedef __int128 i128;

// The allocator rounds every request to 512 bytes, and a recording keeps the rounded size.
constexpr uint64_t kRounding = 512;

// The line a + b / N through (n1, s1) and (n2, s2) (n1 < n2), at n.
i128 sharded_at(int64_t n1, uint64_t s1, int64_t n2, uint64_t s2, int64_t n) {
  const i128 num = (static_cast<i128>(s1) - s2) * n1 * (n2 - n);
  const i128 den = static_cast<i128>(n) * (n2 - n1);
  const i128 q = num >= 0 ? (num + den / 2) / den : -((-num + den / 2) / den);
  return static_cast<i128>(s2) + q;
}

uint64_t rounded_size(i128 v) {
  if (v < static_cast<i128>(kRounding)) return kRounding;
  const i128 up = (v + kRounding - 1) / kRounding * kRounding;
  return up > (i128{1} << 50) ? uint64_t{1} << 50 : static_cast<uint64_t>(up);
}

// The streams of a recording in the order they first appear.
std::vector<StreamId> streams_by_appearance(const std::vector<RecordedRequest>& requests) {
  std::vector<StreamId> streams;
  for (const RecordedRequest& r : requests) {
    if (std::find(streams.begin(), streams.end(), r.stream) == streams.end())
      streams.push_back(r.stream);
  }
  return streams;
}

// Each rank is a process of its own, whose side streams (the collectives') have handles of their
// own: `r`'s streams renamed to the reference's that first appear in the same order. The default
// stream (0) stays itself.
void rename_streams(std::vector<RecordedRequest>& r, const std::vector<StreamId>& reference) {
  std::vector<StreamId> side_ref, side;
  for (StreamId s : reference)
    if (s != 0) side_ref.push_back(s);
  for (StreamId s : streams_by_appearance(r))
    if (s != 0) side.push_back(s);
  for (RecordedRequest& q : r) {
    const auto it = std::find(side.begin(), side.end(), q.stream);
    if (it == side.end()) continue;
    const size_t k = static_cast<size_t>(it - side.begin());
    if (k < side_ref.size()) q.stream = side_ref[k];
  }
}

// Among the allocations only the reference has, the shards of collectives (see kCollectiveShard):
// sizes `ranks` times apart within the rounding. The full buffer may be in the other recordings
// too (a reduce-scatter's input has the gradients' size, which a run on one rank allocates too).
void find_collective_shards(std::vector<WorldSizeSweep::Request>& requests, int64_t ranks) {
  std::vector<size_t> allocs;
  for (size_t i = 0; i < requests.size(); ++i)
    if (requests[i].action == TraceAction::kAlloc) allocs.push_back(i);
  const auto only = [&](size_t k) {
    return requests[allocs[k]].model == RankSizeModel::kOnlyInReference;
  };
  const auto times = [&](size_t shard, size_t full) {  // full ~ ranks x shard
    const i128 off = static_cast<i128>(requests[allocs[full]].sizes.back()) -
                     static_cast<i128>(requests[allocs[shard]].sizes.back()) * ranks;
    return (off < 0 ? -off : off) <= static_cast<i128>(kRounding) * ranks;
  };
  // The shard shrinks with the ranks; the full buffer, where only the reference has it, stays.
  const auto pair = [&](size_t shard, size_t full) {
    requests[allocs[shard]].model = RankSizeModel::kCollectiveShard;
    RankSizeModel& m = requests[allocs[full]].model;
    if (m == RankSizeModel::kOnlyInReference) m = RankSizeModel::kConstant;
  };
  // All-gathers first: an input right before its output, on the all-gather's stream.
  for (size_t k = 0; k + 1 < allocs.size(); ++k) {
    if (only(k) && requests[allocs[k]].stream == requests[allocs[k + 1]].stream && times(k, k + 1))
      pair(k, k + 1);
  }
  // Then reduce-scatters: an output on a side stream within two allocations after its input (a
  // gathered buffer is no reduce-scatter's output).
  for (size_t k = 0; k < allocs.size(); ++k) {
    for (size_t next = k + 1; next <= k + 2 && next < allocs.size(); ++next) {
      if (requests[allocs[next]].model == RankSizeModel::kOnlyInReference &&
          requests[allocs[next]].stream != 0 && times(next, k))
        pair(next, k);
    }
  }
}

}  // namespace

const char* to_string(RankSizeModel model) {
  switch (model) {
    case RankSizeModel::kConstant:
      return "constant";
    case RankSizeModel::kSharded:
      return "sharded";
    case RankSizeModel::kIrregular:
      return "irregular";
    case RankSizeModel::kOnlyInReference:
      return "only with the most ranks";
    case RankSizeModel::kCollectiveShard:
      return "collective shards";
  }
  return "?";
}

RankSizeModel fit_rank_size_model(const std::vector<int64_t>& ranks,
                                  const std::vector<uint64_t>& sizes) {
  const size_t n = sizes.size();
  if (std::all_of(sizes.begin(), sizes.end(), [&](uint64_t s) { return s == sizes[0]; }))
    return RankSizeModel::kConstant;
  if (n < 2) return RankSizeModel::kIrregular;
  // Through the two recordings with the most ranks, and within the rounding of every other.
  for (size_t k = 0; k + 2 < n; ++k) {
    const i128 line = sharded_at(ranks[n - 2], sizes[n - 2], ranks[n - 1], sizes[n - 1], ranks[k]);
    const i128 off = line - static_cast<i128>(sizes[k]);
    if ((off < 0 ? -off : off) > static_cast<i128>(kRounding)) return RankSizeModel::kIrregular;
  }
  return sizes[n - 2] > sizes[n - 1] ? RankSizeModel::kSharded : RankSizeModel::kIrregular;
}

uint64_t predict_rank_size(RankSizeModel model, const std::vector<int64_t>& ranks,
                           const std::vector<uint64_t>& sizes, int64_t ranks_to) {
  const size_t n = sizes.size();
  if (model == RankSizeModel::kCollectiveShard) {
    const i128 full = static_cast<i128>(sizes.back()) * ranks.back();
    return rounded_size((full + ranks_to - 1) / ranks_to);
  }
  if (model == RankSizeModel::kSharded)
    return rounded_size(
        sharded_at(ranks[n - 2], sizes[n - 2], ranks[n - 1], sizes[n - 1], ranks_to));
  if (model == RankSizeModel::kIrregular) {
    size_t nearest = 0;
    for (size_t k = 1; k < n; ++k) {
      if (std::llabs(ranks[k] - ranks_to) <= std::llabs(ranks[nearest] - ranks_to)) nearest = k;
    }
    return sizes[nearest];
  }
  return sizes.back();  // constant, or the reference's own
}

WorldSizeSweep::WorldSizeSweep(const std::vector<const Trace*>& traces,
                               const std::vector<int64_t>& ranks) {
  if (traces.size() != ranks.size())
    throw InputError("predict: " + std::to_string(traces.size()) + " recordings but " +
                     std::to_string(ranks.size()) + " world sizes in --at");
  if (traces.size() < 2) throw InputError("predict: at least two recordings are needed");
  std::vector<size_t> order(traces.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranks[a] < ranks[b]; });
  std::vector<std::vector<RecordedRequest>> requests;
  std::vector<const Trace*> sorted;
  for (size_t k : order) {
    if (ranks[k] <= 0 || ranks[k] > kMaxWorldSize)
      throw InputError("predict: world sizes must be from 1 to " + std::to_string(kMaxWorldSize));
    if (!ranks_.empty() && ranks_.back() == ranks[k])
      throw InputError("predict: the world size " + std::to_string(ranks[k]) + " is given twice");
    ranks_.push_back(ranks[k]);
    sorted.push_back(traces[k]);
    requests.push_back(recorded_requests(*traces[k]));
  }
  // The reference: the recording with the most ranks, whose program (its collectives) is the
  // one at other world sizes above one; a recording on one rank may do without them.
  const Trace& reference = *sorted.back();
  settings_ = reference.settings;
  source_ = reference.source;
  annotations_ = reference.annotations;
  const std::vector<RecordedRequest>& ref = requests.back();
  const std::vector<StreamId> ref_streams = streams_by_appearance(ref);
  std::vector<std::vector<int64_t>> matches;
  for (size_t k = 0; k + 1 < requests.size(); ++k) {
    rename_streams(requests[k], ref_streams);
    const std::vector<RecordedRequest>& r = requests[k];
    matches.push_back(align_recordings(ref, r, SizeOrder::kOtherNoSmaller, [&](size_t i, size_t j) {
      return "predict: the recordings at " + std::to_string(ranks_[k]) + " and " +
             std::to_string(ranks_.back()) +
             " ranks do not align: " + describe_request(*sorted[k], r, j) + " against " +
             describe_request(reference, ref, i);
    }));
    summary_.dropped +=
        r.size() - static_cast<size_t>(std::count_if(matches.back().begin(), matches.back().end(),
                                                     [](int64_t m) { return m >= 0; }));
  }
  summary_.recordings = requests.size();
  for (size_t i = 0; i < ref.size(); ++i) {
    Request q{ref[i].action,
              ref[i].stream,
              ref[i].addr,
              ref[i].alloc,
              {},
              {},
              RankSizeModel::kConstant,
              ref[i].event < 0 ? 0 : reference.events[static_cast<size_t>(ref[i].event)].time_us};
    if (q.action == TraceAction::kAlloc) {
      for (size_t k = 0; k + 1 < requests.size(); ++k) {
        const int64_t m = matches[k][i];
        if (m < 0) continue;
        q.ranks.push_back(ranks_[k]);
        q.sizes.push_back(requests[k][static_cast<size_t>(m)].size);
      }
      q.ranks.push_back(ranks_.back());
      q.sizes.push_back(ref[i].size);
      q.model = q.sizes.size() == 1 ? RankSizeModel::kOnlyInReference
                                    : fit_rank_size_model(q.ranks, q.sizes);
    }
    requests_.push_back(std::move(q));
  }
  if (ranks_.back() > 1) find_collective_shards(requests_, ranks_.back());
  for (const Request& q : requests_) {
    if (q.action != TraceAction::kAlloc) continue;
    ++summary_.allocations;
    ++summary_.models[static_cast<size_t>(q.model)];
    if (q.model == RankSizeModel::kOnlyInReference)
      summary_.only_in_reference_bytes += q.sizes.back();
  }
  if (ranks_.size() >= 3) {
    WorldSizeSummary::Validation check;
    check.ranks = ranks_.back();
    double off = 0, total = 0;
    for (const Request& q : requests_) {
      if (q.action != TraceAction::kAlloc || q.sizes.size() < 2) continue;
      const std::vector<int64_t> at(q.ranks.begin(), q.ranks.end() - 1);
      const std::vector<uint64_t> known(q.sizes.begin(), q.sizes.end() - 1);
      const uint64_t predicted =
          predict_rank_size(fit_rank_size_model(at, known), at, known, check.ranks);
      ++check.allocations;
      check.exact += predicted == q.sizes.back();
      off += std::fabs(static_cast<double>(predicted) - static_cast<double>(q.sizes.back()));
      total += static_cast<double>(q.sizes.back());
    }
    check.bytes_error = total > 0 ? off / total : 0;
    summary_.validation = check;
  }
}

Trace WorldSizeSweep::predict(int64_t ranks_to) const {
  if (ranks_to <= 0 || ranks_to > kMaxWorldSize)
    throw InputError("predict: --world-size must be from 1 to " + std::to_string(kMaxWorldSize));
  Trace t;
  t.source = source_ + " predicted at " + std::to_string(ranks_to) + " ranks";
  t.addresses_recorded = false;
  t.settings = settings_;
  t.annotations = annotations_;
  append_requests(t, requests_, [&](size_t i) {
    const Request& q = requests_[i];
    return predict_rank_size(q.model, q.ranks, q.sizes, ranks_to);
  });
  return t;
}

std::string WorldSizeSweep::summary_text() const {
  std::string ranks;
  for (int64_t n : ranks_) ranks += (ranks.empty() ? "" : ", ") + std::to_string(n);
  std::string out = "predict: " + std::to_string(summary_.recordings) + " recordings at " + ranks +
                    " ranks; " + std::to_string(summary_.allocations) +
                    " allocations aligned to the one at " + std::to_string(ranks_.back()) + ":";
  for (size_t m = 0; m < kRankSizeModels; ++m) {
    out += std::string(m ? ", " : " ") + std::to_string(summary_.models[m]) + " " +
           to_string(static_cast<RankSizeModel>(m));
  }
  out += "\n";
  if (summary_.models[static_cast<size_t>(RankSizeModel::kOnlyInReference)] > 0) {
    char bytes[32];
    std::snprintf(bytes, sizeof bytes, "%.2f MiB",
                  static_cast<double>(summary_.only_in_reference_bytes) / (1 << 20));
    out += std::to_string(summary_.models[static_cast<size_t>(RankSizeModel::kOnlyInReference)]) +
           " allocations (" + bytes + ") are in the recording at " + std::to_string(ranks_.back()) +
           " ranks only and pair with no buffer N times their size: held at their size there, "
           "whether they shrink with the ranks or not; a second recording on more than one rank "
           "settles them\n";
  }
  if (summary_.dropped)
    out += std::to_string(summary_.dropped) +
           " requests of the recordings with fewer ranks have no counterpart (left out)\n";
  if (summary_.validation) {
    const WorldSizeSummary::Validation& v = *summary_.validation;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4f%%", 100 * v.bytes_error);
    out += "validated on the recording at " + std::to_string(v.ranks) +
           " ranks (fitted on the others): " + std::to_string(v.exact) + " of " +
           std::to_string(v.allocations) + " sizes exact, allocated bytes off by " + buf + "\n";
  } else {
    out += "not validated: a third recording would check the model on one it was not fitted on\n";
  }
  return out;
}

}  // namespace allocsim
