#include "backends/testing/allocator_harness.hpp"

#include <algorithm>
#include <sstream>

#include "core/size_rounding.hpp"

namespace allocsim::testing {
namespace {

uint64_t round_up(uint64_t v, uint64_t to) {
  return (v + to - 1) / to * to;
}

AllocatorOptions options_for(const HarnessConfig& c) {
  AllocatorOptions o;
  o.conf = c.conf;
  return o;
}

}  // namespace

std::string to_string(const Op& op) {
  std::ostringstream os;
  switch (op.kind) {
    case Op::kMalloc:
      os << "malloc(" << op.size << ", stream " << op.stream;
      if (op.pool != 0) os << ", private pool (" << int{op.pool} << ", 0)";
      os << ")";
      break;
    case Op::kReleasePool:
      os << "release_pool((" << int{op.pool} << ", 0))";
      break;
    case Op::kFree:
      os << "free(live #" << op.which << ")";
      break;
    case Op::kFreeDeferred:
      os << "free_deferred(live #" << op.which << ")";
      break;
    case Op::kCompleteDeferred:
      os << "complete_deferred(pending #" << op.which << ")";
      break;
    case Op::kEmptyCache:
      os << "empty_cache()";
      break;
    case Op::kSetFraction:
      os << "set_memory_fraction(" << op.fraction << ")";
      break;
  }
  return os.str();
}

std::string to_string(const HarnessConfig& c) {
  std::ostringstream os;
  os << "capacity " << c.capacity << ", context " << c.context_bytes
     << ", PYTORCH_CUDA_ALLOC_CONF='" << c.conf.to_string() << "'";
  for (uint64_t n : c.failing_mallocs) os << ", cudaMalloc #" << n << " fails";
  for (uint64_t n : c.failing_maps) os << ", map #" << n << " fails";
  return os.str();
}

AllocatorHarness::AllocatorHarness(const HarnessConfig& config)
    : config_(config),
      device_(config.capacity, config.context_bytes),
      faults_(device_),
      allocator_(faults_, options_for(config)) {
  for (uint64_t n : config.failing_mallocs) faults_.fail_malloc_call(n);
  for (uint64_t n : config.failing_maps) faults_.fail_map_call(n);
}

void AllocatorHarness::fail(const Op& op, const std::string& what) const {
  throw PropertyViolation("step " + std::to_string(step_) + " " + to_string(op) + ": " + what);
}

void AllocatorHarness::forget_completed_pending() {
  // empty_cache and the OOM retry synchronise: every deferred free has completed.
  if (allocator_.stats().num_sync_all_streams != syncs_seen_) {
    syncs_seen_ = allocator_.stats().num_sync_all_streams;
    pending_.clear();
  }
}

void AllocatorHarness::apply(const Op& op) {
  ++step_;
  switch (op.kind) {
    case Op::kMalloc: {
      const BeforeMalloc before{
          faults_.injected_failures(), !pending_.empty(), device_.mem_get_info().free,
          static_cast<uint64_t>(allocator_.stats().reserved_bytes[kAggregate].current)};
      const MempoolId pool{op.pool, 0};
      if (op.pool != 0) {
        allocator_.begin_allocate_to_pool(pool, op.stream);
        ++pool_users_[op.pool];
      }
      const BlockId b = allocator_.malloc(op.size, op.stream);
      if (op.pool != 0) allocator_.end_allocate_to_pool(pool);
      forget_completed_pending();
      check_malloc(op, b, before);
      if (b != kNoBlock) live_.push_back({b, op.size});
      break;
    }
    case Op::kFree:
    case Op::kFreeDeferred: {
      if (live_.empty()) break;
      const size_t i = op.which % live_.size();
      const BlockId b = live_[i].block;
      live_.erase(live_.begin() + static_cast<long>(i));
      allocator_.free(b, op.kind == Op::kFreeDeferred);
      if (op.kind == Op::kFreeDeferred) pending_.push_back(b);
      break;
    }
    case Op::kCompleteDeferred: {
      if (pending_.empty()) break;
      const size_t i = op.which % pending_.size();
      allocator_.complete_deferred_free(pending_[i]);
      pending_.erase(pending_.begin() + static_cast<long>(i));
      break;
    }
    case Op::kEmptyCache:
      allocator_.empty_cache();
      forget_completed_pending();
      break;
    case Op::kSetFraction:
      allocator_.set_memory_fraction(op.fraction);
      break;
    case Op::kReleasePool:
      if (op.pool == 0 || op.pool > kPools || pool_users_[op.pool] == 0) break;
      allocator_.release_pool(MempoolId{op.pool, 0});
      --pool_users_[op.pool];
      break;
  }
  check(op);
}

void AllocatorHarness::check_malloc(const Op& op, BlockId b, const BeforeMalloc& before) {
  const AllocConf& conf = allocator_.conf();
  const uint64_t rounded = round_size(op.size, conf.roundup_power2_divisions);
  const bool small = is_small_size(rounded);
  if (rounded < op.size || rounded % kMinBlockSize != 0) fail(op, "round_size broke its rules");
  if (b == kNoBlock) {
    ++ooms_;
    if (faults_.injected_failures() != before.injected_failures) return;  // a device call failed
    // An OOM is allowed only when, with every cached block released, the request still cannot
    // be served: the fraction cap forbids the segment, or the device lacks the room.
    const uint64_t alloc = allocation_size(rounded, conf.large_segment_size);
    const auto allowed = allocator_.allowed_memory_maximum();
    const auto reserved =
        static_cast<uint64_t>(allocator_.stats().reserved_bytes[kAggregate].current);
    const uint64_t page = is_small_size(rounded) ? kSmallBuffer : conf.large_segment_size;
    const uint64_t needed =
        conf.expandable_segments ? round_up(rounded, page) : round_up(alloc, kDriverGranularity);
    const auto room = [&](uint64_t reserved_then, uint64_t device_free) {
      return !(allowed && reserved_then + alloc > *allowed) && device_free >= needed;
    };
    // During a capture the retry that releases every cached block is skipped; the one before it
    // (release_available_cached_blocks) may release oversize blocks, fall short of the request
    // and give up without trying the room it made, as PyTorch's does.
    const bool gave_up_after_releasing = op.pool != 0 && conf.max_split_size != kNoMaxSplitSize &&
                                         !room(before.reserved, before.device_free);
    if (room(reserved, device_.mem_get_info().free) && !gave_up_after_releasing) {
      fail(op, "OOM although " + std::to_string(device_.mem_get_info().free) +
                   " bytes were free for a " + std::to_string(needed) + "-byte segment");
    }
    if (!before.had_pending) {
      // With no deferred frees to complete in the retry, every free block that fits was already
      // there for the search (PyTorch can OOM beside a block freed by that very retry: #189504).
      allocator_.for_each_block([&](const BlockInfo& info) {
        if (!info.allocated && !info.pending_free && !info.expandable && info.mapped &&
            info.small == small && info.stream == op.stream && info.size >= rounded &&
            info.pool == MempoolId{op.pool, 0} && info.size < conf.max_split_size) {
          fail(op, "OOM beside a fitting free block of " + std::to_string(info.size) + " bytes");
        }
      });
    }
    return;
  }
  const uint64_t size = allocator_.block_size(b);
  const uint64_t address = allocator_.block_address(b);
  if (address % kMinBlockSize != 0) fail(op, "block address is not 512-aligned");
  if (size < rounded) fail(op, "block smaller than the rounded request");
  if ((small || conf.expandable_segments) && size != rounded) {
    fail(op, "a small or expandable block must be split to the rounded size");
  }
  if (!small && !conf.expandable_segments) {
    const bool oversize = rounded >= conf.max_split_size;
    const uint64_t slack = size - rounded;
    if (oversize ? slack >= conf.max_non_split_rounding : slack > kSmallSize) {
      fail(op, "block of " + std::to_string(size) + " bytes for a rounded request of " +
                   std::to_string(rounded) + " breaks the split rules");
    }
  }
}

void AllocatorHarness::check(const Op& op) {
  try {
    allocator_.check_invariants();
  } catch (const InvariantViolation& e) {
    fail(op, std::string("invariant: ") + e.what());
  }
  // The reference model: the live blocks it handed out, by address, never overlap, and the
  // statistics count exactly them.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  uint64_t bytes = 0;
  for (const Live& l : live_) {
    ranges.emplace_back(allocator_.block_address(l.block), allocator_.block_size(l.block));
    bytes += allocator_.block_size(l.block);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i - 1].first + ranges[i - 1].second > ranges[i].first)
      fail(op, "two live blocks overlap");
  }
  const DeviceStats& s = allocator_.stats();
  if (s.allocation[kAggregate].current != static_cast<int64_t>(live_.size())) {
    fail(op, "allocation.all.current is not the number of live blocks");
  }
  if (s.allocated_bytes[kAggregate].current != static_cast<int64_t>(bytes)) {
    fail(op, "allocated_bytes.all.current is not the size of the live blocks");
  }
  // What the allocator reserved sits on the device, and the device never gives out more than
  // it has beside the context.
  if (static_cast<uint64_t>(s.reserved_bytes[kAggregate].current) > device_.used_bytes()) {
    fail(op, "reserved_bytes exceeds what the device handed out");
  }
  if (device_.used_bytes() > config_.capacity - std::min(config_.context_bytes, config_.capacity)) {
    fail(op, "the device handed out more memory than it has");
  }
}

void AllocatorHarness::finish() {
  Op op;
  op.kind = Op::kFree;
  while (!live_.empty()) apply(op);
  op.kind = Op::kReleasePool;
  for (op.pool = 1; op.pool <= kPools; ++op.pool) {
    while (pool_users_[op.pool] > 0) apply(op);
  }
  op.kind = Op::kEmptyCache;
  apply(op);
  const DeviceStats& s = allocator_.stats();
  // An expandable segment whose first map failed keeps its address range (as in PyTorch, whose
  // empty_cache only visits mapped blocks): address space, not memory, so not counted here. A
  // pool freed while it held blocks leaves their pages mapped for good, as in PyTorch.
  const bool leaks_as_pytorch = allocator_.freed_pools_holding_blocks().pools != 0;
  if (!leaks_as_pytorch && (s.reserved_bytes[kAggregate].current != 0 ||
                            device_.used_bytes() != 0 || device_.live_segments() != 0)) {
    fail(op, "leak: memory stays reserved after freeing everything and empty_cache");
  }
  if (s.active()[kAggregate].current != 0 || s.inactive_split[kAggregate].current != 0) {
    fail(op, "leak: blocks stay active or split after freeing everything");
  }
}

}  // namespace allocsim::testing
