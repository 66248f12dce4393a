// PoolIdHashSet iterates as PyTorch's ska::flat_hash_set of MemPool ids does.
#include <gtest/gtest.h>

#include <vector>

#include "core/detail/pool_id_hash_set.hpp"

namespace allocsim {
namespace {

std::vector<uint64_t> order(const PoolIdHashSet& set) {
  std::vector<uint64_t> ids;
  set.for_each([&](const MempoolId& id) { ids.push_back(id.second); });
  return ids;
}

TEST(PoolIdHashSet, IteratesInFibonacciSlotOrder) {
  PoolIdHashSet set;
  for (const uint64_t id : {2, 12, 18, 20}) set.insert(MempoolId{0, id});
  // Eight slots (the third insert grows the table past half full): (id * 11400714819323198485)
  // >> 61 puts 18 in slot 0, 2 in 1, 20 in 2, 12 in 3. (A calls-shape program recorded on an
  // H100 had PyTorch serve a request from pool 20 where 12, made first, also fit.)
  EXPECT_EQ(order(set), (std::vector<uint64_t>{18, 2, 20, 12}));
  set.insert(MempoolId{0, 12});  // once only
  EXPECT_EQ(order(set), (std::vector<uint64_t>{18, 2, 20, 12}));
  set.erase(MempoolId{0, 2});
  EXPECT_EQ(order(set), (std::vector<uint64_t>{18, 20, 12}));
  EXPECT_FALSE(set.contains(MempoolId{0, 2}));
  EXPECT_TRUE(set.contains(MempoolId{0, 20}));
}

TEST(PoolIdHashSet, CollidingIdsProbeOnwardAndShiftBackWhenErased) {
  PoolIdHashSet set;
  // In four slots 2 and 12 both hash to slot 0: 12 goes to slot 1.
  set.insert(MempoolId{0, 2});
  set.insert(MempoolId{0, 12});
  EXPECT_EQ(order(set), (std::vector<uint64_t>{2, 12}));
  set.erase(MempoolId{0, 2});
  EXPECT_EQ(order(set), (std::vector<uint64_t>{12}));
  EXPECT_TRUE(set.contains(MempoolId{0, 12}));
  // A graph pool's id hashes by its first half.
  set.insert(MempoolId{5, 0});
  EXPECT_TRUE(set.contains(MempoolId{5, 0}));
  EXPECT_FALSE(set.empty());
}

}  // namespace
}  // namespace allocsim
