// SortedKeys: a set of unique keys kept as one sorted vector, the layout of the free-block pools.
// A pool holds tens to a few thousand free blocks, where binary search over contiguous keys and
// a memmove on insert beat a tree's node allocation and pointer chasing. rekey() gives a member a
// new key (a free block split off or grown by a merge) moving only the keys between its old and
// new places, where an erase and an insert would each move the whole tail.
#pragma once

#include <algorithm>
#include <cassert>
#include <vector>

namespace allocsim {

template <class Key>
class SortedKeys {
 public:
  using const_iterator = typename std::vector<Key>::const_iterator;

  const_iterator begin() const { return keys_.begin(); }
  const_iterator end() const { return keys_.end(); }
  size_t size() const { return keys_.size(); }
  bool empty() const { return keys_.empty(); }

  // The first member not less than `key`.
  const_iterator lower_bound(const Key& key) const {
    return std::lower_bound(keys_.begin(), keys_.end(), key);
  }

  // `key` must not be a member.
  void insert(const Key& key) { keys_.insert(lower_bound(key), key); }

  // `key` must be a member.
  void erase(const Key& key) {
    const const_iterator at = lower_bound(key);
    assert(at != end() && !(key < *at));
    keys_.erase(at);
  }
  void erase(const_iterator at) { keys_.erase(at); }

  // Replaces the member at `at` by `key`, which must not be a member.
  void rekey(const_iterator at, const Key& key) {
    const auto p = keys_.begin() + (at - keys_.cbegin());
    if (p != keys_.begin() && key < *(p - 1)) {  // moves down: shift the keys between up
      const auto q = std::lower_bound(keys_.begin(), p, key);
      std::move_backward(q, p, p + 1);
      *q = key;
    } else if (p + 1 != keys_.end() && *(p + 1) < key) {  // moves up: shift them down
      const auto q = std::lower_bound(p + 1, keys_.end(), key);
      std::move(p + 1, q, p);
      *(q - 1) = key;
    } else {
      *p = key;
    }
  }

 private:
  std::vector<Key> keys_;
};

}  // namespace allocsim
