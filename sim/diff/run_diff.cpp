#include "sim/diff/run_diff.hpp"

#include <algorithm>
#include <future>
#include <unordered_map>

#include "sim/trace/steps.hpp"

namespace allocsim {
namespace {

constexpr uint64_t kNever = UINT64_MAX;

// Per request of a run: the event of its allocation's first free (kNever for one never freed).
std::vector<uint64_t> free_events(const std::vector<RecordedRequest>& requests) {
  std::vector<uint64_t> out(requests.size(), kNever);
  for (const RecordedRequest& r : requests) {
    if (r.action == TraceAction::kAlloc || r.alloc < 0 || r.event < 0) continue;
    uint64_t& f = out[static_cast<size_t>(r.alloc)];
    f = std::min(f, static_cast<uint64_t>(r.event));
  }
  return out;
}

// Whether request i, an allocation, is live just after `event`.
bool live_after(const std::vector<RecordedRequest>& requests, const std::vector<uint64_t>& frees,
                size_t i, uint64_t event) {
  const RecordedRequest& r = requests[i];
  return (r.event < 0 || static_cast<uint64_t>(r.event) <= event) && frees[i] > event;
}

// The training steps' first events (after each step's end), ascending; empty without the
// optimizer's annotations.
std::vector<uint64_t> step_starts(const Trace& trace) {
  const std::string marker = step_marker(trace);
  if (marker.empty()) return {};
  return first_events_after(trace, step_end_times(trace, marker));
}

size_t step_of(const std::vector<uint64_t>& starts, int64_t event) {
  if (event < 0) return 0;
  return static_cast<size_t>(
      std::upper_bound(starts.begin(), starts.end(), static_cast<uint64_t>(event)) -
      starts.begin());
}

// Reserved memory just after each event, from a replay's timeline (a point per request).
std::vector<int64_t> reserved_after_events(const std::vector<TimelinePoint>& points,
                                           size_t events) {
  std::vector<int64_t> out(events, 0);
  int64_t reserved = 0;
  size_t p = 0;
  for (size_t e = 0; e < events; ++e) {
    for (; p < points.size() && points[p].event_index <= e; ++p) reserved = points[p].reserved;
    out[e] = reserved;
  }
  return out;
}

// Reserved memory after each event as the trace records it, where the replay made the recorded
// segment operations, in order and of the same sizes, from an empty device: then the replay's
// reserved memory is the recorded one at every event, and no per-event timeline is kept. None
// otherwise (a history that starts mid-run, a log without segment operations, a replay that
// departed).
std::optional<std::vector<int64_t>> recorded_reserved(const Trace& trace, const ReplayResult& r) {
  if (r.restored.segments > 0) return std::nullopt;
  std::vector<int64_t> out(trace.events.size(), 0);
  int64_t reserved = 0;
  size_t op = 0;
  for (size_t e = 0; e < trace.events.size(); ++e) {
    const TraceEvent& ev = trace.events[e];
    if (const std::optional<DeviceOpKind> kind = device_op_kind(ev.action)) {
      if (op >= r.device_ops.size() || r.device_ops[op].size != ev.size ||
          r.device_ops[op].kind != *kind)
        return std::nullopt;
      ++op;
      const bool grows = *kind == DeviceOpKind::kSegmentAlloc || *kind == DeviceOpKind::kSegmentMap;
      reserved += grows ? static_cast<int64_t>(ev.size) : -static_cast<int64_t>(ev.size);
    }
    out[e] = reserved;
  }
  if (op != r.device_ops.size()) return std::nullopt;
  return out;
}

DiffRun run_figures(const Trace& trace, const DiffSide& side) {
  const ReplayResult& r = side.result;
  DiffRun run;
  run.trace = trace.source;
  run.device = trace.device;
  run.events = trace.events.size();
  run.setup = r.setup;
  run.peak_allocated = r.stats.allocated_bytes[kAggregate].peak;
  run.peak_reserved = r.stats.reserved_bytes[kAggregate].peak;
  run.fragmentation = r.fragmentation.gmlake;
  run.peak_segments = r.stats.segment[kAggregate].peak;
  run.device_allocs = r.stats.num_device_alloc;
  if (r.outcome.stopped_at_oom && r.outcome.oom) run.oom_event = r.outcome.oom->event_index;
  run.allocated_peak_event = r.allocated_peak_event;
  for (size_t i = 0; i < side.requests.size(); ++i) {
    if (side.requests[i].action != TraceAction::kAlloc) continue;
    ++run.allocations;
    run.requested_bytes += side.requests[i].size;
    if (side.live_at_peak[i]) run.live_at_peak += side.requests[i].size;
  }
  if (!side.steps.empty()) run.step_count = side.steps.size();
  return run;
}

bool same_allocator(const ReplaySetup& a, const ReplaySetup& b) {
  return a.conf.to_string() == b.conf.to_string() && a.torch_version == b.torch_version &&
         a.capacity == b.capacity && a.context_bytes == b.context_bytes &&
         a.memory_fraction == b.memory_fraction && a.limit_bytes == b.limit_bytes;
}

std::string position_label(bool steps, size_t step, uint64_t first, uint64_t last) {
  std::string label;
  if (steps) {
    label += "step ";
    label += std::to_string(step);
    label += ", ";
  }
  label += "allocations ";
  label += std::to_string(first);
  if (last != first) {
    label += '-';
    label += std::to_string(last);
  }
  return label;
}

// Each pair's group, by index into `labels` (a label per pair would copy one string each).
struct GroupLabels {
  std::vector<std::string> labels;
  std::vector<uint32_t> of_pair;
  std::unordered_map<std::string, uint32_t> ids;
  uint32_t id(const std::string& label) {
    const auto [it, added] = ids.try_emplace(label, static_cast<uint32_t>(labels.size()));
    if (added) labels.push_back(label);
    return it->second;
  }
};

std::string site_of(const std::vector<std::string>& sites, uint32_t stack) {
  return stack < sites.size() ? sites[stack] : std::string("(no stack recorded)");
}

// The two runs, their sides and their pairing: what the groups and the parting are read from.
struct Comparison {
  const Trace& a;
  const DiffSide& sa;
  const Trace& b;
  const DiffSide& sb;
  RunPairing pairing;
  const std::vector<std::string>& sites_a = sa.sites;
  const std::vector<std::string>& sites_b = sb.sites;

