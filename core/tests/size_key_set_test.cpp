#include "core/detail/size_key_set.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <set>
#include <vector>

namespace allocsim {
namespace {

constexpr uint64_t MiB = 1 << 20;

std::vector<SizeKey> members(const SizeKeySet& keys) {
  return {keys.begin(), keys.end()};
}

bool same(const SizeKey& a, const SizeKey& b) {
  return a.stream == b.stream && a.size == b.size && a.ptr == b.ptr && a.id == b.id;
}

// A class's keys keep their order through growth, and a class moved from is empty and usable
// (a new stream's keys move the other streams' classes along).
TEST(ClassKeys, GrowsAndMovesFromEmpty) {
  ClassKeys a;
  for (BlockId id = 0; id < 100; ++id) a.push_back(SizeKey{0, 512, 512 * id, id});
  ASSERT_EQ(a.size(), 100u);
  for (BlockId id = 0; id < 100; ++id) EXPECT_EQ(a[id].id, id);
  ClassKeys b = std::move(a);
  EXPECT_EQ(b.size(), 100u);
  EXPECT_EQ(b.back().id, 99u);
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): what a move leaves is the point
  a.push_back(SizeKey{0, 1024, 0, 7});
  EXPECT_EQ(a.size(), 1u);
  EXPECT_EQ(a.back().id, 7u);
  a = std::move(b);
  EXPECT_EQ(a.size(), 100u);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move)
}

// The set against std::set under random inserts, erases, rekeys and lookups over three streams
// and sizes from 512 bytes to 64 GiB: the same members in the same order, forwards and backwards,
// and the same lower_bound for every probe.
TEST(SizeKeySet, OrdersAsOneSortedSequence) {
  std::mt19937_64 rng(7);
  SizeKeySet keys;
  std::set<SizeKey> want;
  auto random_key = [&](BlockId id) {
    const uint64_t size = uint64_t{512} << (rng() % 27);
    return SizeKey{rng() % 3 * 7, size + size / 512 * (rng() % 512) / 512 * 512, rng() % 64 * 512,
                   id};
  };
  auto check = [&] {
    ASSERT_EQ(keys.size(), want.size());
    std::vector<SizeKey> got = members(keys);
    ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end(), same));
    std::vector<SizeKey> backwards;
    for (auto it = keys.end(); it != keys.begin();) backwards.push_back(*--it);
    ASSERT_TRUE(std::equal(backwards.begin(), backwards.end(), want.rbegin(), want.rend(), same));
    for (int probe = 0; probe < 20; ++probe) {
      const SizeKey k = random_key(0);
      const auto a = keys.lower_bound(k);
      const auto b = want.lower_bound(k);
      ASSERT_EQ(a == keys.end(), b == want.end());
      if (b != want.end()) {
        ASSERT_TRUE(same(*a, *b));
      }
    }
  };
  for (BlockId id = 0; id < 4000; ++id) {
    const int op = static_cast<int>(rng() % 4);
    if (op < 2 || want.empty()) {
      const SizeKey k = random_key(id);
      if (want.count(k)) continue;
      keys.insert(k);
      want.insert(k);
    } else {
      auto pick = want.begin();
      std::advance(pick, static_cast<long>(rng() % want.size()));
      const SizeKey old = *pick;
      if (op == 2) {
        keys.erase(old);
        want.erase(old);
      } else {  // rekey: a split remainder or a merged block, on the same stream
        SizeKey k = random_key(id);
        k.stream = old.stream;
        if (want.count(k)) continue;
        keys.rekey(keys.lower_bound(old), k);
        want.erase(old);
        want.insert(k);
      }
    }
    if (id % 97 == 0) check();
  }
  check();
}

// find() in classes of 1 to 100 keys (sizes within one class, and many of one size): every member's
// position is lower_bound's, and erasing by key in random order leaves the others in order.
TEST(SizeKeySet, FindIsEachMembersPosition) {
  std::mt19937_64 rng(11);
  for (uint32_t count = 1; count <= 100; count += 9) {
    SizeKeySet keys;
    std::set<SizeKey> want;
    for (BlockId id = 0; want.size() < count; ++id) {
      const SizeKey k{3, 4 * MiB + rng() % 4 * 512, (rng() % 1000 + 1) * 512, id};
      if (want.insert(k).second) keys.insert(k);
    }
    for (const SizeKey& k : want) {
      const auto at = keys.find(k);
      ASSERT_TRUE(at == keys.lower_bound(k));
      ASSERT_TRUE(same(*at, k));
    }
    std::vector<SizeKey> order(want.begin(), want.end());
    std::shuffle(order.begin(), order.end(), rng);
    for (const SizeKey& k : order) {
      keys.erase(k);
      want.erase(k);
      std::vector<SizeKey> got = members(keys);
      ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end(), same));
    }
  }
}

