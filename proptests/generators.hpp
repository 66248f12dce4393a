// RapidCheck generators for allocator settings, devices and operation streams.
#pragma once

#include <rapidcheck.h>

#include <algorithm>

#include "backends/testing/allocator_harness.hpp"
#include "core/alloc_conf.hpp"
#include "core/size_rounding.hpp"

namespace allocsim::proptests {

inline constexpr uint64_t MiB = 1 << 20;

// Request sizes that reach every rule: tiny, around the 512 B / 1 MiB / 10 MiB edges, 20 MiB
// segments, large and oversize requests.
inline rc::Gen<uint64_t> request_size() {
  using namespace rc;
  return gen::weightedOneOf<uint64_t>({
      {3, gen::inRange<uint64_t>(1, 4096)},
      {3, gen::inRange<uint64_t>(4096, MiB + 1)},
      {2, gen::element<uint64_t>(511, 512, 513, MiB - 1, MiB, MiB + 1, 10 * MiB - 1, 10 * MiB,
                                 20 * MiB, 20 * MiB + 1, 2 * MiB)},
      {3, gen::inRange<uint64_t>(MiB + 1, 10 * MiB)},
      {2, gen::inRange<uint64_t>(10 * MiB, 64 * MiB)},
      {1, gen::inRange<uint64_t>(64 * MiB, 400 * MiB)},
  });
}

inline rc::Gen<AllocConf> alloc_conf() {
  using namespace rc;
  return gen::apply(
      [](bool expandable, int max_split_mb, uint64_t uniform_divisions, std::vector<uint64_t> list,
         bool use_list, int gc_percent, int non_split_mb, int large_segment_mb) {
        AllocConf c;
        c.expandable_segments = expandable;
        // PyTorch bounds max_split_size_mb and max_non_split_rounding_mb by it from below.
        c.large_segment_size = static_cast<uint64_t>(large_segment_mb) * MiB;
        max_split_mb = max_split_mb > 0 ? std::max(max_split_mb, large_segment_mb) : 0;
        non_split_mb = std::max(non_split_mb, large_segment_mb);
        if (max_split_mb > 0) c.max_split_size = static_cast<uint64_t>(max_split_mb) * MiB;
        if (use_list) {
          for (size_t i = 0; i < list.size() && i < c.roundup_power2_divisions.size(); ++i) {
            c.roundup_power2_divisions[i] = list[i];
          }
        } else {
          c.roundup_power2_divisions.fill(uniform_divisions);
        }
        if (gc_percent > 0) c.garbage_collection_threshold = gc_percent / 100.0;
        c.max_non_split_rounding = static_cast<uint64_t>(non_split_mb) * MiB;
        return c;
      },
      gen::arbitrary<bool>(),
      gen::weightedOneOf<int>({{2, gen::just(0)}, {1, gen::inRange(20, 300)}}),
      gen::element<uint64_t>(0, 0, 1, 2, 4, 8, 16),
      gen::container<std::vector<uint64_t>>(16, gen::element<uint64_t>(0, 1, 2, 4, 8)),
      gen::arbitrary<bool>(),
      gen::weightedOneOf<int>({{2, gen::just(0)}, {1, gen::inRange(1, 100)}}),
      gen::weightedOneOf<int>({{3, gen::just(20)}, {1, gen::inRange(20, 200)}}),
      gen::weightedOneOf<int>({{4, gen::just(20)}, {1, gen::inRange(11, 80)}}));
}

inline rc::Gen<testing::HarnessConfig> harness_config() {
  using namespace rc;
  return gen::apply(
      [](AllocConf conf, uint64_t capacity_mib, uint64_t context_mib,
         std::vector<uint64_t> fail_mallocs, std::vector<uint64_t> fail_maps) {
        testing::HarnessConfig c;
        c.conf = std::move(conf);
        c.capacity = capacity_mib * MiB;
        c.context_bytes = std::min(context_mib, capacity_mib / 2) * MiB;
        c.failing_mallocs = std::move(fail_mallocs);
        c.failing_maps = std::move(fail_maps);
        return c;
      },
      alloc_conf(), gen::inRange<uint64_t>(64, 4096), gen::inRange<uint64_t>(0, 200),
      gen::resize(3, gen::container<std::vector<uint64_t>>(gen::inRange<uint64_t>(1, 60))),
      gen::resize(3, gen::container<std::vector<uint64_t>>(gen::inRange<uint64_t>(1, 60))));
}

inline rc::Gen<testing::Op> op() {
  using namespace rc;
  using testing::Op;
  auto malloc_op = gen::apply(
      [](uint64_t size, StreamId stream, uint8_t pool) {
        Op o;
        o.kind = Op::kMalloc;
        o.size = size;
        o.stream = stream;
        o.pool = pool;  // mostly the ordinary pools, at times a capture's
        return o;
      },
      request_size(), gen::element<StreamId>(0, 0, 0, 7, 0x3d9a1e50),
      gen::element<uint8_t>(0, 0, 0, 0, 0, 0, 1, 2));
  auto pick = [](Op::Kind kind) {
    return gen::map(gen::inRange<uint32_t>(0, 64), [kind](uint32_t which) {
      Op o;
      o.kind = kind;
      o.which = which;
      return o;
    });
  };
  auto fraction = gen::map(gen::inRange(5, 101), [](int percent) {
    Op o;
    o.kind = Op::kSetFraction;
    o.fraction = percent / 100.0;
    return o;
  });
  Op empty;
  empty.kind = Op::kEmptyCache;
  auto release_pool =
      gen::map(gen::inRange<uint8_t>(1, testing::AllocatorHarness::kPools + 1), [](uint8_t pool) {
        Op o;
        o.kind = Op::kReleasePool;
        o.pool = pool;
        return o;
      });
  return gen::weightedOneOf<Op>({{10, malloc_op},
                                 {6, pick(Op::kFree)},
                                 {2, pick(Op::kFreeDeferred)},
                                 {2, pick(Op::kCompleteDeferred)},
                                 {1, gen::just(empty)},
                                 {1, fraction},
                                 {1, release_pool}});
}

}  // namespace allocsim::proptests
