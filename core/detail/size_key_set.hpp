// SizeKeySet: the free blocks of a pool, ordered by (stream, size, address) as PyTorch's BlockPool
// orders them, so that lower_bound is best fit on a stream.
//
// Kept in buckets rather than one sorted array: per stream (a process uses a few), then per size
// class, 16 classes to each power of two as TLSF allocators divide sizes, each class a short sorted
// vector, with a bitmap of the classes that hold any. Best fit is then the class of the size, a
// few keys searched there, and else the least key of the next class the bitmap shows: where a
// binary search over the whole pool (tens of keys in a training job) mispredicts a branch at every
// other step, and an insert or erase moves a long run of keys. The order, and so every decision the
// allocator makes from it, is the same as one sorted array's.
//
// A class is sorted from its greatest key down, so that its least key is last. Best fit mostly
// takes a least key (in the training traces a class a request searches mostly holds blocks of one
// size, taken lowest address first), and erasing the last key moves none; and as low addresses are
// taken first, they come back first, and a freed block goes in near the end, so few keys move.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "core/detail/block.hpp"

namespace allocsim {

// A free mapped block's place in its pool.
struct SizeKey {
  StreamId stream;
  uint64_t size;
  uint64_t ptr;
  BlockId id;
  bool operator<(const SizeKey& o) const {
    return std::tie(stream, size, ptr) < std::tie(o.stream, o.size, o.ptr);
  }
};

// (size, address) order for keys of one stream, without branches: the outcome of comparing two
// free blocks is data the branch predictor cannot learn.
inline bool size_then_address_less(const SizeKey& a, const SizeKey& b) {
  return (a.size < b.size) | ((a.size == b.size) & (a.ptr < b.ptr));
}

// One size class's keys: a growable array that keeps its count, so that its size is a load, not a
// subtraction and a shift (best fit, find, insert and erase each ask it: with std::vector, a
// twentieth of a replay's instructions went to these).
class ClassKeys {
 public:
  ClassKeys() = default;
  // A moved-from class is empty (a new stream's keys move the others along in their vector).
  ClassKeys(ClassKeys&& o) noexcept
      : keys_(std::move(o.keys_)),
        size_(std::exchange(o.size_, 0)),
        capacity_(std::exchange(o.capacity_, 0)) {}
  ClassKeys& operator=(ClassKeys&& o) noexcept {
    keys_ = std::move(o.keys_);
    size_ = std::exchange(o.size_, 0);
    capacity_ = std::exchange(o.capacity_, 0);
    return *this;
  }

  uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  SizeKey* data() { return keys_.get(); }
  const SizeKey* data() const { return keys_.get(); }
  SizeKey* begin() { return data(); }
  SizeKey* end() { return data() + size_; }
  const SizeKey* begin() const { return data(); }
  const SizeKey* end() const { return data() + size_; }
  SizeKey& operator[](size_t i) { return keys_[i]; }
  const SizeKey& operator[](size_t i) const { return keys_[i]; }
  const SizeKey& back() const { return keys_[size_ - 1]; }
  void push_back(const SizeKey& key) {
    if (size_ == capacity_) grow();
    keys_[size_++] = key;
  }
  void pop_back() { --size_; }

 private:
  [[gnu::noinline]] void grow() {
    capacity_ = capacity_ == 0 ? 4 : 2 * capacity_;
    auto grown = std::make_unique_for_overwrite<SizeKey[]>(capacity_);
    std::copy(begin(), end(), grown.get());
    keys_ = std::move(grown);
  }

  std::unique_ptr<SizeKey[]> keys_;
  uint32_t size_ = 0;
  uint32_t capacity_ = 0;
};

class SizeKeySet {
  static constexpr uint32_t kSubdivisionBits = 4;  // 16 classes per power of two
  static constexpr uint32_t kMinSizeLog2 = 9;      // blocks are multiples of 512 bytes
  static constexpr uint32_t kClasses = (64 - kMinSizeLog2) << kSubdivisionBits;
  static constexpr uint32_t kWords = (kClasses + 63) / 64;

  // One stream's keys: a sorted array per size class, and which classes hold any.
  struct StreamKeys {
    StreamId stream;
    std::array<ClassKeys, kClasses> classes{};
    std::array<uint64_t, kWords> nonempty{};

    // The first class at or after `c` that holds keys; kClasses if none.
    uint32_t next_class(uint32_t c) const {
      for (uint32_t w = c / 64; w < kWords; ++w) {
        const uint64_t bits = w == c / 64 ? nonempty[w] & (~uint64_t{0} << (c % 64)) : nonempty[w];
        if (bits != 0) return w * 64 + static_cast<uint32_t>(std::countr_zero(bits));
      }
      return kClasses;
    }
    // The last class before `c` that holds keys; kClasses if none.
    uint32_t prev_class(uint32_t c) const {
      if (c == 0) return kClasses;
      const uint32_t last = c - 1;
      for (uint32_t w = last / 64 + 1; w-- > 0;) {
        uint64_t bits = nonempty[w];
        if (w == last / 64) bits &= ~uint64_t{0} >> (63 - last % 64);
        if (bits != 0) return w * 64 + 63 - static_cast<uint32_t>(std::countl_zero(bits));
      }
      return kClasses;
    }
  };

