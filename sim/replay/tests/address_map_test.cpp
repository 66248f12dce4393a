#include "sim/replay/address_map.hpp"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace allocsim {
namespace {

TEST(AddressMap, PutFindErase) {
  AddressMap m;
  EXPECT_FALSE(m.find(512));
  m.put(512, 1);
  m.put(1024, 2);
  m.put(512, 3);  // overwrites
  EXPECT_EQ(m.find(512), 3u);
  EXPECT_EQ(m.find(1024), 2u);
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.erase(512), 3u);
  EXPECT_FALSE(m.erase(512));
  EXPECT_FALSE(m.find(512));
  EXPECT_EQ(m.find(1024), 2u);
  m.put(0, 7);  // every key is a key, 0 and the largest too
  m.put(UINT64_MAX, 8);
  EXPECT_EQ(m.find(0), 7u);
  EXPECT_EQ(m.find(UINT64_MAX), 8u);
  EXPECT_EQ(m.lookup(512), nullptr);
  *m.lookup(1024) = 5;  // changed in place
  EXPECT_EQ(m.find(1024), 5u);
}

// Random operations over a small key space (long probe runs, wrap-around, deletions inside runs)
// against std::unordered_map.
TEST(AddressMap, AgreesWithUnorderedMap) {
  std::mt19937_64 rng(42);
  AddressMap m;
  std::unordered_map<uint64_t, uint32_t> want;
  for (int step = 0; step < 200000; ++step) {
    // Now and then 0, which marks an unused slot inside the map.
    const uint64_t key = rng() % 100 == 0 ? 0 : (rng() % 3000) * 512 + 0x7f0000000000;
    const int op = static_cast<int>(rng() % 4);
    if (op == 0) {
      const auto value = static_cast<uint32_t>(rng());
      m.put(key, value);
      want[key] = value;
    } else if (op == 1) {
      const auto it = want.find(key);
      const std::optional<uint32_t> erased = m.erase(key);
      ASSERT_EQ(erased.has_value(), it != want.end()) << "step " << step;
      if (erased) {
        EXPECT_EQ(*erased, it->second);
        want.erase(it);
      }
    } else if (op == 2) {
      uint32_t* value = m.lookup(key);
      const auto it = want.find(key);
      ASSERT_EQ(value != nullptr, it != want.end()) << "step " << step;
      if (value) *value = it->second = static_cast<uint32_t>(rng());
    } else {
      const auto it = want.find(key);
      const std::optional<uint32_t> got = m.find(key);
      ASSERT_EQ(got.has_value(), it != want.end()) << "step " << step;
      if (got) {
        EXPECT_EQ(*got, it->second);
      }
    }
    ASSERT_EQ(m.size(), want.size());
  }
  for (const auto& [key, value] : want) EXPECT_EQ(m.find(key), value);
}

}  // namespace
}  // namespace allocsim
