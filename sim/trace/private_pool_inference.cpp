#include "sim/trace/private_pool_inference.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace allocsim {
namespace {

constexpr int32_t kUnknownPool = -1;  // a group's pool not (yet) inferred
constexpr uint32_t kNoGroup = UINT32_MAX;
constexpr uint64_t kNoEvent = UINT64_MAX;

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

}  // namespace

PrivatePoolInference infer_private_pools(Trace& trace,
                                         std::span<const std::pair<uint32_t, uint16_t>> overrides) {
  auto id_less = [](MempoolId a, MempoolId b) {
    return std::pair(a.first, a.second) < std::pair(b.first, b.second);
  };
  std::vector<MempoolId> ids;
  for (const SnapshotSegment& s : trace.segments) {
    if (!s.pool.ordinary()) ids.push_back(s.pool);
  }
  if (ids.empty()) return {};
  std::sort(ids.begin(), ids.end(), id_less);
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  // Pools are numbered in 16 bits (the allocator's limit); a file naming more has the rest taken
  // as ordinary (no real job has thousands of live pools).
  if (ids.size() >= UINT16_MAX) ids.resize(UINT16_MAX - 1);
  auto label_of = [&](MempoolId id) -> int32_t {
    const auto it = std::lower_bound(ids.begin(), ids.end(), id, id_less);
    return it == ids.end() || !(*it == id) ? 0 : static_cast<int32_t>(it - ids.begin()) + 1;
  };

  // Backwards from the final segments: which group each alloc's address fell in.
  std::vector<int32_t> group_pool;
  std::vector<uint64_t> group_first_alloc;
  auto new_group = [&](int32_t pool) {
    group_pool.push_back(pool);
    group_first_alloc.push_back(kNoEvent);
    return static_cast<uint32_t>(group_pool.size() - 1);
  };
  RangeMap memory;
  for (const SnapshotSegment& s : trace.segments)
    memory.insert(s.address, s.address + s.total_size, new_group(label_of(s.pool)));
  const std::vector<TraceEvent>& events = trace.events;
  std::vector<uint32_t> alloc_group(events.size(), kNoGroup);
  std::vector<std::pair<uint64_t, uint32_t>> releases;  // event, group of what it released
  for (uint64_t i = events.size(); i-- > 0;) {
    const TraceEvent& e = events[i];
    switch (e.action) {
      case TraceAction::kSegmentFree:
      case TraceAction::kSegmentUnmap: {  // there before this event
        const uint32_t g = new_group(kUnknownPool);
        memory.insert(e.addr, e.addr + e.size, g);
        releases.emplace_back(i, g);
        break;
      }
      case TraceAction::kSegmentAlloc:
      case TraceAction::kSegmentMap:  // not there before this event
        memory.erase(e.addr, e.addr + e.size);
        break;
      case TraceAction::kAlloc:
        if (const auto g = memory.find(e.addr)) {
          alloc_group[i] = *g;
          group_first_alloc[*g] = i;  // walking backwards, the last one seen is the first
        }
        break;
      default:
        break;
    }
  }

  // Walked back to the first event, `memory` holds what was there before it: segments restored
  // into their pools, whose choice of pool matters from the first event on.
  std::vector<bool> at_start(group_pool.size(), false);
  memory.for_each([&](uint64_t, uint32_t g) { at_start[g] = true; });

  // The private pool of each stream's final segments, where they name one: the fallback for a
  // stream none of whose requests fell in a final segment (a history that begins during or after
  // the capture on it).
  std::map<StreamId, int32_t> stream_pool;  // 0 where a stream's final segments name several
  for (const SnapshotSegment& seg : trace.segments) {
    const int32_t label = label_of(seg.pool);
    if (label == 0) continue;
    const auto [it, fresh] = stream_pool.emplace(seg.stream, label);
    if (!fresh && it->second != label) it->second = 0;
  }

  // Segments gone before the end: the pool of the known requests around their first one on its
  // stream.
  std::map<StreamId, std::vector<std::pair<uint64_t, int32_t>>> known;  // event, pool
  for (uint64_t i = 0; i < events.size(); ++i) {
    if (alloc_group[i] != kNoGroup && group_pool[alloc_group[i]] != kUnknownPool)
      known[events[i].stream].emplace_back(i, group_pool[alloc_group[i]]);
  }
  trace.pool_guesses.clear();
  for (uint32_t g = 0; g < group_pool.size(); ++g) {
    if (group_pool[g] != kUnknownPool || group_first_alloc[g] == kNoEvent) continue;
    const uint64_t first = group_first_alloc[g];
    const auto& around = known[events[first].stream];
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
    } else if (const auto it = stream_pool.find(events[first].stream); it != stream_pool.end()) {
      taken = it->second;
    }
    int32_t other = taken;
    if (has_before && before != taken) other = before;
    if (has_after && after != taken) other = after;
    if (other == taken && taken != 0 && (!has_before || !has_after)) other = 0;
    group_pool[g] = taken;
    if (other != taken) {
      trace.pool_guesses.push_back(PoolGuess{
          g, at_start[g] ? 0 : first, static_cast<uint16_t>(taken), static_cast<uint16_t>(other)});
    }
  }
  // Segments released with no request in the trace (there before its first event, in a history
  // that begins after the capture that carved them): the private pool of their stream's final
  // segments, where those name one, as a guess the replay settles.
  for (const auto& [i, g] : releases) {
    if (group_pool[g] != kUnknownPool || group_first_alloc[g] != kNoEvent) continue;
    const auto it = stream_pool.find(events[i].stream);
    if (it == stream_pool.end() || it->second == 0) continue;
    group_pool[g] = it->second;
    trace.pool_guesses.push_back(PoolGuess{g, 0, static_cast<uint16_t>(it->second), 0});
  }
  for (const auto& [g, pool] : overrides) {
    if (g < group_pool.size()) group_pool[g] = pool;
  }

  trace.private_pools.clear();
  for (const MempoolId id : ids) trace.private_pools.push_back(PrivatePoolUse{id});
  trace.initial_pools.clear();
  memory.for_each([&](uint64_t begin, uint32_t g) {
    if (group_pool[g] > 0)
      trace.initial_pools.emplace_back(begin, static_cast<uint16_t>(group_pool[g]));
  });
  trace.request_pools.assign(events.size(), 0);
  std::vector<uint64_t> last_request(ids.size() + 1, 0);
  uint64_t allocs = 0, served = 0;
  for (uint64_t i = 0; i < events.size(); ++i) {
    if (events[i].action != TraceAction::kAlloc) continue;
    ++allocs;
    const int32_t pool = alloc_group[i] == kNoGroup ? 0 : group_pool[alloc_group[i]];
    if (pool <= 0) continue;
    trace.request_pools[i] = static_cast<uint16_t>(pool);
    last_request[static_cast<size_t>(pool)] = i;
    ++served;
  }
  // A pool's segment released after its last request: its graphs were gone by that release.
  std::sort(releases.begin(), releases.end());
  for (const auto& [i, g] : releases) {
    const int32_t pool = group_pool[g];
    if (pool <= 0 || i < last_request[static_cast<size_t>(pool)]) continue;
    PrivatePoolUse& use = trace.private_pools[static_cast<size_t>(pool - 1)];
    if (use.released_at != PrivatePoolUse::kNotReleased) continue;
    uint64_t start = i;
    while (start > 0 && is_release(events[start - 1].action)) --start;
    use.released_at = start;
  }

  return PrivatePoolInference{allocs, served};
}

std::string private_pool_warning(const Trace& trace, const PrivatePoolInference& inference) {
  std::vector<MempoolId> ids;
  for (const PrivatePoolUse& p : trace.private_pools) ids.push_back(p.id);
  return trace.source + ": CUDA graphs' private pools " + pool_names(ids) + ": " +
         std::to_string(inference.served) + " of " + std::to_string(inference.allocs) +
         " allocations inferred to have been served from them, by the pool of the recorded "
         "segment each fell in (PyTorch's trace does not record it); the empty_cache() each "
         "capture begins with leaves no entry when it frees nothing, so num_sync_all_streams "
         "may count fewer than the run did";
}

}  // namespace allocsim
