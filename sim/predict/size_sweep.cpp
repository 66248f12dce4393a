#include "sim/predict/size_sweep.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <optional>
#include <unordered_map>

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

// The largest recording's requests, each allocation with its sizes in every recording that has
// it and the model fitted to them.
std::vector<SizeSweep::Request> fit_requests(const SortedRecordings& sorted,
                                             const std::vector<std::vector<int64_t>>& matches,
                                             SweepSummary& summary) {
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
                         event ? event->time_us : 0};
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
      ++summary.requests;
      ++summary.models[static_cast<size_t>(q.model)];
    }
    requests.push_back(std::move(q));
  }
  return requests;
}

// The model fitted on all recordings but the largest, checked on the largest.
SweepSummary::Validation validate_on_largest(const std::vector<SizeSweep::Request>& requests,
                                             int64_t largest) {
  SweepSummary::Validation check;
  check.value = largest;
  double off = 0, total = 0;
  for (const SizeSweep::Request& q : requests) {
    if (q.action != TraceAction::kAlloc || q.sizes.size() < 2) continue;  // the largest's only
    const std::vector<int64_t> at(q.values.begin(), q.values.end() - 1);
    const std::vector<uint64_t> known(q.sizes.begin(), q.sizes.end() - 1);
    const uint64_t predicted = predict_size(fit_size_model(at, known), at, known, check.value);
    const uint64_t real = q.sizes.back();
    ++check.requests;
    check.exact += predicted == real;
    off += std::fabs(static_cast<double>(predicted) - static_cast<double>(real));
    total += static_cast<double>(real);
  }
  check.bytes_error = total > 0 ? off / total : 0;
  return check;
}

}  // namespace

SizeSweep::SizeSweep(const std::vector<const Trace*>& traces, const std::vector<int64_t>& values) {
  const SortedRecordings sorted = sort_recordings(traces, values);
  values_ = sorted.values;
  settings_ = sorted.traces.back()->settings;
  source_ = sorted.traces.back()->source;
  annotations_ = sorted.traces.back()->annotations;
  const std::vector<std::vector<int64_t>> matches = align_to_largest(sorted, summary_);
  summary_.recordings = sorted.requests.size();
  requests_ = fit_requests(sorted, matches, summary_);
  if (values_.size() >= 3) summary_.validation = validate_on_largest(requests_, values_.back());
}

namespace {

// Whether an allocation's size at `value` is a guess: growing along the latest growth beyond the
// largest recording.
bool guessed(const SizeSweep::Request& q, int64_t value) {
  return q.action == TraceAction::kAlloc && q.model == SizeModel::kLatestGrowth &&
         !q.values.empty() && value > q.values.back();
}

}  // namespace

SizeGuess SizeSweep::guessed_at(int64_t value) const {
  SizeGuess g;
  for (const Request& q : requests_) {
    if (!guessed(q, value)) continue;
    const uint64_t continued = predict_size(q.model, q.values, q.sizes, value);
    if (continued == q.sizes.back()) continue;
    ++g.allocations;
    g.continued_bytes += continued;
    g.held_bytes += q.sizes.back();
  }
  return g;
}

Trace SizeSweep::predict(int64_t value, GuessedSizes guessed_sizes) const {
  if (value <= 0 || value > kMaxValue)
    throw InputError("predict: --to must be from 1 to " + std::to_string(kMaxValue));
  Trace t;
  t.source = source_ + " predicted at " + std::to_string(value);
  t.settings = settings_;
  t.annotations = annotations_;
  append_requests(t, requests_, [&](size_t i) {
    const Request& q = requests_[i];
    return guessed_sizes == GuessedSizes::kHeld && guessed(q, value)
               ? q.sizes.back()
               : predict_size(q.model, q.values, q.sizes, value);
  });
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
  if (summary_.in_some_only || summary_.dropped) {
    out += std::to_string(summary_.in_some_only) +
           " allocations of the largest recording are missing from some others (fitted on those "
           "that have them); " +
           std::to_string(summary_.dropped) +
           " requests of the smaller recordings have no counterpart in the largest (left out)\n";
  }
  if (summary_.validation) {
    const SweepSummary::Validation& v = *summary_.validation;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4f%%", 100 * v.bytes_error);
    out += "validated on the recording at " + std::to_string(v.value) +
           " (fitted on the others): " + std::to_string(v.exact) + " of " +
           std::to_string(v.requests) + " sizes exact, allocated bytes off by " + buf + "\n";
  } else {
    out += "not validated: a third recording would check the model on one it was not fitted on\n";
  }
  return out;
}

}  // namespace allocsim
