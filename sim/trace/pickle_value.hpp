// A decoded pickle: plain data only (None, bool, int, float, str/bytes, list, tuple, dict, set).
//
// Containers live in one flat table and refer to each other by index, so a document of any
// nesting depth is built and destroyed without recursion.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <memory_resource>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/trace/huge_pages.hpp"

namespace allocsim::pickle {

// kBigInt: an int beyond 64 bits, read (its bytes skipped) but without a value: a field that needs
// the number refuses it by its kind, one that is decoration can keep it as unknown.
enum class Kind : uint8_t {
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kTuple,
  kDict,
  kSet,
  kBigInt
};

const char* kind_name(Kind kind);

struct Value {
  Kind kind = Kind::kNone;
  uint32_t ref = 0;  // index of the string or container
  union {
    int64_t i;
    double f;
  };
  Value() : i(0) {}
};

// A container's items, in the Document's arena: 16 bytes where a std::pmr::vector takes 32 (a
// snapshot has a container per event).
struct Items {
  Value* data = nullptr;
  uint32_t size = 0;
  uint32_t capacity = 0;
};

struct Document {
  std::vector<std::string_view> strings;  // views into the decoded bytes, which must outlive it
  // Containers' items come from one arena, released all at once with the Document: a snapshot has
  // a container per event, and a heap allocation (and free) for each would cost more than decoding.
  std::unique_ptr<std::pmr::monotonic_buffer_resource> arena =
      std::make_unique<std::pmr::monotonic_buffer_resource>(size_t{1} << 20, huge_page_resource());
  std::vector<Items> containers;  // a dict stores key, value, key, value, ...
  Value root;
  // The items of containers that grew past a megabyte (a snapshot's list of events) are malloc'd
  // instead, by container: growing them reallocates (by remapping, for large blocks) instead of
  // leaving each old copy behind in the arena.
  struct Free {
    void operator()(Value* p) const { std::free(p); }
  };
  std::vector<std::pair<uint32_t, std::unique_ptr<Value[], Free>>> large_items;

  std::string_view str(const Value& v) const { return strings[v.ref]; }
  std::span<const Value> items(const Value& v) const {
    const Items& c = containers[v.ref];
    return {c.data, c.size};
  }
  // Appends [first, last) to a container's items; false if it would hold 2^32 or more.
  bool append(uint32_t container, const Value* first, const Value* last);
  // The value under a string key of a dict, if present.
  std::optional<Value> get(const Value& dict, std::string_view key) const;
};

}  // namespace allocsim::pickle
