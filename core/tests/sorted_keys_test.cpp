#include "core/sorted_keys.hpp"

#include <gtest/gtest.h>

#include <iterator>
#include <random>
#include <set>
#include <vector>

namespace allocsim {
namespace {

std::vector<int> members(const SortedKeys<int>& keys) {
  return {keys.begin(), keys.end()};
}

TEST(SortedKeys, InsertEraseRekey) {
  SortedKeys<int> keys;
  for (int k : {50, 10, 40, 20, 30}) keys.insert(k);
  EXPECT_EQ(members(keys), (std::vector<int>{10, 20, 30, 40, 50}));
  EXPECT_EQ(*keys.lower_bound(25), 30);
  EXPECT_EQ(keys.lower_bound(60), keys.end());
  keys.rekey(keys.lower_bound(40), 5);  // down past everything
  EXPECT_EQ(members(keys), (std::vector<int>{5, 10, 20, 30, 50}));
  keys.rekey(keys.lower_bound(5), 60);  // up past everything
  EXPECT_EQ(members(keys), (std::vector<int>{10, 20, 30, 50, 60}));
  keys.rekey(keys.lower_bound(30), 35);  // stays in place
  EXPECT_EQ(members(keys), (std::vector<int>{10, 20, 35, 50, 60}));
  keys.erase(20);
  keys.erase(keys.begin());
  EXPECT_EQ(members(keys), (std::vector<int>{35, 50, 60}));
  EXPECT_EQ(keys.size(), 3u);
}

// Inserts and erases that all land at one end: each side runs out of room in turn, and the keys
// are moved to the middle of a larger buffer without losing or reordering any.
TEST(SortedKeys, GrowsAtEitherEnd) {
  SortedKeys<int> keys;
  std::vector<int> want;
  for (int k = 0; k < 1000; ++k) {  // below everything: the front side
    keys.insert(-k);
    want.insert(want.begin(), -k);
  }
  for (int k = 1; k < 1000; ++k) {  // above everything: the back side
    keys.insert(k);
    want.push_back(k);
  }
  ASSERT_EQ(members(keys), want);
  for (int i = 0; i < 500; ++i) {  // erase from the front, then insert there again
    keys.erase(keys.begin());
    want.erase(want.begin());
  }
  for (int k = 0; k < 700; ++k) {
    keys.insert(-2000 - k);
    want.insert(want.begin(), -2000 - k);
  }
  EXPECT_EQ(members(keys), want);
  EXPECT_EQ(*keys.lower_bound(-2000), -2000);
  EXPECT_EQ(keys.lower_bound(5000), keys.end());
}

// Random operations against std::set: rekey must leave the same members in the same order as an
// erase followed by an insert.
TEST(SortedKeys, AgreesWithStdSet) {
  std::mt19937 rng(7);
  SortedKeys<int> keys;
  std::set<int> want;
  for (int step = 0; step < 100000; ++step) {
    const int key = static_cast<int>(rng() % 500);
    const int op = static_cast<int>(rng() % 3);
    if (op == 0 && !want.count(key)) {
      keys.insert(key);
      want.insert(key);
    } else if (op == 1 && want.count(key)) {
      keys.erase(key);
      want.erase(key);
    } else if (op == 2 && !want.empty() && !want.count(key)) {
      const int old = *std::next(want.begin(), static_cast<long>(rng() % want.size()));
      keys.rekey(keys.lower_bound(old), key);
      want.erase(old);
      want.insert(key);
    }
    ASSERT_EQ(keys.size(), want.size()) << "step " << step;
    if (step % 97 == 0) {
      ASSERT_EQ(members(keys), std::vector<int>(want.begin(), want.end())) << "step " << step;
    }
  }
  EXPECT_EQ(members(keys), std::vector<int>(want.begin(), want.end()));
}

}  // namespace
}  // namespace allocsim