  const RecordedRequest& in_a(int64_t i) const { return sa.requests[static_cast<size_t>(i)]; }
  const RecordedRequest& in_b(int64_t i) const { return sb.requests[static_cast<size_t>(i)]; }
  bool at_a_peak(int64_t i) const { return i >= 0 && sa.live_at_peak[static_cast<size_t>(i)]; }
  bool at_b_peak(int64_t i) const { return i >= 0 && sb.live_at_peak[static_cast<size_t>(i)]; }
  // A pair that makes no difference: the same size, and held at both peaks or at neither.
  bool alike(const AllocationPair& p) const {
    return p.a >= 0 && p.b >= 0 && in_a(p.a).size == in_b(p.b).size &&
           at_a_peak(p.a) == at_b_peak(p.b);
  }

  GroupLabels labels_by_site() const {
    GroupLabels g;
    // Sites by stack, each named once; the last entry for kNoStack.
    std::vector<uint32_t> ids_a, ids_b;
    for (const std::string& name : sites_a) ids_a.push_back(g.id(name));
    for (const std::string& name : sites_b) ids_b.push_back(g.id(name));
    ids_a.push_back(g.id(site_of(sites_a, kNoStack)));
    ids_b.push_back(g.id(site_of(sites_b, kNoStack)));
    const auto id_of = [](const std::vector<uint32_t>& ids, uint32_t stack) {
      return stack < ids.size() - 1 ? ids[stack] : ids.back();
    };
    for (const AllocationPair& p : pairing.pairs) {
      g.of_pair.push_back(p.a >= 0 && !a.stacks.empty() ? id_of(ids_a, in_a(p.a).stack)
                                                        : id_of(ids_b, in_b(p.b).stack));
    }
    return g;
  }

  // Each pair's step (by A's annotations, or B's for a request only B makes) and its position
  // in the step; the requests that differ (in size, in one run only, or held at one peak only)
  // in runs of consecutive pairs within one step.
  GroupLabels labels_by_position() const {
    const size_t n = pairing.pairs.size();
    std::vector<size_t> step(n);
    std::vector<uint64_t> position(n);
    for (size_t k = 0; k < n; ++k) {
      const AllocationPair& p = pairing.pairs[k];
      step[k] = p.a >= 0 ? step_of(sa.steps, in_a(p.a).event) : step_of(sb.steps, in_b(p.b).event);
      position[k] = k > 0 && step[k] == step[k - 1] ? position[k - 1] + 1 : 1;
    }
    const bool steps = !sa.steps.empty() || !sb.steps.empty();
    GroupLabels g;
    g.of_pair.resize(n);
    for (size_t k = 0; k < n;) {
      if (alike(pairing.pairs[k])) {
        g.of_pair[k++] = g.id("allocations alike in both runs");
        continue;
      }
      size_t end = k;
      while (end < n && !alike(pairing.pairs[end]) && step[end] == step[k]) ++end;
      const uint32_t label =
          g.id(position_label(steps, step[k] + 1, position[k], position[end - 1]));
      for (size_t j = k; j < end; ++j) g.of_pair[j] = label;
      k = end;
    }
    return g;
  }

