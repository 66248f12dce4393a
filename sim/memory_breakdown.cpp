#include "sim/memory_breakdown.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <iterator>
#include <map>
#include <unordered_map>

#include "core/format_size.hpp"
#include "sim/stack_site.hpp"

namespace allocsim {
namespace {

constexpr uint64_t MiB = 1 << 20;

// Segment size classes, in display order.
constexpr const char* kSizeClassNames[] = {"2 MiB (small pool)", "<= 20 MiB", "20-128 MiB",
                                           "128 MiB-1 GiB",      "> 1 GiB",   "expandable"};

size_t size_class(uint64_t segment_size, bool expandable) {
  if (expandable) return 5;
  if (segment_size <= 2 * MiB) return 0;
  if (segment_size <= 20 * MiB) return 1;
  if (segment_size <= 128 * MiB) return 2;
  if (segment_size <= 1024 * MiB) return 3;
  return 4;
}

}  // namespace

MemoryBreakdown memory_breakdown(const CachingAllocator& allocator) {
  // Group blocks into segments (an expandable segment's mapped ranges count one each).
  struct Segment {
    bool small, expandable;
    uint64_t size = 0, allocated = 0, free = 0, largest_free = 0;
  };
  std::vector<Segment> segments;
  allocator.for_each_block([&](const BlockInfo& b) {
    if (!b.mapped) return;
    if (b.segment_start || segments.empty()) segments.push_back({b.small, b.expandable});
    Segment& s = segments.back();
    s.size += b.size;
    if (b.allocated || b.pending_free) {
      s.allocated += b.size;
    } else {
      s.free += b.size;
      s.largest_free = std::max(s.largest_free, b.size);
    }
  });
  // Rows by index, named and kept if used at the end: the large pool before the small (as the
  // names sort), the size classes in display order. Run after every replay, so no maps.
  std::array<BreakdownRow, 2> pools{};
  std::array<BreakdownRow, std::size(kSizeClassNames)> classes{};
  for (const Segment& s : segments) {
    for (BreakdownRow* row :
         {&pools[s.small ? 1 : 0], &classes[size_class(s.size, s.expandable)]}) {
      row->segments += 1;
      row->reserved += s.size;
      row->allocated += s.allocated;
      row->cached_free += s.free;
      row->largest_free = std::max(row->largest_free, s.largest_free);
      if (s.allocated > 0) row->free_in_split += s.free;
    }
  }
  MemoryBreakdown out;
  auto keep_used = [](std::vector<BreakdownRow>& to, BreakdownRow& row, const char* name) {
    if (row.segments == 0) return;
    row.group = name;
    to.push_back(std::move(row));
  };
  keep_used(out.by_pool, pools[0], "large pool");
  keep_used(out.by_pool, pools[1], "small pool");
  for (size_t c = 0; c < classes.size(); ++c)
    keep_used(out.by_segment_size, classes[c], kSizeClassNames[c]);
  return out;
}

nlohmann::json to_json(const MemoryBreakdown& b) {
  auto rows = [](const std::vector<BreakdownRow>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const BreakdownRow& r : v) {
      a.push_back({{"group", r.group},
                   {"segments", r.segments},
                   {"reserved", r.reserved},
                   {"allocated", r.allocated},
                   {"cached_free", r.cached_free},
                   {"largest_free", r.largest_free},
                   {"free_in_split_segments", r.free_in_split}});
    }
    return a;
  };
  return {{"by_pool", rows(b.by_pool)}, {"by_segment_size", rows(b.by_segment_size)}};
}

std::string to_text(const MemoryBreakdown& b) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-20s %8s %12s %12s %12s %12s %16s\n", "", "segments",
                "reserved", "allocated", "cached free", "largest free", "free, unreleasable");
  out += buf;
  for (const auto* rows : {&b.by_pool, &b.by_segment_size}) {
    if (rows == &b.by_segment_size) out += "  by segment size:\n";
    for (const BreakdownRow& r : *rows) {
      std::snprintf(buf, sizeof buf, "  %-20s %8llu %12s %12s %12s %12s %16s\n", r.group.c_str(),
                    static_cast<unsigned long long>(r.segments), format_size(r.reserved).c_str(),
                    format_size(r.allocated).c_str(), format_size(r.cached_free).c_str(),
                    format_size(r.largest_free).c_str(), format_size(r.free_in_split).c_str());
      out += buf;
    }
  }
  return out;
}

std::vector<SiteUsage> sites_live_at(const Trace& trace, uint64_t event_index, size_t top) {
  if (trace.stacks.empty()) return {};
  std::unordered_map<uint64_t, std::pair<uint64_t, uint32_t>> live;  // address -> size, stack
  for (uint64_t i = 0; i < event_index && i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.action == TraceAction::kAlloc) live[e.addr] = {e.size, e.stack};
    if (e.action == TraceAction::kFreeRequested) live.erase(e.addr);
  }
  std::map<std::string, SiteUsage> by_site;
  for (const auto& [addr, v] : live) {
    SiteUsage& s = by_site[describe_site(trace, v.second)];
    s.bytes += v.first;
    ++s.blocks;
  }
  std::vector<SiteUsage> out;
  for (auto& [site, usage] : by_site) {
    usage.site = site;
    out.push_back(usage);
  }
  std::sort(out.begin(), out.end(), [](const SiteUsage& a, const SiteUsage& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.site < b.site;
  });
  if (out.size() > top) out.resize(top);
  return out;
}

}  // namespace allocsim
