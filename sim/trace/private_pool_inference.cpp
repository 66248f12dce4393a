#include "sim/trace/private_pool_inference.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/trace/recorder_marks.hpp"

namespace allocsim {
namespace {

constexpr int32_t kUnknownPool = -1;  // a group's pool not (yet) inferred
constexpr uint32_t kNoGroup = UINT32_MAX;
constexpr uint64_t kNoEvent = UINT64_MAX;
// The first half of the id of a pool no final segment names (PyTorch's ids are (graph, 0) or
// (0, handle)): (kVanishedPoolFirst, k) for the k-th such segment.
constexpr uint64_t kVanishedPoolFirst = UINT64_MAX;

// The recorded device memory at one moment: disjoint address ranges, each of a group (one
// recorded segment, or one mapped range of an expandable one).
class RangeMap {
 public:
  void insert(uint64_t begin, uint64_t end, uint32_t group) {
    erase(begin, end);
    ranges_.emplace(begin, Range{end, group});
  }

  void erase(uint64_t begin, uint64_t end) {
    auto it = ranges_.lower_bound(begin);
    if (it != ranges_.begin()) {
      const auto before = std::prev(it);
      if (before->second.end > begin) {  // starts below `begin`: keep its lower part
        const Range r = before->second;
        before->second.end = begin;
        if (r.end > end) {  // and its upper part
          ranges_.emplace(end, r);
          return;
        }
      }
    }
    while (it != ranges_.end() && it->first < end) {
      if (it->second.end > end) {
        const Range r = it->second;
        ranges_.erase(it);
        ranges_.emplace(end, r);
        return;
      }
      it = ranges_.erase(it);
    }
  }

  template <typename Visit>  // Visit(begin, group), in address order
  void for_each(Visit visit) const {
    for (const auto& [begin, range] : ranges_) visit(begin, range.group);
  }

  std::optional<uint32_t> find(uint64_t address) const {
    auto it = ranges_.upper_bound(address);
    if (it == ranges_.begin()) return std::nullopt;
    --it;
    if (address >= it->second.end) return std::nullopt;
    return it->second.group;
  }