 public:
  // A position: stream, class, index in the class (stream_count_ for the end), and the key there.
  class const_iterator {
   public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = SizeKey;
    using difference_type = std::ptrdiff_t;
    using pointer = const SizeKey*;
    using reference = const SizeKey&;

    const_iterator() = default;
    reference operator*() const { return *key_; }
    pointer operator->() const { return key_; }
    // A key's place in memory is its position: one comparison, not three.
    bool operator==(const const_iterator& o) const { return key_ == o.key_; }
    // Within a class, the next key in order is the one before in the vector.
    const_iterator& operator++() {
      if (index_ > 0) {
        --index_;
        --key_;
        return *this;
      }
      *this = set_->first_from(stream_, class_ + 1);
      return *this;
    }
    const_iterator& operator--() {  // not at begin()
      if (key_ != nullptr && index_ + 1 < set_->streams_[stream_].classes[class_].size()) {
        ++index_;
        ++key_;
        return *this;
      }
      for (;;) {
        if (stream_ < set_->stream_count_) {
          const uint32_t c = set_->streams_[stream_].prev_class(class_);
          if (c != kClasses) {  // its greatest key
            class_ = c;
            index_ = 0;
            key_ = set_->streams_[stream_].classes[c].data();
            return *this;
          }
        }
        assert(stream_ > 0);
        --stream_;
        class_ = kClasses;
      }
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      ++*this;
      return old;
    }
    const_iterator operator--(int) {
      const_iterator old = *this;
      --*this;
      return old;
    }

   private:
    friend class SizeKeySet;
    const_iterator(const SizeKeySet* set, uint32_t stream, uint32_t cls, uint32_t index,
                   const SizeKey* key)
        : set_(set), key_(key), stream_(stream), class_(cls), index_(index) {}

    const SizeKeySet* set_ = nullptr;
    const SizeKey* key_ = nullptr;  // null at the end
    uint32_t stream_ = 0;
    uint32_t class_ = 0;
    uint32_t index_ = 0;
  };

