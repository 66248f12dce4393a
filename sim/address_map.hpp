// AddressMap: block address -> 32-bit value, for the live blocks of a replay (or every address a
// trace used). Open addressing with linear probing in one power-of-two array, and backward-shift
// deletion (no tombstones), so that a lookup is a multiply and a short scan of adjacent slots, and
// inserting allocates nothing once the table has grown to the peak number of keys.
// std::unordered_map allocates a node for every insert; a replay inserts and erases one per block.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace allocsim {

// The lookups are always inlined: a unit with more replay code in it (sim/prepared_trace.cpp)
// leaves them out of line, and the linker may keep its copy of the replay's loop for every unit
// (4% more instructions in the replay, 10% for gpt2gen).
class AddressMap {
 public:
  AddressMap() : slots_(16), mask_(16 - 1), shift_(64 - 4) {}

  [[gnu::always_inline]] std::optional<uint32_t> find(uint64_t key) const {
    const Slot* s = slot_of(key);
    return s ? std::optional<uint32_t>(s->value) : std::nullopt;
  }

  // The value of `key`, to read or change in place; null if absent.
  [[gnu::always_inline]] uint32_t* lookup(uint64_t key) {
    const Slot* s = slot_of(key);
    return s ? &slots_[static_cast<size_t>(s - slots_.data())].value : nullptr;
  }

  // Sets the value of `key`, inserting it if absent.
  [[gnu::always_inline]] void put(uint64_t key, uint32_t value) {
    // At most an eighth full: a probe almost always ends at the first slot, so its loop exit is
    // predicted (in callgrind's model, a quarter full mispredicted 9% more of the replay's
    // branches, half full 11% more than that). 16 bytes a slot: 128 to 256 bytes a key.
    if ((size_ + 1) * 8 > mask_ + 1) grow();
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

  // Removes `key` and gives its value; nothing if it was absent.
  [[gnu::always_inline]] std::optional<uint32_t> erase(uint64_t key) {
    const Slot* found = slot_of(key);
    if (!found) return std::nullopt;
    size_t i = static_cast<size_t>(found - slots_.data());
    const uint32_t value = found->value;
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
    return value;
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t value = 0;
    bool used = false;
  };

  // The slot holding `key`, or null: a scan from its home to the first unused slot.
  const Slot* slot_of(uint64_t key) const {
    for (size_t i = home(key);; i = next(i)) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == key) return &s;
    }
  }

  size_t home(uint64_t key) const {
    // Fibonacci hashing: the multiply carries every bit of the address (multiples of 512) into
    // the top bits, which pick the slot.
    return static_cast<size_t>((key * 0x9e3779b97f4a7c15ULL) >> shift_);
  }
  size_t next(size_t i) const { return (i + 1) & mask_; }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    --shift_;
    size_ = 0;
    for (const Slot& s : old) {
      if (s.used) put(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_;  // slots_.size() - 1, kept: the vector's size is a subtraction and a shift
  int shift_;    // 64 - log2(slots_.size())
  size_t size_ = 0;
};

}  // namespace allocsim