// Best fit within a stream: the smallest size at least the request, the lowest address among
// equal sizes, found in a later size class when the request's own class has none big enough.
TEST(SizeKeySet, LowerBoundIsBestFitOnAStream) {
  SizeKeySet keys;
  keys.insert({0, 20 * MiB, 0x3000, 1});
  keys.insert({0, 20 * MiB, 0x1000, 2});
  keys.insert({0, 200 * MiB, 0x9000, 3});
  keys.insert({5, 2 * MiB, 0x5000, 4});
  EXPECT_EQ(keys.lower_bound({0, 19 * MiB, 0, 0})->id, 2u);   // same class, lower address first
  EXPECT_EQ(keys.lower_bound({0, 21 * MiB, 0, 0})->id, 3u);   // a later class
  EXPECT_EQ(keys.lower_bound({0, 300 * MiB, 0, 0})->id, 4u);  // none on stream 0: stream 5's first
  EXPECT_EQ(keys.lower_bound({5, 3 * MiB, 0, 0}), keys.end());
  keys.rekey(keys.lower_bound({0, 200 * MiB, 0x9000, 0}), {0, 4 * MiB, 0x9000, 3});
  EXPECT_EQ(keys.lower_bound({0, 1 * MiB, 0, 0})->id, 3u);
  keys.erase(keys.begin());
  EXPECT_EQ(keys.begin()->id, 2u);
  EXPECT_EQ(keys.size(), 3u);
}

// Many free blocks of one size: best fit takes them lowest address first, and
// each erase, insert and rekey keeps the rest in order, whatever the order they came in.
TEST(SizeKeySet, OneSizeManyBlocksGoLowestAddressFirst) {
  SizeKeySet keys;
  const std::vector<uint64_t> addresses = {7, 3, 9, 1, 5, 8, 2, 6, 4};
  for (uint64_t a : addresses) keys.insert({0, 20 * MiB, a * 20 * MiB, static_cast<BlockId>(a)});
  keys.insert({0, 18 * MiB, 100 * 20 * MiB, 100});  // a smaller class
  EXPECT_EQ(keys.lower_bound({0, 17 * MiB, 0, 0})->id, 100u);
  EXPECT_EQ(keys.lower_bound({0, 19 * MiB, 0, 0})->id, 1u);
  keys.erase(keys.lower_bound({0, 19 * MiB, 0, 0}));
  EXPECT_EQ(keys.lower_bound({0, 19 * MiB, 0, 0})->id, 2u);
  // The block at 6 is split: its remainder keeps its place in the pool, in a smaller class.
  keys.rekey(keys.lower_bound({0, 20 * MiB, 6 * 20 * MiB, 0}),
             {0, 19 * MiB, 6 * 20 * MiB + MiB, 6});
  EXPECT_EQ(keys.lower_bound({0, 19 * MiB, 0, 0})->id, 6u);
  // The block at 3 grows within its class (a merge): it moves past the other 20 MiB blocks.
  keys.rekey(keys.lower_bound({0, 20 * MiB, 3 * 20 * MiB, 0}),
             {0, 20 * MiB + MiB / 2, 3 * 20 * MiB, 3});
  std::vector<BlockId> order;
  for (const SizeKey& k : keys) order.push_back(k.id);
  EXPECT_EQ(order, (std::vector<BlockId>{100, 6, 2, 4, 5, 7, 8, 9, 3}));
  std::vector<BlockId> backwards;
  for (auto it = keys.end(); it != keys.begin();) backwards.push_back((--it)->id);
  EXPECT_EQ(backwards, (std::vector<BlockId>{3, 9, 8, 7, 5, 4, 2, 6, 100}));
}

}  // namespace
}  // namespace allocsim
