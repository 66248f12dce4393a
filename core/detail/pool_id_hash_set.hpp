// PoolIdHashSet: a set of MemPool ids kept in the order PyTorch's allocator iterates its own
// (ska::flat_hash_set<MempoolId_t, MempoolIdHash>, c10/util/flat_hash_map.h): PyTorch tries its
// use_on_oom pools in that order, and the first that holds a fitting block serves the request.
//
// That set is a Robin Hood table with Fibonacci hashing: 4 slots at the first insert, twice as
// many each time it would be more than half full (or a key would probe max_lookups slots), a key
// hashed to slot (h * 11400714819323198485) >> (64 - log2(slots)), where h is the id's first
// half, or its second where the first is 0 (MempoolIdHash), and iteration runs over the slots in
// order, the max_lookups overflow slots past the end included. Erasing shifts the keys after it
// back. The few pools a process makes make every operation cheap.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/types.hpp"

namespace allocsim {

class PoolIdHashSet {
 public:
  bool contains(const MempoolId& id) const { return find(id).has_value(); }
  bool empty() const { return size_ == 0; }

  void insert(const MempoolId& id) {
    if (contains(id)) return;
    for (;;) {
      if (slots_ == 0 || size_ + 1 > slots_ / 2 || !try_place(id)) {
        rehash(std::max<uint64_t>(4, 2 * slots_));
        continue;
      }
      ++size_;
      return;
    }
  }

  void erase(const MempoolId& id) {
    const std::optional<size_t> at = find(id);
    if (!at) return;
    size_t i = *at;
    entries_[i].reset();
    // Backward shift: each key after it that is not at its own slot moves up one.
    while (i + 1 < entries_.size() && entries_[i + 1] && entries_[i + 1]->distance > 0) {
      entries_[i] = entries_[i + 1];
      entries_[i]->distance--;
      entries_[i + 1].reset();
      ++i;
    }
    --size_;
  }

  // The ids in the set's iteration order.
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& e : entries_) {
      if (e) f(e->id);
    }
  }

 private:
  struct Entry {
    MempoolId id;
    int distance;  // from the slot its hash names
  };

  static uint64_t hash(const MempoolId& id) { return id.first != 0 ? id.first : id.second; }
  size_t home(const MempoolId& id) const {
    const int shift = 64 - std::countr_zero(slots_);
    return static_cast<size_t>((hash(id) * 11400714819323198485ull) >> shift);
  }
  int max_lookups() const { return std::max(4, std::countr_zero(slots_)); }

  std::optional<size_t> find(const MempoolId& id) const {
    if (slots_ == 0) return std::nullopt;
    size_t i = home(id);
    for (int d = 0; i < entries_.size() && entries_[i] && entries_[i]->distance >= d; ++d, ++i) {
      if (entries_[i]->id == id) return i;
    }
    return std::nullopt;
  }

  // Robin Hood insertion as sherwood_v3_table's emplace makes it; false where a key would
  // probe max_lookups slots (the table then grows and every key goes in again).
  bool try_place(const MempoolId& id) {
    size_t i = home(id);
    int d = 0;
    while (i < entries_.size() && entries_[i] && entries_[i]->distance >= d) {
      ++i;
      ++d;
    }
    if (d == max_lookups() || i >= entries_.size()) return false;
    if (!entries_[i]) {
      entries_[i] = Entry{id, d};
      return true;
    }
    std::vector<std::optional<Entry>> saved = entries_;
    Entry moving{id, d};
    std::swap(moving, *entries_[i]);
    for (++moving.distance, ++i; i < entries_.size(); ++i) {
      if (!entries_[i]) {
        entries_[i] = moving;
        return true;
      }
      if (entries_[i]->distance < moving.distance) {
        std::swap(moving, *entries_[i]);
        ++moving.distance;
      } else if (++moving.distance == max_lookups()) {
        break;
      }
    }
    entries_ = std::move(saved);
    return false;
  }

  void rehash(uint64_t slots) {
    std::vector<MempoolId> ids;
    for_each([&](const MempoolId& id) { ids.push_back(id); });
    slots_ = std::bit_ceil(slots);
    entries_.assign(slots_ + static_cast<uint64_t>(max_lookups()) - 1, std::nullopt);
    size_ = 0;
    for (const MempoolId& id : ids) {
      if (!try_place(id)) {
        rehash(2 * slots_);
        return;
      }
      ++size_;
    }
  }

  std::vector<std::optional<Entry>> entries_;
  uint64_t slots_ = 0;
  size_t size_ = 0;
};

}  // namespace allocsim
