#include "sim/predict/size_sweep.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <unordered_map>

#include "core/format_size.hpp"
#include "sim/predict/request_alignment.hpp"
#include "sim/trace/input_error.hpp"

namespace allocsim {
namespace {

__extension__ typedef __int128 i128;  // products of sizes and values

// The products of the models stay within 128 bits for values up to kMaxValue and sizes up to
// kMaxSize (1 PiB: beyond any device); a larger recorded size is left to the nearest recording.
constexpr uint64_t kMaxSize = uint64_t{1} << 50;

uint64_t clamp_size(i128 v) {
  return v < 1 ? 1 : v > kMaxSize ? kMaxSize : static_cast<uint64_t>(v);
}

// Rounds num / den to the nearest integer (den > 0).
i128 divide_rounded(i128 num, i128 den) {
  return num >= 0 ? (num + den / 2) / den : -((-num + den / 2) / den);
}

bool linear_through(const std::vector<int64_t>& v, const std::vector<uint64_t>& s) {
  const i128 dv = v[1] - v[0], ds = static_cast<i128>(s[1]) - s[0];
  for (size_t k = 2; k < v.size(); ++k) {
    if ((static_cast<i128>(s[k]) - s[0]) * dv != ds * (v[k] - v[0])) return false;
  }
  return true;
}

// The quadratic through the first three points, times D = (v0-v1)(v0-v2)(v1-v2), at x.
i128 quadratic_times_d(const std::vector<int64_t>& v, const std::vector<uint64_t>& s, int64_t x) {
  const i128 x0 = x - v[0], x1 = x - v[1], x2 = x - v[2];
  return static_cast<i128>(s[0]) * x1 * x2 * (v[1] - v[2]) -
         static_cast<i128>(s[1]) * x0 * x2 * (v[0] - v[2]) +
         static_cast<i128>(s[2]) * x0 * x1 * (v[0] - v[1]);
}

i128 quadratic_d(const std::vector<int64_t>& v) {
  return static_cast<i128>(v[0] - v[1]) * (v[0] - v[2]) * (v[1] - v[2]);
}

}  // namespace

const char* to_string(SizeModel model) {
  switch (model) {
    case SizeModel::kConstant:
      return "constant";
    case SizeModel::kLinear:
      return "linear";
    case SizeModel::kSaturating:
      return "saturating";
    case SizeModel::kQuadratic:
      return "quadratic";
    case SizeModel::kLatestGrowth:
      return "latest growth";
    case SizeModel::kIrregular:
      return "irregular";
    case SizeModel::kReductionStaging:
      return "reduction staging";
  }
  return "?";
}

SizeModel fit_size_model(const std::vector<int64_t>& values, const std::vector<uint64_t>& sizes) {
  const size_t n = sizes.size();
  if (std::any_of(sizes.begin(), sizes.end(), [](uint64_t s) { return s > kMaxSize; }))
    return SizeModel::kIrregular;
  if (std::all_of(sizes.begin(), sizes.end(), [&](uint64_t s) { return s == sizes[0]; }))
    return SizeModel::kConstant;
  if (n < 2) return SizeModel::kIrregular;
  if (linear_through(values, sizes)) return SizeModel::kLinear;
  if (sizes[n - 1] == sizes[n - 2] && std::is_sorted(sizes.begin(), sizes.end()))
    return SizeModel::kSaturating;
  // Three points always lie on a parabola: only one that grows ever faster (as attention over the
  // sequence does) is taken for one.
  const auto growing_faster = [&] {
    const i128 left = (static_cast<i128>(sizes[1]) - sizes[0]) * (values[2] - values[1]);
    const i128 right = (static_cast<i128>(sizes[2]) - sizes[1]) * (values[1] - values[0]);
    return sizes[0] < sizes[1] && sizes[1] < sizes[2] && right > left;
  };
  // The line through the two largest recordings, where it crosses zero: near it, the size grows
  // in proportion to the value from there on (a buffer over the batch above a floor); far below
  // it, the growth itself grows (attention's square of the sequence).
  const auto through_origin = [&] {
    const i128 dv = values[n - 1] - values[n - 2];
    const i128 at_zero = static_cast<i128>(sizes[n - 1]) * dv -
                         (static_cast<i128>(sizes[n - 1]) - sizes[n - 2]) * values[n - 1];
    return (at_zero < 0 ? -at_zero : at_zero) * 10 <= static_cast<i128>(sizes[n - 1]) * dv;
  };
  if (n >= 3 && growing_faster()) {
    const i128 d = quadratic_d(values);
    bool all = true;
    for (size_t k = 3; k < n && all; ++k)
      all = quadratic_times_d(values, sizes, values[k]) == static_cast<i128>(sizes[k]) * d;
    if (all) return through_origin() ? SizeModel::kLatestGrowth : SizeModel::kQuadratic;
  }
  // Growing at every step: the latest growth goes on. (Flat, then a jump, is more likely two
  // different buffers aligned by their order than one that grows.)
  if (std::adjacent_find(sizes.begin(), sizes.end(), std::greater_equal<uint64_t>()) == sizes.end())
    return SizeModel::kLatestGrowth;
  return SizeModel::kIrregular;
}

uint64_t predict_size(SizeModel model, const std::vector<int64_t>& v,
                      const std::vector<uint64_t>& s, int64_t value) {
  const size_t n = s.size();
  switch (model) {
    case SizeModel::kConstant:
      return s[0];
    case SizeModel::kLinear:
      return clamp_size(
          s[0] + divide_rounded((static_cast<i128>(s[1]) - s[0]) * (value - v[0]), v[1] - v[0]));
    case SizeModel::kSaturating: {
      if (value >= v[n - 2]) return s[n - 1];
      const i128 line =
          s[0] + divide_rounded((static_cast<i128>(s[1]) - s[0]) * (value - v[0]), v[1] - v[0]);
      return clamp_size(std::min<i128>(line, s[n - 1]));
    }
    case SizeModel::kQuadratic: {
      i128 d = quadratic_d(v), num = quadratic_times_d(v, s, value);
      if (d < 0) d = -d, num = -num;
      return clamp_size(divide_rounded(num, d));
    }
    case SizeModel::kLatestGrowth: {
      if (value <= v[0]) return s[0];
      size_t k = 1;  // the segment [v[k-1], v[k]] holding the value, or the last one
      while (k + 1 < n && value > v[k]) ++k;
      return clamp_size(s[k - 1] +
                        divide_rounded((static_cast<i128>(s[k]) - s[k - 1]) * (value - v[k - 1]),
                                       v[k] - v[k - 1]));
    }
    case SizeModel::kIrregular:
    case SizeModel::kReductionStaging:  // SizeSweep sizes these by their shapes
      break;
  }
  size_t nearest = 0;  // the recording nearest the value
  for (size_t k = 1; k < n; ++k) {
    if (std::llabs(v[k] - value) <= std::llabs(v[nearest] - value)) nearest = k;
  }
  return s[nearest];
}

namespace {

// The recordings in ascending order of their values, each with its requests.
struct SortedRecordings {
  std::vector<int64_t> values;
  std::vector<const Trace*> traces;
  std::vector<std::vector<RecordedRequest>> requests;
};

SortedRecordings sort_recordings(const std::vector<const Trace*>& traces,
                                 const std::vector<int64_t>& values) {
  if (traces.size() != values.size())
    throw InputError("predict: " + std::to_string(traces.size()) + " recordings but " +
                     std::to_string(values.size()) + " values in --at");
  if (traces.size() < 2) throw InputError("predict: at least two recordings are needed");
  std::vector<size_t> order(traces.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  SortedRecordings sorted;
  for (size_t k : order) {
    if (values[k] <= 0 || values[k] > kMaxValue)
      throw InputError("predict: --at values must be from 1 to " + std::to_string(kMaxValue));
    if (!sorted.values.empty() && sorted.values.back() == values[k])
      throw InputError("predict: the value " + std::to_string(values[k]) + " is given twice");
    sorted.values.push_back(values[k]);
    sorted.traces.push_back(traces[k]);
    sorted.requests.push_back(recorded_requests(*traces[k]));
  }
  return sorted;
}

// By recording but the largest: the index in it of each of the largest's requests (-1: none).
std::vector<std::vector<int64_t>> align_to_largest(const SortedRecordings& sorted,
                                                   SweepSummary& summary) {
  const std::vector<RecordedRequest>& ref = sorted.requests.back();
  std::vector<std::vector<int64_t>> matches;
  for (size_t k = 0; k + 1 < sorted.requests.size(); ++k) {
    const std::vector<RecordedRequest>& r = sorted.requests[k];
    matches.push_back(align_recordings(ref, r, SizeOrder::kOtherNoLarger, [&](size_t i, size_t j) {
      return "predict: the recordings at " + std::to_string(sorted.values[k]) + " and " +
             std::to_string(sorted.values.back()) +
             " do not align: " + describe_request(*sorted.traces[k], r, j) + " against " +
             describe_request(*sorted.traces.back(), ref, i);
    }));
    size_t matched = 0;
    for (int64_t m : matches.back()) matched += m >= 0;
    summary.dropped += r.size() - matched;
  }
  return matches;
}

// A reduction's staging buffer: allocation `i` followed at once by its semaphores on the same
// stream (a multiple of 4 bytes), both freed before the next allocation. The semaphores' bytes, or
// 0 where `i` is not one.
uint64_t staging_semaphores(const std::vector<RecordedRequest>& ref, size_t i) {
  if (i + 1 >= ref.size() || ref[i].action != TraceAction::kAlloc) return 0;
  const RecordedRequest& sem = ref[i + 1];
  if (sem.action != TraceAction::kAlloc || sem.stream != ref[i].stream || sem.size == 0 ||
      sem.size % 4 != 0 || sem.size >= ref[i].size)
    return 0;
  bool buffer_freed = false, semaphores_freed = false;
  for (size_t k = i + 2; k < ref.size() && ref[k].action != TraceAction::kAlloc; ++k) {
    buffer_freed |= ref[k].alloc == static_cast<int64_t>(i);
    semaphores_freed |= ref[k].alloc == static_cast<int64_t>(i + 1);
  }
  return buffer_freed && semaphores_freed ? sem.size : 0;
}

// How far before a staging buffer its reduction's input is looked for.
constexpr size_t kInputWindow = 16;

// The sizes of the allocations before request `i` (up to kInputWindow of them): the reduction's
// input is among them (a gradient of rows x columns), or it was made long before.
std::vector<uint64_t> allocations_before(const std::vector<RecordedRequest>& requests, size_t i) {
  std::vector<uint64_t> sizes;
  for (size_t k = i; k-- > 0 && sizes.size() < kInputWindow;) {
    if (requests[k].action == TraceAction::kAlloc) sizes.push_back(requests[k].size);
  }
  return sizes;
}

// The staging shapes that reproduce `sizes` at `values` (at the largest two of them at least) and
// whose input (rows x columns of 1, 2, 4 or 8 bytes at the largest value) is among `before`, the
// sizes of the allocations before the buffer in that recording, the nearest first: a shape that
// only happens to give the sizes is no reduction's. The one to write first: one whose output (the
// columns, of 2, 4 or 8 bytes) is the allocation right before (shapes of as many elements differ
// in it), then the most rows per value (the recordings' rows filling their last block).
std::vector<StagingShape> staging_shapes(const std::vector<int64_t>& values,
                                         const std::vector<uint64_t>& sizes, uint64_t semaphores,
                                         int multiprocessors, const std::vector<uint64_t>& before) {
  if (semaphores == 0 || values.size() < 2) return {};
  // A shape through every recording, else through the larger ones only: at the smaller the
  // reduction may have staged nothing, the buffer aligned there being another allocation.
  std::vector<StagingShape> shapes;
  for (size_t from = 0; from + 2 <= values.size() && shapes.empty(); ++from) {
    shapes = fit_staging_shapes(
        std::vector<int64_t>(values.begin() + static_cast<std::ptrdiff_t>(from), values.end()),
        std::vector<uint64_t>(sizes.begin() + static_cast<std::ptrdiff_t>(from), sizes.end()),
        semaphores, multiprocessors);
  }
  const auto holds = [](uint64_t size, uint64_t elements, std::initializer_list<uint64_t> bytes) {
    return std::any_of(bytes.begin(), bytes.end(),
                       [&](uint64_t b) { return size == b * elements; });
  };
  const auto input_before = [&](const StagingShape& shape) {
    const uint64_t elements = static_cast<uint64_t>(shape.rows_per_value) *
                              static_cast<uint64_t>(values.back()) *
                              static_cast<uint64_t>(shape.columns);
    return std::any_of(before.begin(), before.end(), [&](uint64_t size) {
      return holds(size, elements, {1, 2, 4, 8});
    });
  };
  const auto output_before = [&](const StagingShape& shape) {
    return !before.empty() && holds(before[0], static_cast<uint64_t>(shape.columns), {2, 4, 8});
  };
  std::erase_if(shapes, [&](const StagingShape& shape) { return !input_before(shape); });
  std::stable_sort(shapes.begin(), shapes.end(), [&](const StagingShape& a, const StagingShape& b) {
    const bool oa = output_before(a), ob = output_before(b);
    return oa != ob ? oa : a.rows_per_value > b.rows_per_value;
  });
  return shapes;
}

uint64_t staging_size(const StagingShape& shape, int64_t value, int multiprocessors) {
  const std::optional<StagingBytes> s = reduction_staging(shape.at(value), multiprocessors);
  return s ? s->buffer : 1;  // no staging at this value: the kernel allocates nothing
}

// The largest recording's requests, each allocation with its sizes in every recording that has
// it and the model fitted to them.
std::vector<SizeSweep::Request> fit_requests(const SortedRecordings& sorted,
                                             const std::vector<std::vector<int64_t>>& matches,
                                             int multiprocessors, SweepSummary& summary) {
  const std::vector<RecordedRequest>& ref = sorted.requests.back();
  const size_t recordings = sorted.requests.size();
  std::vector<SizeSweep::Request> requests;
  for (size_t i = 0; i < ref.size(); ++i) {
    const TraceEvent* event =
        ref[i].event < 0 ? nullptr
                         : &sorted.traces.back()->events[static_cast<size_t>(ref[i].event)];
    SizeSweep::Request q{ref[i].action,
                         ref[i].stream,
                         ref[i].addr,
                         ref[i].alloc,
                         {},
                         {},
                         SizeModel::kConstant,
                         event ? event->time_us : 0,
                         {}};
    if (q.action == TraceAction::kAlloc) {
      for (size_t k = 0; k + 1 < recordings; ++k) {
        const int64_t m = matches[k][i];
        if (m < 0) continue;
        q.values.push_back(sorted.values[k]);
        q.sizes.push_back(sorted.requests[k][static_cast<size_t>(m)].size);
      }
      summary.in_some_only += q.values.size() + 1 < recordings;
      q.values.push_back(sorted.values.back());
      q.sizes.push_back(ref[i].size);
      q.model = fit_size_model(q.values, q.sizes);
      if (q.model != SizeModel::kConstant) {
        q.staging = staging_shapes(q.values, q.sizes, staging_semaphores(ref, i), multiprocessors,
                                   allocations_before(ref, i));
        if (!q.staging.empty()) q.model = SizeModel::kReductionStaging;
      }
      ++summary.requests;
      ++summary.models[static_cast<size_t>(q.model)];
    }
    requests.push_back(std::move(q));
  }
  return requests;
}

// The model fitted on all recordings but the largest, checked on the largest.
// `next`: the recording below the largest, and the index in it of each of the largest's requests.
SweepSummary::Validation validate_on_largest(const std::vector<SizeSweep::Request>& requests,
                                             const std::vector<RecordedRequest>& ref,
                                             const std::vector<RecordedRequest>& next,
                                             const std::vector<int64_t>& next_match,
                                             int64_t largest, int multiprocessors) {
  SweepSummary::Validation check;
  check.value = largest;
  double off = 0, total = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const SizeSweep::Request& q = requests[i];
    if (q.action != TraceAction::kAlloc || q.sizes.size() < 2) continue;  // the largest's only
    const std::vector<int64_t> at(q.values.begin(), q.values.end() - 1);
    const std::vector<uint64_t> known(q.sizes.begin(), q.sizes.end() - 1);
    const SizeModel model = fit_size_model(at, known);
    const int64_t j = next_match[i];  // the buffer in the recording below the largest
    const std::vector<StagingShape> shapes =
        model == SizeModel::kConstant
            ? std::vector<StagingShape>{}
            : staging_shapes(at, known, staging_semaphores(ref, i), multiprocessors,
                             j < 0 ? std::vector<uint64_t>{}
                                   : allocations_before(next, static_cast<size_t>(j)));
    const uint64_t predicted = shapes.empty()
                                   ? predict_size(model, at, known, check.value)
                                   : staging_size(shapes.front(), check.value, multiprocessors);
    const uint64_t real = q.sizes.back();
    ++check.requests;
    check.exact += predicted == real;
    off += std::fabs(static_cast<double>(predicted) - static_cast<double>(real));
    total += static_cast<double>(real);
  }
  check.bytes_error = total > 0 ? off / total : 0;
  return check;
}

// The bytes a recording's segments hold but no block uses at its first event.
uint64_t cached_at_first_event(const Trace& trace) {
  uint64_t reserved = 0;
  uint64_t allocated = 0;
  for (const InitialSegment& s : state_at_first_event(trace).segments) {
    reserved += s.size;
    for (const RestoredBlock& b : s.blocks) allocated += b.size;
  }
  return reserved - std::min(reserved, allocated);
}

// A recording's segments at its first event, as a snapshot holds them; none where it holds its
// whole history, or where they hold what a trace's segments cannot carry (expandable segments,
// private pools).
std::vector<SnapshotSegment> initial_segments(const Trace& trace) {
  if (!trace.initial_pools.empty()) return {};
  const InitialState state = state_at_first_event(trace);
  std::vector<SnapshotSegment> segments;
  for (const InitialSegment& s : state.segments) {
    if (s.expandable || s.pool != 0) return {};
    SnapshotSegment seg{s.address, s.size, s.stream, s.small, false, {}, {}};
    for (const RestoredBlock& b : s.blocks)
      seg.blocks.push_back({b.address, b.size, b.requested, true, !b.pending_free});
    segments.push_back(std::move(seg));
  }
  return segments;
}

}  // namespace

bool SweepSummary::warm_starts_differ() const {
  // A large segment's rounding (20 MiB) apart at most: the same model set up at every size.
  constexpr uint64_t kSlack = uint64_t{20} << 20;
  uint64_t low = UINT64_MAX;
  uint64_t high = 0;
  for (const auto& [value, bytes] : cached_at_start) {
    low = std::min(low, bytes);
    high = std::max(high, bytes);
  }
  return !cached_at_start.empty() && high - low > kSlack;
}

SizeSweep::SizeSweep(const std::vector<const Trace*>& traces, const std::vector<int64_t>& values,
                     int multiprocessors)
    : multiprocessors_(multiprocessors) {
  if (multiprocessors < 1) throw InputError("predict: the GPU's multiprocessors must be 1 or more");
  const SortedRecordings sorted = sort_recordings(traces, values);
  values_ = sorted.values;
  settings_ = sorted.traces.back()->settings;
  source_ = sorted.traces.back()->source;
  annotations_ = sorted.traces.back()->annotations;
  const std::vector<std::vector<int64_t>> matches = align_to_largest(sorted, summary_);
  summary_.recordings = sorted.requests.size();
  requests_ = fit_requests(sorted, matches, multiprocessors_, summary_);
  // A window's history frees blocks that were alive at its first event (the step was under way:
  // its activations, its gradients); one begun after the model was set up frees none of them.
  for (size_t i = 0; i < sorted.traces.size(); ++i) {
    const std::vector<RecordedRequest>& rs = sorted.requests[i];
    const bool frees_earlier_blocks = std::any_of(rs.begin(), rs.end(), [&](const auto& q) {
      return q.action != TraceAction::kAlloc && q.event >= 0 &&
             (q.alloc < 0 || rs[static_cast<size_t>(q.alloc)].event < 0);
    });
    if (frees_earlier_blocks) summary_.windows.push_back(sorted.values[i]);
  }
  for (size_t i = 0; i < sorted.traces.size(); ++i)
    summary_.cached_at_start.emplace_back(sorted.values[i],
                                          cached_at_first_event(*sorted.traces[i]));
  initial_segments_ = initial_segments(*sorted.traces.back());
  while (initial_blocks_ < requests_.size() && sorted.requests.back()[initial_blocks_].event < 0)
    ++initial_blocks_;
  if (values_.size() >= 3) {
    const size_t next = values_.size() - 2;
    summary_.validation =
        validate_on_largest(requests_, sorted.requests.back(), sorted.requests[next], matches[next],
                            values_.back(), multiprocessors_);
  }
}

namespace {

// Whether an allocation's size at `value` is a guess: growing along the latest growth beyond the
// largest recording.
bool guessed(const SizeSweep::Request& q, int64_t value) {
  return q.action == TraceAction::kAlloc && q.model == SizeModel::kLatestGrowth &&
         !q.values.empty() && value > q.values.back();
}

// The smallest of a staging buffer's sizes at `value` over the shapes that fit its recordings.
uint64_t smallest_staging(const SizeSweep::Request& q, int64_t value, int multiprocessors) {
  uint64_t least = UINT64_MAX;
  for (const StagingShape& shape : q.staging)
    least = std::min(least, staging_size(shape, value, multiprocessors));
  return least;
}

}  // namespace

uint64_t SizeSweep::size_at(const Request& q, int64_t value, GuessedSizes guessed_sizes) const {
  if (q.model == SizeModel::kReductionStaging) {
    return guessed_sizes == GuessedSizes::kHeld
               ? smallest_staging(q, value, multiprocessors_)
               : staging_size(q.staging.front(), value, multiprocessors_);
  }
  return guessed_sizes == GuessedSizes::kHeld && guessed(q, value)
             ? q.sizes.back()
             : predict_size(q.model, q.values, q.sizes, value);
}

SizeGuess SizeSweep::guessed_at(int64_t value) const {
  SizeGuess g;
  for (const Request& q : requests_) {
    if (q.action != TraceAction::kAlloc) continue;
    if (!guessed(q, value) && q.model != SizeModel::kReductionStaging) continue;
    const uint64_t continued = size_at(q, value, GuessedSizes::kContinued);
    const uint64_t held = size_at(q, value, GuessedSizes::kHeld);
    if (continued == held) continue;
    ++g.allocations;
    g.continued_bytes += continued;
    g.held_bytes += held;
  }
  return g;
}

Trace SizeSweep::predict(int64_t value, GuessedSizes guessed_sizes) const {
  if (value <= 0 || value > kMaxValue)
    throw InputError("predict: --to must be from 1 to " + std::to_string(kMaxValue));
  Trace t;
  t.source = source_ + " predicted at " + std::to_string(value);
  t.addresses_recorded = false;
  t.settings = settings_;
  t.annotations = annotations_;
  append_requests(t, requests_,
                  [&](size_t i) { return size_at(requests_[i], value, guessed_sizes); });
  // The blocks alive at the start keep their recorded sizes: the trace starts from their segments.
  const bool same_start =
      !initial_segments_.empty() &&
      std::all_of(t.events.begin(), t.events.begin() + static_cast<std::ptrdiff_t>(initial_blocks_),
                  [&](const TraceEvent& e) {
                    const size_t i = static_cast<size_t>(&e - t.events.data());
                    return e.size == requests_[i].sizes.back();
                  });
  if (same_start) {
    t.segments = initial_segments_;
    t.events.erase(t.events.begin(),
                   t.events.begin() + static_cast<std::ptrdiff_t>(initial_blocks_));
  }
  return t;
}

std::string SizeSweep::summary_text() const {
  std::string values;
  for (int64_t v : values_) values += (values.empty() ? "" : ", ") + std::to_string(v);
  std::string out = "predict: " + std::to_string(summary_.recordings) + " recordings at " + values +
                    "; " + std::to_string(summary_.requests) + " allocations aligned:";
  for (size_t m = 0; m < kSizeModels; ++m) {
    out += std::string(m ? ", " : " ") + std::to_string(summary_.models[m]) + " " +
           to_string(static_cast<SizeModel>(m));
  }
  out += "\n";
  if (summary_.models[static_cast<size_t>(SizeModel::kReductionStaging)]) {
    out += "the reduction staging buffers are sized by PyTorch's rule for a GPU of " +
           std::to_string(multiprocessors_) +
           " multiprocessors (--multiprocessors; an H100's or H200's has 132)\n";
  }
  if (summary_.in_some_only || summary_.dropped) {
    out += std::to_string(summary_.in_some_only) +
           " allocations of the largest recording are missing from some others (fitted on those "
           "that have them); " +
           std::to_string(summary_.dropped) +
           " requests of the smaller recordings have no counterpart in the largest (left out)\n";
  }
  if (!summary_.windows.empty()) {
    out += "warning: the recording(s) at";
    for (const int64_t v : summary_.windows) out.append(" ").append(std::to_string(v));
    out +=
        " are windows of their runs (the history starts in the middle of a step: it frees "
        "blocks allocated before its first event, as a bounded max_entries or recording begun "
        "after warm-up leaves it): their requests are aligned as if each were a whole run, "
        "though each window may cover another part of the step, and the prediction starts from "
        "the largest recording's cached segments, made for its size. Record each run from "
        "before its first step, with max_entries above its entries, for a prediction of the "
        "whole run\n";
  }
  if (summary_.warm_starts_differ()) {
    out +=
        "warning: the recordings start from different cached memory (free in their segments "
        "at their first events:";
    for (const auto& [value, bytes] : summary_.cached_at_start) {
      out.append(" ").append(format_size(bytes)).append(" at ").append(std::to_string(value));
    }
    out +=
        "): steps at each size ran before each history began (a recording begun after "
        "warm-up), and the prediction starts from the largest recording's cache, made for its "
        "size, not from what those steps leave at the value predicted";
    out += summary_.validation ? "\n"
                               : "; nothing validates it here (a third recording would): "
                                 "record each run from before its first step for a prediction "
                                 "of the whole run\n";
  }
  if (summary_.validation) {
    const SweepSummary::Validation& v = *summary_.validation;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4f%%", 100 * v.bytes_error);
    out += "validated on the recording at " + std::to_string(v.value) +
           " (fitted on the others): " + std::to_string(v.exact) + " of " +
           std::to_string(v.requests) + " sizes exact, allocated bytes off by " + buf + "\n";
    if (v.bytes_error > 0.01) {
      out +=
          "warning: the validation is off by more than 1%: the prediction at other values "
          "is likely off as much or more\n";
    }
  } else {
    out += "not validated: a third recording would check the model on one it was not fitted on\n";
  }
  return out;
}

}  // namespace allocsim
