// AddressMap: block address -> 32-bit value, for the live blocks of a replay. Open addressing with
// linear probing in one power-of-two array, and backward-shift deletion (no tombstones), so that
// a lookup is a hash and a short scan of adjacent slots, and inserting allocates nothing once the
// table has grown to the peak number of live blocks. std::unordered_map allocates a node for
// every insert; a replay inserts and erases one per block.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace allocsim {

class AddressMap {
 public:
  AddressMap() : slots_(16) {}

  std::optional<uint32_t> find(uint64_t key) const {
    for (size_t i = home(key);; i = next(i)) {
      const Slot& s = slots_[i];
      if (!s.used) return std::nullopt;
      if (s.key == key) return s.value;
    }
  }

  // Sets the value of `key`, inserting it if absent.
  void put(uint64_t key, uint32_t value) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();  // at most 3/4 full: probes stay short
    for (size_t i = home(key);; i = next(i)) {
      Slot& s = slots_[i];
      if (!s.used) {
        s = {key, value, true};
        ++size_;
        return;
      }
      if (s.key == key) {
        s.value = value;
        return;
      }
    }
  }

  // Removes `key`; false if it was absent.
  bool erase(uint64_t key) {
    size_t i = home(key);
    for (;; i = next(i)) {
      if (!slots_[i].used) return false;
      if (slots_[i].key == key) break;
    }
    // Shift later members of the probe run back over the hole, so no run is broken.
    for (size_t j = next(i);; j = next(j)) {
      if (!slots_[j].used) break;
      const size_t h = home(slots_[j].key);
      // slots_[j] may move to i only if its home is not in (i, j] (cyclically).
      const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i].used = false;
    --size_;
    return true;
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t value = 0;
    bool used = false;
  };

  size_t home(uint64_t key) const {
    // Block addresses are multiples of 512: mix the bits so that they spread over the table.
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<size_t>(key) & (slots_.size() - 1);
  }
  size_t next(size_t i) const { return (i + 1) & (slots_.size() - 1); }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    size_ = 0;
    for (const Slot& s : old) {
      if (s.used) put(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace allocsim