  void count_groups(const GroupLabels& labels, RunDiff& d) const {
    std::vector<DiffGroup> groups(labels.labels.size());
    for (size_t k = 0; k < pairing.pairs.size(); ++k) {
      const AllocationPair& p = pairing.pairs[k];
      DiffGroup& g = groups[labels.of_pair[k]];
      const uint64_t size_a = p.a >= 0 ? in_a(p.a).size : 0;
      const uint64_t size_b = p.b >= 0 ? in_b(p.b).size : 0;
      g.bytes_a += size_a;
      g.bytes_b += size_b;
      if (at_a_peak(p.a)) g.at_peak_a += size_a;
      if (at_b_peak(p.b)) g.at_peak_b += size_b;
      if (p.a < 0) {
        ++g.only_b, ++d.only_b;
      } else if (p.b < 0) {
        ++g.only_a, ++d.only_a;
      } else if (size_a == size_b) {
        ++g.same, ++d.same;
      } else {
        ++g.changed, ++d.changed;
      }
    }
    for (size_t i = 0; i < groups.size(); ++i) {
      groups[i].label = labels.labels[i];
      d.groups.push_back(std::move(groups[i]));
    }
    std::sort(d.groups.begin(), d.groups.end(), [](const DiffGroup& x, const DiffGroup& y) {
      const int64_t dx = std::abs(x.delta_at_peak()), dy = std::abs(y.delta_at_peak());
      if (dx != dy) return dx > dy;
      const uint64_t bx = x.bytes_a + x.bytes_b, by = y.bytes_a + y.bytes_b;
      if (bx != by) return bx > by;
      return x.label < y.label;
    });
  }

