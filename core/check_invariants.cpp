// CachingAllocator::check_invariants(): the one consistency checker that tests, property tests,
// fuzzers and debug replays call after every step. Three rules, one method each.
#include <algorithm>

#include "core/caching_allocator.hpp"
#include "core/format_address.hpp"
#include "core/size_rounding.hpp"

namespace allocsim {
namespace {

[[noreturn]] void violated(const std::string& what) {
  throw InvariantViolation(what);
}

}  // namespace

void CachingAllocator::check_invariants() const {
  if (!caching_) return;
  check_free_pools();
  check_segments_tiled();
  check_stats_recount();
}

// Each free pool holds exactly the free mapped blocks, the unmapped sets exactly the unmapped ones,
// with the keys they were inserted under.
void CachingAllocator::check_free_pools() const {
  // Which set holds each block: walk the sets once instead of a lookup per block.
  enum : uint8_t { kInNone = 0, kInBlocks = 1, kInUnmapped = 2 };
  std::vector<uint8_t> member(blocks_.size(), kInNone);
  std::vector<const BlockPool*> pools{&large_pool(), &small_pool()};
  for (const PrivatePool& p : private_pools_) {
    for (const BlockPool& pool : p.pools) pools.push_back(&pool);
  }
  size_t pooled = 0, pooled_unmapped = 0;
  auto stale = [this](BlockId id, const BlockPool& pool) {
    return id >= blocks_.size() || !blocks_[id].live || blocks_[id].small != pool.small ||
           blocks_[id].owner != pool.owner;
  };
  for (const BlockPool* pool : pools) {
    for (const SizeKey& k : pool->blocks) {
      if (stale(k.id, *pool) || member[k.id] != kInNone || blocks_[k.id].stream != k.stream ||
          blocks_[k.id].size != k.size || blocks_[k.id].ptr != k.ptr) {
        violated("the free pool holds a stale entry at " + format_address(k.ptr));
      }
      member[k.id] = kInBlocks;
    }
    for (const AddressKey& k : pool->unmapped) {
      if (stale(k.id, *pool) || member[k.id] != kInNone || blocks_[k.id].stream != k.stream ||
          blocks_[k.id].ptr != k.ptr) {
        violated("the unmapped set holds a stale entry at " + format_address(k.ptr));
      }
      member[k.id] = kInUnmapped;
    }
    pooled += pool->blocks.size();
    pooled_unmapped += pool->unmapped.size();
  }
  size_t free_mapped = 0, unmapped = 0;
  for (BlockId id = 0; id < blocks_.size(); ++id) {
    const Block& b = blocks_[id];
    if (!b.live) continue;
    auto where = [&b] { return "block at " + format_address(b.ptr); };  // built only for a message
    const bool in_blocks = member[id] == kInBlocks;
    const bool in_unmapped = member[id] == kInUnmapped;
    const bool is_free = !b.allocated && b.event_count == 0;
    if (b.lost) {  // in no set: its pool was freed (CachingAllocator::erase_pool)
      if (!is_free) violated(where() + " is lost but not free");
      if (in_blocks || in_unmapped) violated(where() + " is lost but in a set");
      continue;
    }
    if (!b.mapped) {
      if (b.expandable == kNotExpandable)
        violated(where() + " is unmapped outside an expandable segment");
      if (!in_unmapped || in_blocks || b.allocated)
        violated(where() + " is unmapped but not (only) in the unmapped set");
      ++unmapped;
      continue;
    }
    if (in_unmapped) violated(where() + " is mapped but in the unmapped set");
    if (is_free != in_blocks)
      violated(where() + (is_free ? " is free but not" : " is in use but") + " in its free pool");
    if (is_free) ++free_mapped;
  }
  if (free_mapped != pooled) violated("the free pools hold blocks that are not free");
  if (unmapped != pooled_unmapped) violated("the unmapped sets hold stale blocks");
}

// Blocks are 512-byte multiples linked to their neighbours with no gap or overlap, free neighbours
// are merged, and the blocks of each cudaMalloc'ed segment tile it exactly; segments do not
// overlap.
void CachingAllocator::check_segments_tiled() const {
  for (BlockId id = 0; id < blocks_.size(); ++id) {
    const Block& b = blocks_[id];
    if (!b.live) continue;
    auto where = [&b] { return "block at " + format_address(b.ptr); };
    if (b.ptr % kMinBlockSize != 0 || b.size % kMinBlockSize != 0 || b.size == 0) {
      violated(where() + " is not a positive multiple of 512 bytes at a 512-aligned address");
    }
    if (b.prev != kNoBlock) {
      const Block& p = blocks_[b.prev];
      if (!p.live || p.next != id || p.ptr + p.size != b.ptr) {
        violated(where() + " does not follow its previous neighbour without gap or overlap");
      }
      if (p.small != b.small || p.owner != b.owner || p.stream != b.stream ||
          p.expandable != b.expandable) {
        violated(where() + " shares a segment with a block of another pool or stream");
      }
      if (!p.allocated && p.event_count == 0 && !b.allocated && b.event_count == 0 &&
          p.mapped == b.mapped) {
        violated(where() + " and its previous neighbour are both free and were not merged");
      }
    }
    if (b.next != kNoBlock && blocks_[b.next].prev != id)
      violated(where() + " has a broken next link");
  }
  uint64_t previous_end = 0;
  for (const auto& [base, size] : segments_) {
    if (base < previous_end)
      violated("segment at " + format_address(base) + " overlaps the one before it");
    previous_end = base + size;
  }
  size_t headed = 0;
  for (BlockId id = 0; id < blocks_.size(); ++id) {
    const Block& head = blocks_[id];
    if (!head.live || head.prev != kNoBlock || head.expandable != kNotExpandable) continue;
    const auto seg = segments_.find(head.ptr);
    if (seg == segments_.end())
      violated("block at " + format_address(head.ptr) + " heads no known segment");
    uint64_t covered = 0;
    for (BlockId b = id; b != kNoBlock; b = blocks_[b].next) covered += blocks_[b].size;
    if (covered != seg->second)
      violated("blocks of segment at " + format_address(head.ptr) + " do not tile it");
    ++headed;
  }
  if (headed != segments_.size()) violated("a segment has no blocks");
}

// Every current statistic equals a recount of the blocks, segments and mapped pages, and
// allocated <= active <= reserved.
void CachingAllocator::check_stats_recount() const {
  DeviceStats recount;
  StatArray active, active_bytes, segment_count;  // recounted as the others are
  uint64_t mapped_expandable = 0;
  std::vector<uint64_t> pool_reserved(private_pools_.size() + 1, 0);  // by Block::owner
  for (BlockId id = 0; id < blocks_.size(); ++id) {
    const Block& b = blocks_[id];
    if (!b.live || !b.mapped) continue;
    if (b.owner > private_pools_.size()) violated("a block belongs to no pool");
    pool_reserved[b.owner] += b.size;
    if (b.expandable != kNotExpandable) mapped_expandable += b.size;
    if (b.prev == kNoBlock && b.expandable == kNotExpandable) segment_count.increase(b.small, 1);
    if (b.allocated) {
      recount.allocation.increase(b.small, 1);
      recount.allocated_bytes.increase(b.small, b.size);
      if (b.size >= conf_.max_split_size) recount.oversize_allocations.increase(1);
    }
    if (b.allocated || b.event_count > 0) {
      active.increase(b.small, 1);
      active_bytes.increase(b.small, b.size);
      recount.requested_bytes.increase(b.small, b.requested_size);
    } else if (b.is_split() && b.expandable == kNotExpandable) {
      recount.inactive_split.increase(b.small, 1);
      recount.inactive_split_bytes.increase(b.small, b.size);
    }
  }
  auto same_current = [](const StatArray& a, const StatArray& b, const char* name) {
    for (size_t t = 0; t < kNumStatTypes; ++t) {
      if (a[t].current != b[t].current) {
        violated(std::string(name) + " current is " + std::to_string(a[t].current) +
                 " but a recount gives " + std::to_string(b[t].current));
      }
    }
  };
  same_current(stats_.allocation, recount.allocation, "allocation");
  same_current(stats_.allocated_bytes, recount.allocated_bytes, "allocated_bytes");
  same_current(stats_.active(), active, "active");
  same_current(stats_.active_bytes(), active_bytes, "active_bytes");
  same_current(stats_.requested_bytes, recount.requested_bytes, "requested_bytes");
  same_current(stats_.inactive_split, recount.inactive_split, "inactive_split");
  same_current(stats_.inactive_split_bytes, recount.inactive_split_bytes, "inactive_split_bytes");
  same_current(stats_.segment, segment_count, "segment");
  for (size_t p = 0; p < private_pools_.size(); ++p) {
    const PrivatePool& pool = private_pools_[p];
    if (pool.reserved != pool_reserved[p + 1]) {
      violated("private pool " + std::to_string(p + 1) + " counts " +
               std::to_string(pool.reserved) + " bytes reserved but holds " +
               std::to_string(pool_reserved[p + 1]));
    }
    // Its reserved_bytes_by_private_pools, unless it took over a freed pool's memory (whose
    // reservations were counted in that one's).
    if (pool.stats_index >= 0 && !pool.forgotten && !pool.took_over &&
        stats_.reserved_bytes_by_private_pools[static_cast<size_t>(pool.stats_index)]
                .reserved_bytes.current() != static_cast<int64_t>(pool.reserved)) {
      violated("private pool " + std::to_string(p + 1) + " holds " + std::to_string(pool.reserved) +
               " bytes but its reserved_bytes_by_private_pools "
               "says " +
               std::to_string(
                   stats_.reserved_bytes_by_private_pools[static_cast<size_t>(pool.stats_index)]
                       .reserved_bytes.current()));
    }
  }
  if (stats_.oversize_allocations.current != recount.oversize_allocations.current) {
    violated("oversize_allocations current disagrees with a recount");
  }
  uint64_t reserved_plain = 0;
  for (const auto& [base, size] : segments_) reserved_plain += size;
  uint64_t mapped_pages_bytes = 0;
  for (const auto& es : expandable_segments_) {
    if (es.live) {
      mapped_pages_bytes += es.page * static_cast<uint64_t>(std::count(es.page_mapped.begin(),
                                                                       es.page_mapped.end(), true));
    }
  }
  if (mapped_expandable != mapped_pages_bytes) {
    violated("mapped expandable blocks do not cover exactly the mapped pages");
  }
  if (static_cast<uint64_t>(stats_.reserved_bytes[kAggregate].current) !=
          reserved_plain + mapped_pages_bytes ||
      total_allocated_memory_ != reserved_plain + mapped_pages_bytes) {
    violated("reserved_bytes disagrees with the segments and mapped pages");
  }
  const auto& a = stats_.allocated_bytes[kAggregate].current;
  const int64_t act = stats_.active_bytes()[kAggregate].current;
  const auto& res = stats_.reserved_bytes[kAggregate].current;
  if (!(a <= act && act <= res)) violated("allocated <= active <= reserved does not hold");
}

}  // namespace allocsim