 private:
  struct Range {
    uint64_t end;
    uint32_t group;
  };
  std::map<uint64_t, Range> ranges_;
};

// A group's recorded addresses, and the event that released it (kNoEvent: there at the end).
struct Extent {
  uint64_t begin, end, released;
};

bool is_release(TraceAction a) {
  return a == TraceAction::kSegmentFree || a == TraceAction::kSegmentUnmap;
}

// "(a, b)", built by appending (gcc 12 warns falsely of overlapping copies in the + chain).
std::string pool_names(const std::vector<MempoolId>& ids) {
  std::string names;
  for (const MempoolId id : ids) {
    if (!names.empty()) names.append(", ");
    names.append("(").append(std::to_string(id.first));
    names.append(", ").append(std::to_string(id.second)).append(")");
  }
  return names;
}

// The segments gone before the end that a release of the whole cache kept though none of their
// blocks was allocated: a private pool's whose graphs were alive (empty_cache() gives back the
// ordinary pools' free segments, and a private pool's only once its graphs are gone). A run of
// releases is taken as the whole cache's where the settings leave the malloc no partial release
// (garbage collection; with max_split_size_mb, oversize segments only: a run that gave back a
// smaller one was whole). Segments there at the first event (whose blocks allocated before it the
// trace does not show) and expandable ones (unmapped page by page) are left out.
std::vector<bool> kept_while_free(const Trace& trace, const std::vector<int32_t>& group_pool,
                                  const std::vector<uint32_t>& alloc_group,
                                  const std::vector<uint64_t>& group_first_alloc,
                                  const std::vector<Extent>& group_extent,
                                  const std::vector<bool>& at_start) {
  std::vector<bool> kept(group_pool.size(), false);
  const AllocConf conf = trace.settings.value_or(AllocConf{});
  if (conf.garbage_collection_threshold > 0 || conf.expandable_segments) return kept;
  const std::vector<TraceEvent>& events = trace.events;
  std::vector<uint32_t> live(group_pool.size(), 0);
  std::unordered_map<uint64_t, uint32_t> block_group;  // live block address -> group
  std::set<uint32_t> free_now;                         // candidates with no block allocated
  auto candidate = [&](uint32_t g) {
    return group_pool[g] == kUnknownPool && !at_start[g] && group_extent[g].released != kNoEvent &&
           events[group_extent[g].released].action == TraceAction::kSegmentFree;
  };
  for (uint64_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    if (e.action == TraceAction::kAlloc) {
      const uint32_t g = alloc_group[i];
      if (g == kNoGroup) continue;
      block_group[e.addr] = g;
      if (live[g]++ == 0) free_now.erase(g);
    } else if (e.action == TraceAction::kFreeCompleted) {
      const auto it = block_group.find(e.addr);
      if (it == block_group.end()) continue;
      const uint32_t g = it->second;
      block_group.erase(it);
      if (--live[g] == 0 && candidate(g) && group_first_alloc[g] <= i) free_now.insert(g);
    } else if (is_release(e.action) && (i == 0 || !is_release(events[i - 1].action))) {
      uint64_t end = i;
      bool whole = conf.max_split_size == kNoMaxSplitSize;
      while (end < events.size() && is_release(events[end].action)) {
        whole = whole || events[end].size < conf.max_split_size;
        ++end;
      }
      // What the run gave back is gone; what a whole release kept was kept while free.
      for (auto it = free_now.begin(); it != free_now.end();) {
        if (group_extent[*it].released < end) {
          it = free_now.erase(it);
        } else {
          kept[*it] = kept[*it] || whole;
          ++it;
        }
      }
    }
  }
  return kept;
}

// Numbers the stretches of the guesses that could be a vanished pool's (PoolGuess::stretch).
void mark_stretches(Trace& trace, const std::vector<uint32_t>& alloc_group) {
  std::unordered_map<uint32_t, size_t> guess_of;  // group -> its guess
  for (size_t k = 0; k < trace.pool_guesses.size(); ++k) {
    const PoolGuess& x = trace.pool_guesses[k];
    if (x.taken == PoolGuess::kVanishedPool || x.other == PoolGuess::kVanishedPool)
      guess_of.emplace(x.group, k);
  }
  if (guess_of.empty()) return;
  std::map<StreamId, uint32_t> open;  // per stream, the stretch its last request was in
  uint32_t next = 0;
  const std::vector<TraceEvent>& events = trace.events;
  for (uint64_t i = 0; i < events.size(); ++i) {
    if (events[i].action != TraceAction::kAlloc) continue;
    const auto it = alloc_group[i] == kNoGroup ? guess_of.end() : guess_of.find(alloc_group[i]);
    if (it == guess_of.end()) {
      open.erase(events[i].stream);
      continue;
    }
    const auto [o, fresh] = open.emplace(events[i].stream, next);
    if (fresh) ++next;
    PoolGuess& x = trace.pool_guesses[it->second];
    if (!x.stretch) x.stretch = o->second;
  }
}

// The segments taken into vanished pools, grouped into pools: those whose requests follow one
// another on their stream with no other pool's request between (one capture's, the stream being
// captured) and that were released by one run of releases (the empty_cache() after its graphs
// were gone). Returns each group's representative (itself where it is in no such pool).
std::vector<uint32_t> vanished_pool_of(const Trace& trace, const std::vector<int32_t>& group_pool,
                                       const std::vector<uint32_t>& alloc_group,
                                       const std::vector<Extent>& group_extent) {
  std::vector<uint32_t> parent(group_pool.size());
  for (uint32_t g = 0; g < parent.size(); ++g) parent[g] = g;
  auto root = [&](uint32_t g) {
    while (parent[g] != g) g = parent[g] = parent[parent[g]];
    return g;
  };
  const std::vector<TraceEvent>& events = trace.events;
  auto run_start = [&](uint32_t g) {
    uint64_t i = group_extent[g].released;
    if (i == kNoEvent) return i;
    while (i > 0 && is_release(events[i - 1].action)) --i;
    return i;
  };
  std::map<StreamId, uint32_t> last;  // per stream, the group of its last request, if vanished
  for (uint64_t i = 0; i < events.size(); ++i) {
    if (events[i].action != TraceAction::kAlloc) continue;
    const uint32_t g = alloc_group[i];
    const bool vanished = g != kNoGroup && group_pool[g] == PoolGuess::kVanishedPool;
    if (!vanished) {
      last.erase(events[i].stream);
      continue;
    }
    const auto [it, fresh] = last.emplace(events[i].stream, g);
    if (!fresh) {
      if (it->second != g && run_start(it->second) == run_start(g))
        parent[root(g)] = root(it->second);
      it->second = g;
    }
  }
  std::vector<uint32_t> pool(group_pool.size());
  for (uint32_t g = 0; g < pool.size(); ++g) pool[g] = root(g);
  return pool;
}

// The private pools the final segments name, sorted, numbered from 1 (0: the ordinary pools).
class PoolLabels {
 public:
  explicit PoolLabels(const Trace& trace) {
    for (const SnapshotSegment& s : trace.segments) {
      if (!s.pool.ordinary()) ids_.push_back(s.pool);
    }
    std::sort(ids_.begin(), ids_.end(), less);
    ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
    // Pools are numbered in 16 bits (the allocator's limit); a file naming more has the rest
    // taken as ordinary (no real job has thousands of live pools).
    if (ids_.size() >= PoolGuess::kVanishedPool) ids_.resize(PoolGuess::kVanishedPool - 1);
  }