  // The first paired request after which the runs' reserved memory differs (neither past its
  // run's OOM).
  std::optional<ReservedParting> reserved_parting() const {
    const std::vector<int64_t>& reserved_a = sa.reserved_after;
    const std::vector<int64_t>& reserved_b = sb.reserved_after;
    const auto past_oom = [](const ReplayResult& r, uint64_t event) {
      return r.outcome.stopped_at_oom && r.outcome.oom && event > r.outcome.oom->event_index;
    };
    for (const AllocationPair& p : pairing.pairs) {
      if (p.a < 0 || p.b < 0) continue;
      const RecordedRequest &x = in_a(p.a), &y = in_b(p.b);
      if (x.event < 0 || y.event < 0) continue;
      const uint64_t ea = static_cast<uint64_t>(x.event), eb = static_cast<uint64_t>(y.event);
      if (past_oom(sa.result, ea) || past_oom(sb.result, eb)) break;
      if (reserved_a[ea] == reserved_b[eb]) continue;
      std::string where;
      if (!a.stacks.empty()) where = site_of(sites_a, x.stack);
      if (where.empty() && !b.stacks.empty()) where = site_of(sites_b, y.stack);
      return ReservedParting{ea, eb, reserved_a[ea], reserved_b[eb], x.size, y.size, where};
    }
    return std::nullopt;
  }
};

// Program or allocator: each run's requests under the other's allocator (where the allocators
// differ; else every byte of the difference is the program's).
void split(const Trace& a, const ReplayResult& ra, const Trace& b, const ReplayResult& rb,
           const DiffOptions& options, RunDiff& d) {
  d.same_allocator = same_allocator(ra.setup, rb.setup);
  d.peak_reserved = {d.a.peak_reserved, d.b.peak_reserved, d.b.peak_reserved, d.a.peak_reserved};
  d.peak_allocated = {d.a.peak_allocated, d.b.peak_allocated, d.b.peak_allocated,
                      d.a.peak_allocated};
  if (d.same_allocator) return;
  auto crossed = std::async(std::launch::async,
                            [&] { return replay(a, options_of(rb.setup, options.replay)); });
  ReplayResult b_under_a;
  try {
    b_under_a = replay(b, options_of(ra.setup, options.replay));
  } catch (...) {
    crossed.wait();
    throw;
  }
  const ReplayResult a_under_b = crossed.get();
  d.peak_reserved.b_under_a = b_under_a.stats.reserved_bytes[kAggregate].peak;
  d.peak_reserved.a_under_b = a_under_b.stats.reserved_bytes[kAggregate].peak;
  d.peak_allocated.b_under_a = b_under_a.stats.allocated_bytes[kAggregate].peak;
  d.peak_allocated.a_under_b = a_under_b.stats.allocated_bytes[kAggregate].peak;
  if (b_under_a.outcome.stopped_at_oom && b_under_a.outcome.oom)
    d.b_under_a_oom_event = b_under_a.outcome.oom->event_index;
  if (a_under_b.outcome.stopped_at_oom && a_under_b.outcome.oom)
    d.a_under_b_oom_event = a_under_b.outcome.oom->event_index;
}

}  // namespace

ReplayOptions options_of(const ReplaySetup& setup, const ReplayOptions& base) {
  ReplayOptions o = base;
  o.alloc_conf = setup.conf;
  o.torch_version = setup.torch_version;
  o.capacity = setup.capacity;
  o.capacity_from_layout = false;
  o.context_bytes = setup.context_bytes;
  o.memory_fraction = setup.memory_fraction;
  o.memory_limit.reset();
  return o;
}

DiffSide prepare_diff_side(const Trace& trace, const DiffOptions& options) {
  DiffSide s;
  // The request list beside the replay: neither needs the other.
  auto requests = std::async(std::launch::async, [&] { return recorded_requests(trace); });
  try {
    s.result = replay(trace, options.replay);
  } catch (...) {
    requests.wait();
    throw;
  }
  if (std::optional<std::vector<int64_t>> recorded = recorded_reserved(trace, s.result)) {
    s.reserved_after = *std::move(recorded);
  } else {
    ReplayOptions timed = options.replay;
    timed.record_timeline = true;
    s.result = replay(trace, timed);
    s.reserved_after = reserved_after_events(s.result.recording.timeline, trace.events.size());
    s.result.recording.timeline = {};  // read: its memory back
  }
  s.requests = requests.get();
  s.frees = free_events(s.requests);
  s.live_at_peak.resize(s.requests.size());
  for (size_t i = 0; i < s.requests.size(); ++i) {
    s.live_at_peak[i] = s.requests[i].action == TraceAction::kAlloc &&
                        live_after(s.requests, s.frees, i, s.result.allocated_peak_event);
  }
  s.steps = step_starts(trace);
  s.sites = stack_sites(trace);
  return s;
}

RunDiff diff_runs(const Trace& a, const Trace& b, const DiffOptions& options) {
  // The two runs' replays and requests at once.
  auto b_side = std::async(std::launch::async, [&] { return prepare_diff_side(b, options); });
  DiffSide sa_side;
  try {
    sa_side = prepare_diff_side(a, options);
  } catch (...) {
    b_side.wait();
    throw;
  }
  return diff_runs(a, sa_side, b, b_side.get(), options);
}

RunDiff diff_runs(const Trace& a, const DiffSide& side_a, const Trace& b, const DiffSide& side_b,
                  const DiffOptions& options) {
  const Comparison c{
      a, side_a, b, side_b,
      pair_allocations(side_a.requests, side_a.sites, side_b.requests, side_b.sites)};
  RunDiff d;
  d.a = run_figures(a, side_a);
  d.b = run_figures(b, side_b);
  d.paired_by = c.pairing.by;
  d.paired_by_sites = c.pairing.sites;
  // Groups are source lines where either run has frames (a pair named by A's where A has them).
  d.sites = !a.stacks.empty() || !b.stacks.empty();
  // The parting point beside the groups: both read the pairing only.
  auto parting = std::async(std::launch::async, [&c] { return c.reserved_parting(); });
  try {
    c.count_groups(d.sites ? c.labels_by_site() : c.labels_by_position(), d);
  } catch (...) {
    parting.wait();
    throw;
  }
  d.reserved_parting = parting.get();
  split(a, side_a.result, b, side_b.result, options, d);
  // The readers' warnings first (each names its file), then the diff's own.
  for (const std::string& w : a.warnings) d.warnings.push_back(w);
  for (const std::string& w : b.warnings) {
    if (std::find(d.warnings.begin(), d.warnings.end(), w) == d.warnings.end())
      d.warnings.push_back(w);
  }
  if (c.pairing.by == PairedBy::kSite || c.pairing.by == PairedBy::kStreamOrder) {
    d.warnings.push_back(std::string("the runs' allocations differ in more than ") +
                         std::to_string(kMaxEdits) + " places: paired by " +
                         describe(c.pairing.by, c.pairing.sites) +
                         ", which may pair requests that are not the same");
  }
  return d;
}

}  // namespace allocsim
