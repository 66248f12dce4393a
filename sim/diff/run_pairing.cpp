#include "sim/diff/run_pairing.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>

#include "sim/report/stack_site.hpp"

namespace allocsim {
namespace {

// An allocation as the pairing compares it: its stream, its site (interned across both runs;
// 0 without frames) and its size.
struct Item {
  size_t request;  // index among the run's requests
  StreamId stream;
  uint32_t site;
  uint64_t size;
};

class SiteIds {
 public:
  uint32_t of(const std::string& site) {
    return ids_.try_emplace(site, static_cast<uint32_t>(ids_.size())).first->second;
  }

 private:
  std::unordered_map<std::string, uint32_t> ids_;
};

std::vector<Item> items(const std::vector<RecordedRequest>& requests,
                        const std::vector<std::string>& stack_names, bool sites, SiteIds& ids) {
  std::vector<uint32_t> site_of_stack;
  if (sites) {
    for (const std::string& s : stack_names) site_of_stack.push_back(ids.of(s));
  }
  const uint32_t none = ids.of("");
  std::vector<Item> out;
  out.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const RecordedRequest& r = requests[i];
    if (r.action != TraceAction::kAlloc) continue;
    const uint32_t site = sites && r.stack < site_of_stack.size() ? site_of_stack[r.stack] : none;
    out.push_back({i, r.stream, site, r.size});
  }
  return out;
}

using Match = std::vector<int64_t>;  // per item of A, its item of B or -1

// What two allocations' sizes must be to pair them.
enum class Sizes : uint8_t { kEqual, kGrowing, kShrinking, kAny };

std::optional<Match> script(const std::vector<Item>& a, size_t a0, size_t a1,
                            const std::vector<Item>& b, size_t b0, size_t b1, Sizes sizes) {
  const auto same = [&](int64_t x, int64_t y) {
    const Item &p = a[a0 + static_cast<size_t>(x)], &q = b[b0 + static_cast<size_t>(y)];
    if (p.stream != q.stream || p.site != q.site) return false;
    switch (sizes) {
      case Sizes::kEqual:
        return p.size == q.size;
      case Sizes::kGrowing:
        return p.size <= q.size;
      case Sizes::kShrinking:
        return p.size >= q.size;
      case Sizes::kAny:
        return true;
    }
    return false;
  };
  return shortest_edit_match(static_cast<int64_t>(a1 - a0), static_cast<int64_t>(b1 - b0), same);
}

size_t paired(const Match& m) {
  return static_cast<size_t>(std::count_if(m.begin(), m.end(), [](int64_t y) { return y >= 0; }));
}

// Between consecutive pairs of `match`, the allocations of each run left over, paired on stream
// and site (their sizes differ).
void pair_between(const std::vector<Item>& a, const std::vector<Item>& b, Match& match) {
  size_t a0 = 0, b0 = 0;
  for (size_t x = 0; x <= a.size(); ++x) {
    if (x < a.size() && match[x] < 0) continue;
    const size_t b1 = x < a.size() ? static_cast<size_t>(match[x]) : b.size();
    if (x > a0 && b1 > b0) {
      if (const std::optional<Match> gap = script(a, a0, x, b, b0, b1, Sizes::kAny)) {
        for (size_t i = 0; i < gap->size(); ++i) {
          if ((*gap)[i] >= 0) match[a0 + i] = static_cast<int64_t>(b0) + (*gap)[i];
        }
      }
    }
    a0 = x + 1;
    b0 = b1 + 1;
  }
}

Match by_stream_order(const std::vector<Item>& a, const std::vector<Item>& b) {
  std::map<StreamId, std::vector<size_t>> on_stream;
  for (size_t y = 0; y < b.size(); ++y) on_stream[b[y].stream].push_back(y);
  std::map<StreamId, size_t> next;
  Match match(a.size(), -1);
  for (size_t x = 0; x < a.size(); ++x) {
    const std::vector<size_t>& ys = on_stream[a[x].stream];
    size_t& n = next[a[x].stream];
    if (n < ys.size()) match[x] = static_cast<int64_t>(ys[n++]);
  }
  return match;
}

}  // namespace