  const std::vector<MempoolId>& ids() const { return ids_; }

  int32_t operator()(MempoolId id) const {
    const auto it = std::lower_bound(ids_.begin(), ids_.end(), id, less);
    return it == ids_.end() || !(*it == id) ? 0 : static_cast<int32_t>(it - ids_.begin()) + 1;
  }

 private:
  static bool less(MempoolId a, MempoolId b) {
    return std::pair(a.first, a.second) < std::pair(b.first, b.second);
  }
  std::vector<MempoolId> ids_;
};

// The trace's recorded segments (and mapped ranges) as groups, walked back from the final ones:
// each group's pool as far as it is known, the first request it served, its extent, and which
// group each alloc fell in.
struct Groups {
  std::vector<int32_t> pool;
  std::vector<uint64_t> first_alloc;
  std::vector<Extent> extent;
  std::vector<uint32_t> of_alloc;                       // by event; kNoGroup but for allocs
  std::vector<std::pair<uint64_t, uint32_t>> releases;  // event, group of what it released
  std::vector<bool> at_start;                           // there before the first event
  RangeMap memory;                                      // what was there before the first event

  uint32_t add(int32_t p, Extent x) {
    pool.push_back(p);
    first_alloc.push_back(kNoEvent);
    extent.push_back(x);
    return static_cast<uint32_t>(pool.size() - 1);
  }
};

Groups walk_back(const Trace& trace, const PoolLabels& label_of) {
  Groups g;
  for (const SnapshotSegment& s : trace.segments)
    g.memory.insert(s.address, s.address + s.total_size,
                    g.add(label_of(s.pool), {s.address, s.address + s.total_size, kNoEvent}));
  const std::vector<TraceEvent>& events = trace.events;
  g.of_alloc.assign(events.size(), kNoGroup);
  for (uint64_t i = events.size(); i-- > 0;) {
    const TraceEvent& e = events[i];
    switch (e.action) {
      case TraceAction::kSegmentFree:
      case TraceAction::kSegmentUnmap: {  // there before this event
        const uint32_t group = g.add(kUnknownPool, {e.addr, e.addr + e.size, i});
        g.memory.insert(e.addr, e.addr + e.size, group);
        g.releases.emplace_back(i, group);
        break;
      }
      case TraceAction::kSegmentAlloc:
      case TraceAction::kSegmentMap:  // not there before this event
        g.memory.erase(e.addr, e.addr + e.size);
        break;
      case TraceAction::kAlloc:
        if (const auto group = g.memory.find(e.addr)) {
          g.of_alloc[i] = *group;
          g.first_alloc[*group] = i;  // walking backwards, the last one seen is the first
        }
        break;
      default:
        break;
    }
  }
  // Walked back to the first event, `memory` holds what was there before it: segments restored
  // into their pools, whose choice of pool matters from the first event on.
  g.at_start.assign(g.pool.size(), false);
  g.memory.for_each([&](uint64_t, uint32_t group) { g.at_start[group] = true; });
  return g;
}

// The private pool of each stream's final segments, where they name one (0 where they name
// several): the fallback for a stream none of whose requests fell in a final segment (a history
// that begins during or after the capture on it).
std::map<StreamId, int32_t> stream_pools(const Trace& trace, const PoolLabels& label_of) {
  std::map<StreamId, int32_t> stream_pool;
  for (const SnapshotSegment& seg : trace.segments) {
    const int32_t label = label_of(seg.pool);
    if (label == 0) continue;
    const auto [it, fresh] = stream_pool.emplace(seg.stream, label);
    if (!fresh && it->second != label) it->second = 0;
  }
  return stream_pool;
}

void add_guess(Trace& trace, const Groups& g, uint32_t group, uint64_t first_request, int32_t taken,
               int32_t other, std::optional<uint16_t> third = std::nullopt) {
  const Extent& x = g.extent[group];
  trace.pool_guesses.push_back(PoolGuess{group, first_request, static_cast<uint16_t>(taken),
                                         static_cast<uint16_t>(other), third, x.begin, x.end,
                                         x.released});
}

// A segment gone before the end: the pool of the known requests around its first one on its
// stream, and the other pool it may have been, as a guess.
void guess_gone_segment(Trace& trace, Groups& g, uint32_t group,
                        const std::vector<std::pair<uint64_t, int32_t>>& around,
                        const std::map<StreamId, int32_t>& stream_pool) {
  const uint64_t first = g.first_alloc[group];
  const auto next = std::lower_bound(around.begin(), around.end(),
                                     std::pair<uint64_t, int32_t>(first, INT32_MIN));
  // Plain flags and values, not optionals: gcc 12 warns falsely of an optional's value read
  // uninitialised here.
  const bool has_after = next != around.end();
  const bool has_before = next != around.begin();
  const int32_t after = has_after ? next->second : 0;
  const int32_t before = has_before ? std::prev(next)->second : 0;
  // Between two requests of one pool: that pool. Otherwise the later one's, or the ordinary
  // pools where the stream's known requests on one side are a private pool's only; with none
  // known on the stream, the pool of its final segments.
  int32_t taken = 0;
  if (has_after) {
    taken = after;
  } else if (has_before) {
    taken = before;
  } else if (const auto it = stream_pool.find(trace.events[first].stream);
             it != stream_pool.end()) {
    taken = it->second;
  }
  // A vanished pool's requests on both sides: that pool, as one capture's; on one side only,
  // the ordinary pools, the vanished pool the other guess.
  if (taken == PoolGuess::kVanishedPool &&
      !(has_before && before == taken && has_after && after == taken)) {
    taken = 0;
  }
  int32_t other = taken;
  if (has_before && before != taken) other = before;
  if (has_after && after != taken) other = after;
  if (other == taken && taken != 0 && (!has_before || !has_after)) other = 0;
  g.pool[group] = taken;
  // Taken as the ordinary pools' on all sides: its requests may still have been a capture's,
  // into a private pool whose graphs were dropped, and the cache emptied, before the end (no
  // final segment names such a pool).
  if (other == taken && taken == 0) other = PoolGuess::kVanishedPool;
  // A third: between two different pools' requests, the ordinary pools (a request between two
  // captures); otherwise a pool gone before the end (a capture of its own whose graphs were
  // dropped, and the cache emptied, as its stream's neighbours show no other pool).
  std::optional<uint16_t> third;
  if (taken > 0 && other > 0 && taken != other && other != PoolGuess::kVanishedPool) {
    third = 0;
  } else if (taken != PoolGuess::kVanishedPool && other != PoolGuess::kVanishedPool &&
             !g.at_start[group]) {
    third = PoolGuess::kVanishedPool;
  }
  if (other != taken)
    add_guess(trace, g, group, g.at_start[group] ? 0 : first, taken, other, third);
}

// Every group whose pool the walk back left open gets one, and those that could have been
// another pool's become guesses for the replay to settle. `kept`: the groups kept while free by a
// release of the whole cache (kept_while_free), a vanished pool's, as a guess.
void guess_pools(Trace& trace, Groups& g, const std::map<StreamId, int32_t>& stream_pool,
                 const std::vector<bool>& kept) {
  for (uint32_t group = 0; group < g.pool.size(); ++group) {
    if (kept[group]) g.pool[group] = PoolGuess::kVanishedPool;
  }
  const std::vector<TraceEvent>& events = trace.events;
  std::map<StreamId, std::vector<std::pair<uint64_t, int32_t>>> known;  // event, pool
  for (uint64_t i = 0; i < events.size(); ++i) {
    if (g.of_alloc[i] != kNoGroup && g.pool[g.of_alloc[i]] != kUnknownPool)
      known[events[i].stream].emplace_back(i, g.pool[g.of_alloc[i]]);
  }
  trace.pool_guesses.clear();
  for (uint32_t group = 0; group < g.pool.size(); ++group) {
    if (kept[group]) add_guess(trace, g, group, g.first_alloc[group], PoolGuess::kVanishedPool, 0);
  }
  for (uint32_t group = 0; group < g.pool.size(); ++group) {
    if (g.pool[group] != kUnknownPool || g.first_alloc[group] == kNoEvent) continue;
    guess_gone_segment(trace, g, group, known[events[g.first_alloc[group]].stream], stream_pool);
  }
  // Segments released with no request in the trace (there before its first event, in a history
  // that begins after the capture that carved them): the private pool of their stream's final
  // segments, where those name one, as a guess the replay settles.
  for (const auto& [i, group] : g.releases) {
    if (g.pool[group] != kUnknownPool || g.first_alloc[group] != kNoEvent) continue;
    const auto it = stream_pool.find(events[i].stream);
    if (it == stream_pool.end() || it->second == 0) continue;
    g.pool[group] = it->second;
    add_guess(trace, g, group, 0, it->second, 0);
  }
}

// The segments taken into vanished pools: one pool for those a capture filled, as the trace shows
// it (see vanished_pool_of), numbered after the named ones. Returns how many segments.
uint64_t number_vanished_pools(Trace& trace, Groups& g) {
  const std::vector<uint32_t> vanished_pool = vanished_pool_of(trace, g.pool, g.of_alloc, g.extent);
  uint64_t vanished = 0, vanished_pools = 0;
  std::map<uint32_t, int32_t> label_of_vanished;
  for (uint32_t group = 0; group < g.pool.size(); ++group) {
    if (g.pool[group] != PoolGuess::kVanishedPool) continue;
    const auto [it, fresh] = label_of_vanished.emplace(vanished_pool[group], 0);
    if (fresh && trace.private_pools.size() + 1 < PoolGuess::kVanishedPool) {
      trace.private_pools.push_back(
          PrivatePoolUse{MempoolId{kVanishedPoolFirst, ++vanished_pools}});
      it->second = static_cast<int32_t>(trace.private_pools.size());
    }
    g.pool[group] = it->second;  // 0 past the allocator's limit of pools: taken as ordinary
    if (it->second != 0) ++vanished;
  }
  return vanished;
}

// A recorded OOM between two requests of one private pool on its stream, with no other request
// there between, was made during that pool's capture: it goes to the pool (PyTorch then skips the
// full release of the cache, and the pool's free blocks are the ones that could have served it).
// Both requests' pools must be known, not guessed: a wrong guess would carry the OOM into its pool
// with it.
void route_ooms(Trace& trace) {
  const std::vector<TraceEvent>& events = trace.events;
  auto known_pool = [&](uint64_t i) -> uint16_t {
    return trace.request_pool_guessed[i] ? 0 : trace.request_pools[i];
  };
  std::map<StreamId, uint64_t> last_request;        // the latest alloc on each stream
  std::vector<std::pair<uint64_t, uint16_t>> ooms;  // an OOM, the pool of the alloc before it
  for (uint64_t i = 0; i < events.size(); ++i) {
    if (events[i].action == TraceAction::kAlloc) {
      last_request[events[i].stream] = i;
    } else if (events[i].action == TraceAction::kOom) {
      const auto it = last_request.find(events[i].stream);
      if (it != last_request.end() && known_pool(it->second) != 0)
        ooms.emplace_back(i, known_pool(it->second));
    }
  }
  for (const auto& [oom, pool] : ooms) {
    for (uint64_t j = oom + 1; j < events.size(); ++j) {
      if (events[j].action != TraceAction::kAlloc || events[j].stream != events[oom].stream)
        continue;
      if (known_pool(j) == pool) trace.request_pools[oom] = pool;
      break;
    }
  }
}

// Each request's pool, and where each pool was released: at the run of releases that gave back
// one of its segments after its last request (its graphs were gone by then).
// `marked` (empty, or a pool label by event) gives each request its pool outright, instead of its
// segment's group: an expandable segment's page can pass from one pool to another while mapped.
PrivatePoolInference route_requests(Trace& trace, Groups& g, uint64_t vanished,
                                    std::span<const int32_t> marked = {}) {
  const std::vector<TraceEvent>& events = trace.events;
  trace.initial_pools.clear();
  g.memory.for_each([&](uint64_t begin, uint32_t group) {
    if (g.pool[group] > 0)
      trace.initial_pools.emplace_back(begin, static_cast<uint16_t>(g.pool[group]));
  });
  trace.request_pools.assign(events.size(), 0);
  trace.request_pool_guessed.assign(events.size(), 0);
  std::vector<bool> guessed(g.pool.size(), false);
  for (const PoolGuess& x : trace.pool_guesses) guessed[x.group] = true;
  std::vector<uint64_t> last_request(trace.private_pools.size() + 1, 0);
  uint64_t allocs = 0, served = 0;
  for (uint64_t i = 0; i < events.size(); ++i) {
    if (events[i].action != TraceAction::kAlloc) continue;
    ++allocs;
    if (g.of_alloc[i] != kNoGroup && guessed[g.of_alloc[i]]) trace.request_pool_guessed[i] = 1;
    const int32_t pool = !marked.empty()             ? marked[i]
                         : g.of_alloc[i] == kNoGroup ? 0
                                                     : g.pool[g.of_alloc[i]];
    if (pool <= 0) continue;
    trace.request_pools[i] = static_cast<uint16_t>(pool);
    last_request[static_cast<size_t>(pool)] = i;
    ++served;
  }
  route_ooms(trace);
  std::sort(g.releases.begin(), g.releases.end());
  for (const auto& [i, group] : g.releases) {
    const int32_t pool = g.pool[group];
    if (pool <= 0 || i < last_request[static_cast<size_t>(pool)]) continue;
    PrivatePoolUse& use = trace.private_pools[static_cast<size_t>(pool - 1)];
    if (use.released_at != PrivatePoolUse::kNotReleased) continue;
    uint64_t start = i;
    while (start > 0 && is_release(events[start - 1].action)) --start;
    // Where the recorder marked the empty_cache() calls, one run of releases may hold several
    // (graphs dropped between them): the pool went back with the last made at or before its
    // release (the calls are in event order: found from the release back).
    const std::vector<RecordedCall>& calls = trace.recorded_calls;
    auto call = std::upper_bound(calls.begin(), calls.end(), i,
                                 [](uint64_t e, const RecordedCall& c) { return e < c.event; });
    while (call != calls.begin() && std::prev(call)->event >= start) {
      if ((--call)->kind == RecordedCall::kEmptyCache) {
        start = call->event;
        break;
      }
    }
    use.released_at = start;
  }
  return PrivatePoolInference{allocs, served, vanished};
}

// Whether a CUDA graph was captured, as a trace whose final segments name no private pool can
// show it: capture_begin registers the default CUDA generator with the graph, which, for the first
// graph registered, allocates its seed and offset (8 bytes each) on the capturing stream, a side
// stream, one block after the other.
bool registers_a_graph(const Trace& trace) {
  const TraceEvent* last = nullptr;  // the last request, if nothing was freed since
  for (const TraceEvent& e : trace.events) {
    if (e.action == TraceAction::kAlloc) {
      if (last && last->size == 8 && e.size == 8 && e.stream == last->stream && e.stream != 0 &&
          e.addr == last->addr + 512)
        return true;
      last = &e;
    } else if (e.action == TraceAction::kFreeRequested || e.action == TraceAction::kFreeCompleted) {
      last = nullptr;
    }
  }
  return false;
}

// A trace whose recorder marked its captures (Trace::capture_marks): each marked request's segment
// is the mark's pool, every other request's segment the ordinary pools', with nothing to guess.
PrivatePoolInference route_marked(Trace& trace, const PoolLabels& label_of) {
  Groups g = walk_back(trace, label_of);
  trace.private_pools.clear();
  for (const MempoolId id : label_of.ids()) trace.private_pools.push_back(PrivatePoolUse{id});
  auto label = [&](MempoolId id) {
    for (size_t k = 0; k < trace.private_pools.size(); ++k) {
      if (trace.private_pools[k].id == id) return static_cast<int32_t>(k + 1);
    }
    trace.private_pools.push_back(PrivatePoolUse{id});
    return static_cast<int32_t>(trace.private_pools.size());
  };
  std::vector<int32_t> marked(trace.events.size(), 0);
  for (const auto& [event, id] : trace.capture_marks) {
    if (event < marked.size()) marked[event] = label(id);
  }
  for (uint32_t group = 0; group < g.pool.size(); ++group) {
    if (g.first_alloc[group] != kNoEvent) g.pool[group] = 0;
  }
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    if (trace.events[i].action == TraceAction::kAlloc && g.of_alloc[i] != kNoGroup &&
        marked[i] != 0) {
      g.pool[g.of_alloc[i]] = marked[i];
    }
  }
  // A range released with no request starting in it (an expandable segment's pages, a block
  // reaching in from the range before): the pool of the last request whose block overlapped it,
  // or of the map that took it, whichever came later (a block's recorded size is the request's,
  // short of the rounded block: the pages past it show only in the map).
  for (const auto& [release, group] : g.releases) {
    if (g.first_alloc[group] != kNoEvent || g.pool[group] >= 0) continue;
    const Extent& x = g.extent[group];
    for (uint64_t j = release; j-- > 0;) {
      const TraceEvent& e = trace.events[j];
      const bool takes = e.action == TraceAction::kAlloc || e.action == TraceAction::kSegmentMap ||
                         e.action == TraceAction::kSegmentAlloc;
      if (takes && e.addr < x.end && x.begin < e.addr + e.size) {
        g.pool[group] = marked[j];
        break;
      }
    }
  }
  for (int32_t& pool : g.pool) pool = std::max(pool, 0);
  trace.pool_guesses.clear();
  const PrivatePoolInference inference = route_requests(trace, g, 0, marked);
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    if (trace.events[i].action == TraceAction::kOom)
      trace.request_pools[i] = static_cast<uint16_t>(marked[i]);
  }
  // A MemPool's pool goes back when the recorder marks the MemPool deleted.
  for (PrivatePoolUse& use : trace.private_pools) {
    if (std::ranges::find(trace.mem_pools, use.id) != trace.mem_pools.end())
      use.released_at = PrivatePoolUse::kNotReleased;
  }
  return inference;
}

}  // namespace

