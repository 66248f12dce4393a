#include "sim/predict/size_sweep.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <unordered_map>

#include "sim/replay/initial_state.hpp"
#include "sim/trace/input_error.hpp"

namespace allocsim {
namespace {

__extension__ typedef __int128 i128;  // products of sizes and values

// A recording's requests: the blocks alive at its first event (allocated first, by address),
// then its alloc and free events.
struct RecordedRequest {
  TraceAction action;
  StreamId stream;
  uint64_t addr;
  uint64_t size;
  int64_t alloc;  // a free: the index of its allocation, -1 if none was seen
  int64_t event;  // the trace's event index, -1 for a block alive at the start
  // Requests from its allocation to this free, or from this allocation to its first free (-1
  // if never freed): the shape of the stream, the same at every size where nothing is inserted.
  int64_t span = -1;
};

std::vector<RecordedRequest> recorded_requests(const Trace& trace) {
  HistoryScan history;
  for (const TraceEvent& e : trace.events) {
    history.observe_segment(e);
    history.observe_block(e);
  }
  std::vector<RecordedRequest> out;
  std::unordered_map<uint64_t, int64_t> live;  // address -> its allocation's index
  if (!history.whole(trace)) {
    const InitialState initial = history.finish(trace, trace.settings.value_or(AllocConf{}));
    std::vector<RecordedRequest> blocks;
    for (const InitialSegment& s : initial.segments) {
      for (const RestoredBlock& b : s.blocks) {
        if (b.pending_free) continue;  // freed already: its free completes on its own
        blocks.push_back({TraceAction::kAlloc, s.stream, b.address, b.requested, -1, -1});
      }
    }
    std::sort(blocks.begin(), blocks.end(),
              [](const RecordedRequest& a, const RecordedRequest& b) { return a.addr < b.addr; });
    for (const RecordedRequest& b : blocks) {
      live[b.addr] = static_cast<int64_t>(out.size());
      out.push_back(b);
    }
  }
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.action == TraceAction::kAlloc) {
      live[e.addr] = static_cast<int64_t>(out.size());
      out.push_back({e.action, e.stream, e.addr, e.size, -1, static_cast<int64_t>(i)});
    } else if (e.action == TraceAction::kFreeRequested || e.action == TraceAction::kFreeCompleted) {
      const auto it = live.find(e.addr);
      const int64_t alloc = it == live.end() ? -1 : it->second;
      out.push_back({e.action, e.stream, e.addr, e.size, alloc, static_cast<int64_t>(i)});
      if (e.action == TraceAction::kFreeCompleted && it != live.end()) live.erase(it);
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    RecordedRequest& r = out[i];
    if (r.action == TraceAction::kFreeRequested && r.alloc >= 0) {
      r.span = static_cast<int64_t>(i) - r.alloc;
      RecordedRequest& a = out[static_cast<size_t>(r.alloc)];
      if (a.span < 0) a.span = r.span;
    }
  }
  return out;
}

std::string describe(const Trace& trace, const std::vector<RecordedRequest>& requests, size_t i) {
  if (i >= requests.size())
    return trace.source + ": its end (" + std::to_string(requests.size()) + " requests)";
  const RecordedRequest& r = requests[i];
  const std::string where =
      r.event < 0 ? "a block alive at its first event" : "event " + std::to_string(r.event);
  return trace.source + ": " + where + " (" + to_string(r.action) + " of " +
         std::to_string(r.size) + " bytes on stream " + std::to_string(r.stream) + ")";
}

// A run of requests present in one recording only is at most this long, and the recordings
// agree on at least this many requests after it.
constexpr size_t kMaxSkip = 4096;
constexpr size_t kResyncWindow = 16;

// `r` aligned to `ref`: for each request of `ref`, its index in `r`, or -1.
std::vector<int64_t> align(const std::vector<RecordedRequest>& ref,
                           const std::vector<RecordedRequest>& r,
                           const std::function<std::string(size_t, size_t)>& refuse) {
  std::vector<int64_t> match(ref.size(), -1);
  // Whether ref[i] and r[j] are the same request: a free must free the same allocation.
  const auto same = [&](size_t i, size_t j) {
    const RecordedRequest &a = ref[i], &b = r[j];
    if (a.action != b.action || a.stream != b.stream) return false;
    if (a.action == TraceAction::kAlloc) return true;
    if (a.alloc < 0 || b.alloc < 0) return a.alloc < 0 && b.alloc < 0;
    return match[static_cast<size_t>(a.alloc)] == b.alloc;
  };
  // Whether the recordings agree from ref[i] and r[j] on: the first strictly, then the next few
  // by action, stream and span (their allocations are not matched yet).
  const auto agree_from = [&](size_t i, size_t j) {
    if (i >= ref.size() || j >= r.size() || !same(i, j)) return false;
    for (size_t t = 1; t < kResyncWindow && i + t < ref.size() && j + t < r.size(); ++t) {
      const RecordedRequest &a = ref[i + t], &b = r[j + t];
      if (a.action != b.action || a.stream != b.stream || a.span != b.span) return false;
    }
    return true;
  };
  size_t i = 0, j = 0;
  while (i < ref.size() && j < r.size()) {
    if (same(i, j)) {
      match[i++] = static_cast<int64_t>(j++);
      continue;
    }
    size_t d = 1;
    for (; d <= kMaxSkip; ++d) {
      if (agree_from(i + d, j)) {
        i += d;  // requests of the largest recording only
        break;
      }
      if (agree_from(i, j + d)) {
        j += d;  // requests of the smaller one only
        break;
      }
    }
    if (d > kMaxSkip) throw InputError(refuse(i, j));
  }
  return match;
}

uint64_t clamp_size(i128 v) {
  return v < 1 ? 1 : static_cast<uint64_t>(v);
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
    case SizeModel::kIrregular:
      return "irregular";
  }
  return "?";
}

