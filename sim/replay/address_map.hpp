// AddressMap: block address -> 32-bit value, for the live blocks of a replay (or every address a
// trace used). Open addressing with linear probing in power-of-two arrays, and backward-shift
// deletion (no tombstones), so that a lookup is a multiply and a short scan of adjacent slots, and
// inserting allocates nothing once the table has grown to the peak number of keys.
// std::unordered_map allocates a node for every insert; a replay inserts and erases one per block.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace allocsim {

// The lookups are always inlined: a unit with more replay code in it
// (sim/replay/prepared_trace.cpp) leaves them out of line, and the linker may keep its copy of the
// replay's loop for every unit.
class AddressMap {
 public:
  AddressMap() : keys_(16, kEmpty), values_(16), mask_(16 - 1), shift_(64 - 4) {}

  [[gnu::always_inline]] std::optional<uint32_t> find(uint64_t key) const {
    const uint32_t* v = value_of(key);
    return v ? std::optional<uint32_t>(*v) : std::nullopt;
  }

  // The value of `key`, to read or change in place; null if absent.
  [[gnu::always_inline]] uint32_t* lookup(uint64_t key) {
    return const_cast<uint32_t*>(value_of(key));
  }

  // Sets the value of `key`, inserting it if absent. True if it was there.
  [[gnu::always_inline]] bool put(uint64_t key, uint32_t value) {
    if (key == kEmpty) [[unlikely]] {
      const bool was = has_empty_key_;
      size_ += !has_empty_key_;
      has_empty_key_ = true;
      empty_key_value_ = value;
      return was;
    }
    // At most an eighth full: a probe almost always ends at the first slot, so its loop exit is
    // predicted (fuller tables mispredict more). 12 bytes a slot, the keys apart from the values:
    // a probe reads 8 bytes a slot, 64 to 128 a key.
    if ((size_ + 1) * 8 > mask_ + 1) grow();
    for (size_t i = home(key);; i = next(i)) {
      if (keys_[i] == kEmpty) {
        keys_[i] = key;
        values_[i] = value;
        ++size_;
        return false;
      }
      if (keys_[i] == key) {
        values_[i] = value;
        return true;
      }
    }
  }

  // Removes `key` and gives its value; nothing if it was absent.
  [[gnu::always_inline]] std::optional<uint32_t> erase(uint64_t key) {
    if (key == kEmpty) [[unlikely]] {
      if (!has_empty_key_) return std::nullopt;
      has_empty_key_ = false;
      --size_;
      return empty_key_value_;
    }
    const uint32_t* found = value_of(key);
    if (!found) return std::nullopt;
    size_t i = static_cast<size_t>(found - values_.data());
    const uint32_t value = *found;
    // Shift later members of the probe run back over the hole, so no run is broken.
    for (size_t j = next(i);; j = next(j)) {
      if (keys_[j] == kEmpty) break;
      const size_t h = home(keys_[j]);
      // keys_[j] may move to i only if its home is not in (i, j] (cyclically).
      const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (stays) continue;
      keys_[i] = keys_[j];
      values_[i] = values_[j];
      i = j;
    }
    keys_[i] = kEmpty;
    --size_;
    return value;
  }

  size_t size() const { return size_; }

 private:
  // Marks an unused slot. A key equal to it is a key like any other, kept aside (block addresses
  // are never 0, but a trace may say anything).
  static constexpr uint64_t kEmpty = 0;

  // The value of `key`, or null: a scan from its home to the first unused slot.
  [[gnu::always_inline]] const uint32_t* value_of(uint64_t key) const {
    if (key == kEmpty) [[unlikely]]
      return has_empty_key_ ? &empty_key_value_ : nullptr;
    for (size_t i = home(key);; i = next(i)) {
      if (keys_[i] == key) return &values_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }

  size_t home(uint64_t key) const {
    // Fibonacci hashing: the multiply carries every bit of the address (multiples of 512) into
    // the top bits, which pick the slot.
    return static_cast<size_t>((key * 0x9e3779b97f4a7c15ULL) >> shift_);
  }
  size_t next(size_t i) const { return (i + 1) & mask_; }

  void grow() {
    std::vector<uint64_t> old_keys(keys_.size() * 2, kEmpty);
    std::vector<uint32_t> old_values(values_.size() * 2);
    old_keys.swap(keys_);
    old_values.swap(values_);
    mask_ = keys_.size() - 1;
    --shift_;
    size_ = has_empty_key_ ? 1 : 0;
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] != kEmpty) put(old_keys[i], old_values[i]);
    }
  }

  std::vector<uint64_t> keys_;    // kEmpty where unused
  std::vector<uint32_t> values_;  // of the key in the same slot
  size_t mask_;  // keys_.size() - 1, kept: the vector's size is a subtraction and a shift
  int shift_;    // 64 - log2(keys_.size())
  size_t size_ = 0;
  bool has_empty_key_ = false;
  uint32_t empty_key_value_ = 0;
};

}  // namespace allocsim