PrivatePoolInference infer_private_pools(Trace& trace,
                                         std::span<const std::pair<uint32_t, uint16_t>> overrides) {
  const PoolLabels label_of(trace);
  if (!trace.capture_marks.empty()) return route_marked(trace, label_of);
  if (label_of.ids().empty() && !registers_a_graph(trace)) return {};
  Groups groups = walk_back(trace, label_of);
  const std::vector<bool> kept = kept_while_free(
      trace, groups.pool, groups.of_alloc, groups.first_alloc, groups.extent, groups.at_start);
  // No final segment names a pool: the graphs were dropped before the end, and their pools are
  // seen only where a release of the whole cache kept a free segment (the graphs were alive).
  if (label_of.ids().empty() && !std::ranges::any_of(kept, [](bool k) { return k; })) return {};
  guess_pools(trace, groups, stream_pools(trace, label_of), kept);
  mark_stretches(trace, groups.of_alloc);
  for (const auto& [g, pool] : overrides) {
    if (g < groups.pool.size()) groups.pool[g] = pool;
  }
  trace.private_pools.clear();
  for (const MempoolId id : label_of.ids()) trace.private_pools.push_back(PrivatePoolUse{id});
  const uint64_t vanished = number_vanished_pools(trace, groups);
  return route_requests(trace, groups, vanished);
}