SizeModel fit_size_model(const std::vector<int64_t>& values, const std::vector<uint64_t>& sizes) {
  const size_t n = sizes.size();
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
  if (n >= 3 && growing_faster()) {
    const i128 d = quadratic_d(values);
    bool all = true;
    for (size_t k = 3; k < n && all; ++k)
      all = quadratic_times_d(values, sizes, values[k]) == static_cast<i128>(sizes[k]) * d;
    if (all) return SizeModel::kQuadratic;
  }
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
    case SizeModel::kIrregular:
      break;
  }
  size_t nearest = 0;  // the recording nearest the value
  for (size_t k = 1; k < n; ++k) {
    if (std::llabs(v[k] - value) <= std::llabs(v[nearest] - value)) nearest = k;
  }
  return s[nearest];
}

SizeSweep::SizeSweep(const std::vector<const Trace*>& traces, const std::vector<int64_t>& values) {
  if (traces.size() != values.size())
    throw InputError("predict: " + std::to_string(traces.size()) + " recordings but " +
                     std::to_string(values.size()) + " values in --at");
  if (traces.size() < 2) throw InputError("predict: at least two recordings are needed");
  std::vector<size_t> order(traces.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<std::vector<RecordedRequest>> recorded;
  std::vector<const Trace*> sorted;
  for (size_t k : order) {
    if (values[k] <= 0) throw InputError("predict: --at values must be positive");
    if (!values_.empty() && values_.back() == values[k])
      throw InputError("predict: the value " + std::to_string(values[k]) + " is given twice");
    values_.push_back(values[k]);
    sorted.push_back(traces[k]);
    recorded.push_back(recorded_requests(*traces[k]));
  }
  const Trace& largest = *sorted.back();
  settings_ = largest.settings;
  source_ = largest.source;
  const std::vector<RecordedRequest>& ref = recorded.back();
  std::vector<std::vector<int64_t>> matches;  // by recording: ref's requests in it
  for (size_t k = 0; k + 1 < recorded.size(); ++k) {
    const std::vector<RecordedRequest>& r = recorded[k];
    matches.push_back(align(ref, r, [&](size_t i, size_t j) {
      return "predict: the recordings at " + std::to_string(values_[k]) + " and " +
             std::to_string(values_.back()) + " do not align: " + describe(*sorted[k], r, j) +
             " against " + describe(largest, ref, i);
    }));
    size_t matched = 0;
    for (int64_t m : matches.back()) matched += m >= 0;
    summary_.dropped += r.size() - matched;
  }
  summary_.recordings = recorded.size();
  for (size_t i = 0; i < ref.size(); ++i) {
    Request q{ref[i].action,       ref[i].stream, ref[i].addr, ref[i].alloc, {}, {},
              SizeModel::kConstant};
    if (q.action == TraceAction::kAlloc) {
      for (size_t k = 0; k + 1 < recorded.size(); ++k) {
        const int64_t m = matches[k][i];
        if (m < 0) continue;
        q.values.push_back(values_[k]);
        q.sizes.push_back(recorded[k][static_cast<size_t>(m)].size);
      }
      summary_.in_some_only += q.values.size() + 1 < recorded.size();
      q.values.push_back(values_.back());
      q.sizes.push_back(ref[i].size);
      q.model = fit_size_model(q.values, q.sizes);
      ++summary_.requests;
      ++summary_.models[static_cast<size_t>(q.model)];
    }
    requests_.push_back(std::move(q));
  }
  if (values_.size() >= 3) {
    SweepSummary::Validation check;
    check.value = values_.back();
    double off = 0, total = 0;
    for (const Request& q : requests_) {
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
    summary_.validation = check;
  }
}

Trace SizeSweep::predict(int64_t value) const {
  if (value <= 0) throw InputError("predict: --to must be positive");
  Trace t;
  t.source = source_ + " predicted at " + std::to_string(value);
  t.settings = settings_;
  std::vector<uint64_t> predicted(requests_.size(), 0);
  for (size_t i = 0; i < requests_.size(); ++i) {
    const Request& q = requests_[i];
    TraceEvent e;
    e.action = q.action;
    e.addr = q.addr;
    e.stream = q.stream;
    if (q.action == TraceAction::kAlloc) {
      predicted[i] = predict_size(q.model, q.values, q.sizes, value);
      e.size = predicted[i];
    } else {
      e.size = q.alloc >= 0 ? predicted[static_cast<size_t>(q.alloc)] : 0;
    }
    t.events.push_back(e);
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
