// SortedKeys: a set of unique keys kept sorted in one contiguous buffer, the layout of the
// free-block pools. A pool holds tens to a few thousand free blocks, where binary search over
// contiguous keys and a short memmove on insert beat a tree's node allocation and pointer chasing.
//
// The keys sit in the middle of the buffer with room on both sides, so an insert or erase moves
// whichever side of its position is shorter. Freed blocks often land near one end of the size
// order (in llama-varlen, with three quarters of a 70-block pool above them), where a vector moves
// most of the pool each time. rekey() gives a member a new key (a free block split off or grown by
// a merge) moving only the keys between its old and new places.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstring>
#include <type_traits>
#include <vector>

namespace allocsim {

template <class Key>
class SortedKeys {
  static_assert(std::is_trivially_copyable_v<Key>, "keys are moved with memmove");

 public:
  using const_iterator = const Key*;

  const_iterator begin() const { return buffer_.data() + first_; }
  const_iterator end() const { return buffer_.data() + last_; }
  size_t size() const { return last_ - first_; }
  bool empty() const { return first_ == last_; }

  // The first member not less than `key`.
  const_iterator lower_bound(const Key& key) const { return std::lower_bound(begin(), end(), key); }

  // `key` must not be a member.
  void insert(const Key& key) {
    const size_t i = static_cast<size_t>(lower_bound(key) - begin());
    const bool front = i < size() / 2;
    if (front ? first_ == 0 : last_ == buffer_.size()) recentre();
    Key* keys = buffer_.data() + first_;
    if (front) {  // shift the keys before it down
      std::memmove(keys - 1, keys, i * sizeof(Key));
      --first_;
      --keys;
    } else {  // shift the keys after it up
      std::memmove(keys + i + 1, keys + i, (size() - i) * sizeof(Key));
      ++last_;
    }
    keys[i] = key;
  }

  // `key` must be a member.
  void erase(const Key& key) {
    const const_iterator at = lower_bound(key);
    assert(at != end() && !(key < *at));
    erase(at);
  }
  void erase(const_iterator at) {
    const size_t i = static_cast<size_t>(at - begin());
    Key* keys = buffer_.data() + first_;
    if (i < size() / 2) {  // close the gap from below
      std::memmove(keys + 1, keys, i * sizeof(Key));
      ++first_;
    } else {
      std::memmove(keys + i, keys + i + 1, (size() - i - 1) * sizeof(Key));
      --last_;
    }
  }

  // Replaces the member at `at` by `key`, which must not be a member.
  void rekey(const_iterator at, const Key& key) {
    Key* const p = buffer_.data() + (at - buffer_.data());
    if (at != begin() && key < *(at - 1)) {  // moves down: shift the keys between up
      Key* const q = buffer_.data() + (std::lower_bound(begin(), at, key) - buffer_.data());
      std::memmove(q + 1, q, static_cast<size_t>(p - q) * sizeof(Key));
      *q = key;
    } else if (at + 1 != end() && *(at + 1) < key) {  // moves up: shift them down
      Key* const q = buffer_.data() + (std::lower_bound(at + 1, end(), key) - buffer_.data());
      std::memmove(p, p + 1, static_cast<size_t>(q - p - 1) * sizeof(Key));
      *(q - 1) = key;
    } else {
      *p = key;
    }
  }

 private:
  // Moves the keys to the middle of a buffer with as much room again on each side (growing it
  // when they fill more than half), so that many inserts pass before the next recentre.
  void recentre() {
    const size_t n = size();
    const size_t capacity = std::max<size_t>(16, 3 * n);
    std::vector<Key> buffer(capacity);
    const size_t first = (capacity - n) / 2;
    if (n > 0) std::memcpy(buffer.data() + first, begin(), n * sizeof(Key));
    buffer_.swap(buffer);
    first_ = first;
    last_ = first + n;
  }

  std::vector<Key> buffer_;
  size_t first_ = 0;  // the members are buffer_[first_, last_)
  size_t last_ = 0;
};

}  // namespace allocsim
