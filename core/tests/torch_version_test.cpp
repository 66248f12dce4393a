// What changed in the allocator after PyTorch 2.11, release by release: each test fails on 2.11's
// policy.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/simulated_device.hpp"
#include "core/caching_allocator.hpp"

namespace allocsim {
namespace {

constexpr uint64_t MiB = 1 << 20;
constexpr uint64_t GiB = uint64_t{1} << 30;

struct Fixture {
  Fixture(TorchVersion version, AllocConf conf = {}, uint64_t capacity = GiB)
      : device(capacity, 0), allocator(device, options(version, std::move(conf))) {}
  static AllocatorOptions options(TorchVersion version, AllocConf conf) {
    AllocatorOptions o;
    o.conf = std::move(conf);
    o.torch_version = version;
    return o;
  }
  SimulatedDevice device;
  CachingAllocator allocator;
};

bool has_key(const DeviceStats& s, TorchVersion v, const std::string& key) {
  const auto flat = s.flatten(v);
  return std::any_of(flat.begin(), flat.end(), [&](const auto& kv) { return kv.first == key; });
}

TEST(TorchVersion, ParsesReleasesAsTorchVersionWritesThem) {
  EXPECT_EQ(TorchVersion::parse("2.13"), (TorchVersion{2, 13}));
  EXPECT_EQ(TorchVersion::parse("2.11.0+cu130"), (TorchVersion{2, 11}));
  EXPECT_EQ(TorchVersion::parse("2.14.0a0+git1234"), (TorchVersion{2, 14}));
  EXPECT_EQ(TorchVersion::parse("2.12.1"), (TorchVersion{2, 12}));
  EXPECT_FALSE(TorchVersion::parse("2"));
  EXPECT_FALSE(TorchVersion::parse("two.13"));
  EXPECT_FALSE(TorchVersion::parse("2.13x"));
  EXPECT_FALSE(TorchVersion::parse(""));
  EXPECT_LT((TorchVersion{2, 9}), (TorchVersion{2, 11}));
  EXPECT_EQ((TorchVersion{2, 13}).to_string(), "2.13");
}

TEST(TorchVersion, ThrowOnCudaMallocOomIsAKeyFrom212On) {
  EXPECT_THROW((void)parse_alloc_conf("throw_on_cudamalloc_oom:True", {2, 11}), AllocConfError);
  const AllocConf conf = parse_alloc_conf("throw_on_cudamalloc_oom:True", {2, 12});
  EXPECT_TRUE(conf.throw_on_cudamalloc_oom);
  EXPECT_EQ(parse_alloc_conf(conf.to_string(), {2, 12}), parse_alloc_conf(conf.source, {2, 12}));
  EXPECT_FALSE(parse_alloc_conf("throw_on_cudamalloc_oom:False", {2, 14}).throw_on_cudamalloc_oom);
  try {  // True or False only, as PyTorch's tokenizer reads a bool
    (void)parse_alloc_conf("throw_on_cudamalloc_oom:1", {2, 12});
    FAIL();
  } catch (const AllocConfError& e) {
    EXPECT_EQ(e.pytorch_message(),
              "Expected 'True' or 'False' at index 2 in ConfigTokenizer but got '1'");
  }
  try {
    check_known_to(conf, {2, 11});
    FAIL();
  } catch (const AllocConfError& e) {
    EXPECT_EQ(e.pytorch_message(),
              "Unrecognized key 'throw_on_cudamalloc_oom' in CUDA allocator config.");
  }
  EXPECT_NO_THROW(check_known_to(conf, {2, 12}));
}

// 2.12 on: over the settings' fraction, the request is refused before any device call or cache
// release, counted as a rejection and not as an OOM.
TEST(TorchVersion, ThrowOnCudaMallocOomRejectsBeforeReleasingTheCache) {
  const AllocConf conf =
      parse_alloc_conf("per_process_memory_fraction:0.5,throw_on_cudamalloc_oom:True", {2, 12});
  for (const TorchVersion v : {TorchVersion{2, 11}, TorchVersion{2, 12}}) {
    Fixture f(v, conf);
    f.allocator.set_memory_fraction(0.9);  // set_per_process_memory_fraction after the settings
    const BlockId a = f.allocator.malloc(300 * MiB, 0);
    ASSERT_NE(a, kNoBlock);
    f.allocator.free(a);  // cached: a release would make room
    const BlockId b = f.allocator.malloc(400 * MiB, 0);
    const DeviceStats& s = f.allocator.stats();
    if (v == TorchVersion{2, 11}) {  // no such setting: under the 0.9 cap, a new segment
      EXPECT_NE(b, kNoBlock);
      EXPECT_EQ(s.num_oom_rejections, 0);
      continue;
    }
    // Releasing the cached 300 MiB would have made room under the settings' 0.5: not tried.
    EXPECT_EQ(b, kNoBlock);
    EXPECT_EQ(s.num_oom_rejections, 1);
    EXPECT_EQ(s.num_ooms, 0);
    EXPECT_EQ(s.num_alloc_retries, 0);
    EXPECT_EQ(s.num_device_free, 0);
    EXPECT_EQ(s.num_sync_all_streams, 0);
    ASSERT_TRUE(f.allocator.last_oom());
    EXPECT_EQ(f.allocator.last_oom()->message(),
              "CUDA out of memory. Allocation was preemptively rejected because it would exceed "
              "per_process_memory_fraction limit. Requested size: 400.00 MiB");
    f.allocator.check_invariants();
  }
}

// Without a fraction in the settings the limit is the whole card: a request past it is refused
// without the cache release that would have made room.
TEST(TorchVersion, ThrowOnCudaMallocOomWithoutAFractionLimitsToTheCard) {
  AllocConf conf = parse_alloc_conf("throw_on_cudamalloc_oom:True", {2, 14});
  Fixture f({2, 14}, conf, 1 * GiB);
  const BlockId a = f.allocator.malloc(300 * MiB, 0);
  ASSERT_NE(a, kNoBlock);
  f.allocator.free(a);
  EXPECT_EQ(f.allocator.malloc(800 * MiB, 0), kNoBlock);
  EXPECT_EQ(f.allocator.stats().num_oom_rejections, 1);
  EXPECT_EQ(f.allocator.stats().reserved_bytes[kAggregate].current,
            static_cast<int64_t>(300 * MiB));
}

TEST(TorchVersion, NumOomRejectionsIsAStatisticFrom212On) {
  Fixture f({2, 12});
  EXPECT_FALSE(has_key(f.allocator.stats(), {2, 11}, "num_oom_rejections"));
  EXPECT_TRUE(has_key(f.allocator.stats(), {2, 12}, "num_oom_rejections"));
  DeviceStats s;
  s.num_oom_rejections = 3;
  s.reset_accumulated();
  EXPECT_EQ(s.num_oom_rejections, 0);
}

// 2.13 on: the fraction's byte limit is rounded, not truncated. 1.0 is no limit in every release
// (PyTorch 2.11 on an H100: no "allowed" in the OOM message after
// set_per_process_memory_fraction(1.0)).
TEST(TorchVersion, FractionLimitRoundedFrom213) {
  const uint64_t capacity = 1000;  // 0.3333 * 1000 = 333.3; 0.9996 * 1000 = 999.6
  Fixture old({2, 12}, {}, capacity);
  Fixture now({2, 13}, {}, capacity);
  old.allocator.set_memory_fraction(0.9996);
  now.allocator.set_memory_fraction(0.9996);
  EXPECT_EQ(old.allocator.allowed_memory_maximum(), 999u);
  EXPECT_EQ(now.allocator.allowed_memory_maximum(), 1000u);
  old.allocator.set_memory_fraction(1.0);
  now.allocator.set_memory_fraction(1.0);
  EXPECT_EQ(old.allocator.allowed_memory_maximum(), std::nullopt);
  EXPECT_EQ(now.allocator.allowed_memory_maximum(), std::nullopt);
  now.allocator.set_memory_fraction(0.3333);  // a limit again after none
  EXPECT_EQ(now.allocator.allowed_memory_maximum(), 333u);
}

int64_t stat(const DeviceStats& s, TorchVersion v, const std::string& key) {
  for (const auto& [k, value] : s.flatten(v))
    if (k == key) return value;
  ADD_FAILURE() << "no key " << key;
  return 0;
}

// 2.13 on: memory_stats' reserved_bytes_by_private_pools, per pool ("first_second"), as
// reserved_bytes; a pool's current drops to 0 when the pool is freed, the rest stays until reset.
TEST(TorchVersion, ReservedBytesByPrivatePoolsFrom213On) {
  Fixture f({2, 13});
  const MempoolId graph{1, 0}, mem_pool{0, 3};
  f.allocator.begin_allocate_to_pool(graph, 7);
  const BlockId a = f.allocator.malloc(30 * MiB, 7);  // a 30 MiB segment, large pool
  const BlockId b = f.allocator.malloc(1000, 7);      // a 2 MiB segment, small pool
  f.allocator.end_allocate_to_pool(graph);
  f.allocator.create_pool(mem_pool);
  f.allocator.begin_allocate_to_pool(mem_pool, 0);
  const BlockId c = f.allocator.malloc(4 * MiB, 0);  // 20 MiB
  f.allocator.end_allocate_to_pool(mem_pool);
  const BlockId d = f.allocator.malloc(4 * MiB, 0);  // the ordinary pool: in no private pool's
  const DeviceStats& s = f.allocator.stats();
  const TorchVersion v{2, 13};
  EXPECT_EQ(stat(s, v, "reserved_bytes_by_private_pools.1_0.all.current"), int64_t{32 * MiB});
  EXPECT_EQ(stat(s, v, "reserved_bytes_by_private_pools.1_0.large_pool.current"),
            int64_t{30 * MiB});
  EXPECT_EQ(stat(s, v, "reserved_bytes_by_private_pools.1_0.small_pool.peak"), int64_t{2 * MiB});
  EXPECT_EQ(stat(s, v, "reserved_bytes_by_private_pools.0_3.all.allocated"), int64_t{20 * MiB});
  EXPECT_EQ(stat(s, v, "reserved_bytes.all.current"), int64_t{72 * MiB});
  EXPECT_FALSE(has_key(s, {2, 12}, "reserved_bytes_by_private_pools.1_0.all.current"));

  // The graph's pool freed: its segments released, its current 0, its peak kept.
  f.allocator.free(a);
  f.allocator.free(b);
  f.allocator.release_pool(graph);
  f.allocator.empty_cache();
  EXPECT_EQ(stat(s, v, "reserved_bytes_by_private_pools.1_0.all.current"), 0);
  EXPECT_EQ(stat(s, v, "reserved_bytes_by_private_pools.1_0.all.peak"), int64_t{32 * MiB});
  EXPECT_EQ(stat(s, v, "reserved_bytes_by_private_pools.1_0.all.freed"), int64_t{32 * MiB});
  f.allocator.reset_peak_stats();
  EXPECT_EQ(stat(s, v, "reserved_bytes_by_private_pools.1_0.all.peak"), 0);
  EXPECT_EQ(stat(s, v, "reserved_bytes_by_private_pools.0_3.all.peak"), int64_t{20 * MiB});
  f.allocator.reset_accumulated_stats();
  EXPECT_EQ(stat(s, v, "reserved_bytes_by_private_pools.0_3.all.allocated"), 0);
  f.allocator.free(c);
  f.allocator.free(d);
  f.allocator.check_invariants();
}

}  // namespace
}  // namespace allocsim