std::string describe(PairedBy by, bool sites) {
  std::string line = sites ? "stream and source line" : "stream";
  switch (by) {
    case PairedBy::kSizeAndSite:
      return sites ? "stream, source line and size" : "stream and size";
    case PairedBy::kGrowingSizes:
      return line + ", each size in B at least A's";
    case PairedBy::kShrinkingSizes:
      return line + ", each size in B at most A's";
    case PairedBy::kSite:
      return line;
    case PairedBy::kStreamOrder:
      return "order on each stream";
  }
  return "";
}

std::vector<std::string> stack_sites(const Trace& trace) {
  std::vector<std::string> out;
  out.reserve(trace.stacks.size());
  for (size_t s = 0; s < trace.stacks.size(); ++s)
    out.push_back(describe_site(trace, static_cast<uint32_t>(s)));
  return out;
}

RunPairing pair_allocations(const std::vector<RecordedRequest>& ra,
                            const std::vector<std::string>& sites_a,
                            const std::vector<RecordedRequest>& rb,
                            const std::vector<std::string>& sites_b) {
  RunPairing out;
  out.sites = !sites_a.empty() && !sites_b.empty();
  SiteIds ids;
  const std::vector<Item> ia = items(ra, sites_a, out.sites, ids);
  const std::vector<Item> ib = items(rb, sites_b, out.sites, ids);
  std::optional<Match> match = script(ia, 0, ia.size(), ib, 0, ib.size(), Sizes::kEqual);
  if (match) {
    pair_between(ia, ib, *match);
  } else {
    // Sizes that differ everywhere: a size parameter changed (the batch, the sequence), and its
    // requests grow (or shrink) together. Of the two, the script that pairs more; else any size.
    std::optional<Match> grow = script(ia, 0, ia.size(), ib, 0, ib.size(), Sizes::kGrowing);
    std::optional<Match> shrink = script(ia, 0, ia.size(), ib, 0, ib.size(), Sizes::kShrinking);
    if (grow && (!shrink || paired(*grow) >= paired(*shrink))) {
      match = std::move(grow);
      out.by = PairedBy::kGrowingSizes;
    } else if (shrink) {
      match = std::move(shrink);
      out.by = PairedBy::kShrinkingSizes;
    } else if ((match = script(ia, 0, ia.size(), ib, 0, ib.size(), Sizes::kAny))) {
      out.by = PairedBy::kSite;
    }
    if (match) pair_between(ia, ib, *match);
  }
  if (!match) {
    out.by = PairedBy::kStreamOrder;
    match = by_stream_order(ia, ib);
  }
  // In the runs' order: each of B's unpaired allocations before the next pair that follows it.
  // A pairing by stream order may cross (B's order need not be A's): those of B already passed
  // are not emitted again.
  std::vector<bool> paired_b(ib.size(), false);
  for (const int64_t y : *match)
    if (y >= 0) paired_b[static_cast<size_t>(y)] = true;
  size_t y = 0;
  for (size_t x = 0; x < ia.size(); ++x) {
    const int64_t m = (*match)[x];
    if (m >= 0) {
      for (; y < static_cast<size_t>(m); ++y) {
        if (!paired_b[y]) out.pairs.push_back({-1, static_cast<int64_t>(ib[y].request)});
      }
      y = std::max(y, static_cast<size_t>(m) + 1);
      out.pairs.push_back({static_cast<int64_t>(ia[x].request),
                           static_cast<int64_t>(ib[static_cast<size_t>(m)].request)});
    } else {
      out.pairs.push_back({static_cast<int64_t>(ia[x].request), -1});
    }
  }
  for (; y < ib.size(); ++y) {
    if (!paired_b[y]) out.pairs.push_back({-1, static_cast<int64_t>(ib[y].request)});
  }
  return out;
}

}  // namespace allocsim