  const_iterator begin() const { return first_from(0, 0); }
  const_iterator end() const { return {this, stream_count_, 0, 0, nullptr}; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // The first member not less than `key`.
  const_iterator lower_bound(const SizeKey& key) const {
    const uint32_t s = stream_index(key.stream);
    if (s == stream_count_ || streams_[s].stream != key.stream) return first_from(s, 0);
    const uint32_t c = size_class(key.size);
    const ClassKeys& keys = streams_[s].classes[c];
    const uint32_t at_least = count_at_least(keys, key);
    if (at_least > 0) return {this, s, c, at_least - 1, &keys[at_least - 1]};
    return first_from(s, c + 1);
  }

  // The position of member `key`. A search by halves with conditional moves, unlike
  // count_at_least's: the address decides each step, and is data the predictor cannot learn.
  const_iterator find(const SizeKey& key) const {
    const uint32_t s = stream_index(key.stream);
    assert(s < stream_count_ && streams_[s].stream == key.stream);
    const uint32_t c = size_class(key.size);
    const ClassKeys& keys = streams_[s].classes[c];
    // Keys not less than `key` come first; `key` is the last of them.
    const SizeKey* base = keys.data();
    for (size_t n = keys.size(); n > 1;) {
      const size_t half = n / 2;
      // A mask, not a ?: which gcc compiled to a branch.
      base += half & (size_t{0} - !size_then_address_less(base[half], key));
      n -= half;
    }
    assert(base->id == key.id);
    return {this, s, c, static_cast<uint32_t>(base - keys.data()), base};
  }

  // `key` must not be a member.
  void insert(const SizeKey& key) {
    uint32_t s = stream_index(key.stream);
    if (s == stream_count_ || streams_[s].stream != key.stream) add_stream(s, key.stream);
    insert_in_class(streams_[s], size_class(key.size), key);
    ++size_;
  }

  // `key` must be a member.
  void erase(const SizeKey& key) { erase(find(key)); }
  void erase(const_iterator at) {
    erase_from_class(streams_[at.stream_], at.class_, at.index_);
    --size_;
  }

  // Replaces the member at `at` by `key`, which must not be a member, on the same stream (a split
  // remainder or a merged block: a segment's blocks share its stream).
  void rekey(const_iterator at, SizeKey key) {  // by value: the shifts below cannot overwrite it
    StreamKeys& s = streams_[at.stream_];
    assert(s.stream == key.stream);
    const uint32_t c = size_class(key.size);
    if (c != at.class_) {
      erase_from_class(s, at.class_, at.index_);
      insert_in_class(s, c, key);
      return;
    }
    // Within its class: shift only the keys between the old place and the new, one at a time.
    SizeKey* const keys = s.classes[at.class_].data();
    const size_t n = s.classes[at.class_].size();
    size_t i = at.index_;
    for (; i + 1 < n && size_then_address_less(key, keys[i + 1]); ++i) keys[i] = keys[i + 1];
    for (; i > 0 && size_then_address_less(keys[i - 1], key); --i) keys[i] = keys[i - 1];
    keys[i] = key;
  }

 private:
  // Sizes in [2^e, 2^(e+1)) fall in 16 classes of equal width; a larger size, a later class.
  // Without a branch: size >> (e - 4) is 16 plus the class within the power of two.
  static uint32_t size_class(uint64_t size) {
    size = std::max(size, uint64_t{1} << kMinSizeLog2);
    const uint32_t log2 = 63 - static_cast<uint32_t>(std::countl_zero(size));
    return (log2 << kSubdivisionBits) + static_cast<uint32_t>(size >> (log2 - kSubdivisionBits)) -
           ((kMinSizeLog2 + 1) << kSubdivisionBits);
  }

  // How many keys of one stream's class are not less than `key`: they come first, and the last
  // of them is the least. A best-fit query has address 0, and then sizes alone decide. A
  // branching search, not one of conditional moves: a predicted branch lets the next load start
  // early, where a conditional move waits for the last one.
  static uint32_t count_at_least(const ClassKeys& keys, const SizeKey& key) {
    // Mostly a best fit in a class of one size, as large as the request: every key is.
    if (key.ptr == 0 && !keys.empty() && keys.back().size >= key.size) {
      return static_cast<uint32_t>(keys.size());
    }
    const auto end =
        key.ptr == 0 ? std::partition_point(keys.begin(), keys.end(),
                                            [&](const SizeKey& k) { return k.size >= key.size; })
                     : std::partition_point(keys.begin(), keys.end(), [&](const SizeKey& k) {
                         return !size_then_address_less(k, key);
                       });
    return static_cast<uint32_t>(end - keys.begin());
  }

  // The first member in stream `s` from class `c` on, or in a later stream; end() if none.
  const_iterator first_from(uint32_t s, uint32_t c) const {
    for (; s < stream_count_; ++s, c = 0) {
      const uint32_t found = c < kClasses ? streams_[s].next_class(c) : kClasses;
      if (found != kClasses) {  // its least key
        const ClassKeys& keys = streams_[s].classes[found];
        const auto last = static_cast<uint32_t>(keys.size() - 1);
        return {this, s, found, last, &keys[last]};
      }
    }
    return end();
  }

  // Out of line: a StreamKeys is 21 KB, and building one inside insert() gave every insert a stack
  // frame that size, which a compiler with stack-clash protection probes page by page on each call
  // (a third of insert's time on the benchmark machine).
  [[gnu::noinline]] void add_stream(uint32_t s, StreamId stream) {
    streams_.insert(streams_.begin() + s, StreamKeys{stream});
    ++stream_count_;
  }

  // The index of the first stream not below `stream`. A process mostly uses one stream, and its
  // callers' test that they found it folds into the first test here.
  uint32_t stream_index(StreamId stream) const {
    if (stream_count_ > 0 && streams_[0].stream == stream) return 0;
    uint32_t s = 0;
    while (s < stream_count_ && streams_[s].stream < stream) ++s;
    return s;
  }

  // A class mostly holds a few keys: shifting them one at a time costs less than a binary search
  // and a call to memmove, which mispredict more; a branch to those for large classes costs
  // instructions even where none is large.
  static void insert_in_class(StreamKeys& s, uint32_t c, SizeKey key) {  // by value, as rekey's
    s.classes[c].push_back(key);
    s.nonempty[c / 64] |= uint64_t{1} << (c % 64);
    SizeKey* const keys = s.classes[c].data();
    // Mostly the class's new least key, which moves nothing: one test for that, with no branch on
    // whether the class was empty (a lone key is compared with itself).
    size_t i = s.classes[c].size() - 1;
    if (!size_then_address_less(keys[i - (i > 0)], key)) return;
    for (; i > 0 && size_then_address_less(keys[i - 1], key); --i) keys[i] = keys[i - 1];
    keys[i] = key;
  }

  static void erase_from_class(StreamKeys& s, uint32_t c, uint32_t index) {
    ClassKeys& keys = s.classes[c];
    if (index + 1 < keys.size())
      std::copy(keys.begin() + index + 1, keys.end(), keys.begin() + index);
    keys.pop_back();
    if (keys.empty()) s.nonempty[c / 64] &= ~(uint64_t{1} << (c % 64));
  }

  std::vector<StreamKeys> streams_;  // by stream; a stream stays once it has had a key
  // streams_.size(), kept: computing it divides by the size of a StreamKeys, on every lookup.
  uint32_t stream_count_ = 0;
  size_t size_ = 0;
};

}  // namespace allocsim