std::string private_pool_warning(const Trace& trace, const PrivatePoolInference& inference) {
  std::vector<MempoolId> ids;
  for (const PrivatePoolUse& p : trace.private_pools) {
    if (p.id.first != kVanishedPoolFirst) ids.push_back(p.id);
  }
  std::string gone;
  if (inference.vanished > 0) {
    gone = " and " + std::to_string(inference.vanished) +
           " segment(s) of pools gone before the end (graphs dropped, the cache emptied)";
  }
  const std::string how =
      trace.capture_marks.empty()
          ? " allocations inferred to have been served from them, by the pool of the recorded "
            "segment each fell in (PyTorch's trace does not record it)"
      : trace.mem_pools.empty()
          ? " allocations served from them, as the recording marked its captures "
            "(user_metadata " +
                std::string(kCaptureMarkPrefix) + "A,B)"
          : " allocations served from them, as the recording marked its captures and "
            "use_mem_pool blocks (user_metadata " +
                std::string(kCaptureMarkPrefix) + "A,B, " + std::string(kMemPoolMarkPrefix) +
                "A,B)";
  // (allocsim's recorder counts those empty_cache() calls too.)
  const std::string unseen_calls =
      trace.calls_marked_from
          ? ""
          : "; the empty_cache() each capture begins with leaves no entry when it frees nothing, "
            "so num_sync_all_streams may count fewer than the run did";
  const char* pools = trace.mem_pools.empty() ? ": CUDA graphs' private pools "
                                              : ": private pools of CUDA graphs and MemPools ";
  return trace.source + pools + pool_names(ids) + gone + ": " + std::to_string(inference.served) +
         " of " + std::to_string(inference.allocs) + how + unseen_calls;
}

}  // namespace allocsim
