#include "sim/trace/pickle_reader.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include "sim/trace/huge_pages.hpp"

namespace allocsim::pickle {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kDict:
      return "dict";
    case Kind::kSet:
      return "set";
    case Kind::kBigInt:
      return "int beyond 64 bits";
  }
  return "?";
}

std::optional<Value> Document::get(const Value& dict, std::string_view key) const {
  if (dict.kind != Kind::kDict) return std::nullopt;
  const auto& kv = items(dict);
  for (size_t i = 0; i + 1 < kv.size(); i += 2) {
    if (kv[i].kind == Kind::kString && str(kv[i]) == key) return kv[i + 1];
  }
  return std::nullopt;
}

bool Document::append(uint32_t container, const Value* first, const Value* last) {
  Items& c = containers[container];
  const auto n = static_cast<uint64_t>(last - first);
  if (n == 0) return true;
  if (c.size + n > UINT32_MAX) return false;
  if (c.size + n > c.capacity) {
    const uint64_t capacity = std::min<uint64_t>(
        std::max<uint64_t>({c.size + n, uint64_t{2} * c.capacity, 4}), UINT32_MAX);
    const uint64_t bytes = capacity * sizeof(Value);
    if (bytes < (uint64_t{1} << 20)) {
      // From the arena, which never takes memory back: the old items stay behind.
      auto* grown = static_cast<Value*>(arena->allocate(bytes, alignof(Value)));
      if (c.size > 0) std::memcpy(grown, c.data, c.size * sizeof(Value));
      c.data = grown;
    } else {
      auto large = std::find_if(large_items.begin(), large_items.end(),
                                [&](const auto& l) { return l.first == container; });
      Value* old = large != large_items.end() ? large->second.get() : nullptr;
      auto* grown = static_cast<Value*>(std::realloc(old, bytes));
      if (!grown) throw std::bad_alloc();
      if (!old && c.size > 0) std::memcpy(grown, c.data, c.size * sizeof(Value));
      if (old) {
        (void)large->second.release();  // realloc took it
        large->second.reset(grown);
      } else {
        large_items.emplace_back(container, grown);
      }
      advise_huge_pages(grown, bytes);
      c.data = grown;
    }
    c.capacity = static_cast<uint32_t>(capacity);
  }
  std::memcpy(c.data + c.size, first, n * sizeof(Value));
  c.size += static_cast<uint32_t>(n);
  return true;
}

namespace {

// Opcodes that would import a name or call an object: refused, never executed.
const char* unsafe_opcode_name(uint8_t op) {
  switch (op) {
    case 'c':
      return "GLOBAL";
    case 0x93:
      return "STACK_GLOBAL";
    case 'R':
      return "REDUCE";
    case 'b':
      return "BUILD";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 0x81:
      return "NEWOBJ";
    case 0x92:
      return "NEWOBJ_EX";
    case 0x82:
      return "EXT1";
    case 0x83:
      return "EXT2";
    case 0x84:
      return "EXT4";
    case 'P':
      return "PERSID";
    case 'Q':
      return "BINPERSID";
    default:
      return nullptr;
  }
}

// The memo: Values by index, appended to by MEMOIZE (twice per snapshot event). Its storage is
// malloc'd, so reserving costs address space only and growing can remap in place.
class Memo {
 public:
  static_assert(std::is_trivially_copyable_v<Value>);
  Memo() = default;
  Memo(const Memo&) = delete;
  Memo& operator=(const Memo&) = delete;
  ~Memo() { std::free(data_); }

  void reserve(size_t n) {
    if (n > capacity_) reallocate(n);
  }
  void push(Value v) {  // by value, as OperandStack::push
    if (size_ == capacity_) [[unlikely]]
      reallocate(std::max<size_t>(64, 2 * capacity_));
    data_[size_++] = v;
  }
  size_t size() const { return size_; }
  Value& operator[](size_t i) { return data_[i]; }

 private:
  __attribute__((noinline)) void reallocate(size_t n) {
    void* p = std::realloc(data_, n * sizeof(Value));
    if (!p) throw std::bad_alloc();
    advise_huge_pages(p, n * sizeof(Value));
    data_ = static_cast<Value*>(p);
    capacity_ = n;
  }

  Value* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// The operand stack, pushed to once per opcode: its push is a compare and a store. Pointers rather
// than a size, since a store of a Value (which holds an int64_t) may alias a size_t, and the
// compiler would reload the size after every push.
class OperandStack {
 public:
  static_assert(std::is_trivially_copyable_v<Value>);
  OperandStack() = default;
  OperandStack(const OperandStack&) = delete;
  OperandStack& operator=(const OperandStack&) = delete;
  ~OperandStack() { std::free(begin_); }

  // By value: DUP pushes the stack's own top, which a reference would leave dangling on growth.
  void push(Value v) {
    if (end_ == limit_) [[unlikely]]
      grow();
    *end_++ = v;
  }
  size_t size() const { return static_cast<size_t>(end_ - begin_); }
  const Value& back() const { return end_[-1]; }
  void pop_back() { --end_; }
  void shrink(size_t n) { end_ = begin_ + n; }  // n <= size()
  Value& operator[](size_t i) { return begin_[i]; }
  const Value* begin() const { return begin_; }
  const Value* end() const { return end_; }

 private:
  __attribute__((noinline)) void grow() {
    const size_t size = this->size();
    const size_t capacity = std::max<size_t>(1024, 2 * size);
    void* p = std::realloc(begin_, capacity * sizeof(Value));
    if (!p) throw std::bad_alloc();
    begin_ = static_cast<Value*>(p);
    end_ = begin_ + size;
    limit_ = begin_ + capacity;
  }

  Value* begin_ = nullptr;
  Value* end_ = nullptr;
  Value* limit_ = nullptr;
};

class Decoder {
 public:
  Decoder(std::string_view in, const DictSink& sink)
      : begin_(in.data()), end_(in.data() + in.size()), sink_(sink) {
    // Room for as many objects as a snapshot of this size usually holds, reserved up front:
    // growing by doubling would touch (and fault in) every element twice. Untouched capacity
    // costs address space only.
    const size_t expected = std::min<size_t>(in.size() / 16, size_t{1} << 24);
    reserve_huge_pages(doc_.containers, expected);
    reserve_huge_pages(doc_.strings, expected / 4);
    memo_.reserve(expected);
  }

  // The read position is a local, not a member: the compiler then keeps it in a register instead
  // of storing it back after every opcode. One switch over the opcodes, one case each: split, the
  // position would have to travel through calls.
  Document run() {  // NOLINT(readability-function-size)
    const char* p = begin_;
    while (true) {
      if (p == end_) fail(p, "the pickle ends before its STOP opcode (truncated?)");
      const char* const at = p;
      const auto op = static_cast<uint8_t>(*p++);
      switch (op) {
        case 0x80:  // PROTO
          p = skip(p, 1);
          break;
        case 0x95:  // FRAME: framing is only a hint for buffered readers
          p = skip(p, 8);
          break;
        case '.':
          return finish(at);
        case '(':
          marks_.push_back(stack_.size());
          break;
        case '0':
          pop(at);
          break;
        case '1':
          stack_.shrink(pop_mark(at));
          break;
        case '2':
          push(top(at));
          break;
        case 'N':
          push(Value{});
          break;
        case 0x88:
          push(make_bool(true));
          break;
        case 0x89:
          push(make_bool(false));
          break;
        case 'J':
          push(make_int(static_cast<int32_t>(read_le<4>(p))));
          break;
        case 'K':
          push(make_int(static_cast<int64_t>(read_le<1>(p))));
          break;
        case 'M':
          push(make_int(static_cast<int64_t>(read_le<2>(p))));
          break;
        case 0x8a:
          push(read_long(at, p, read_le<1>(p)));
          break;
        case 0x8b:
          push(read_long(at, p, read_le<4>(p)));
          break;
        case 'G':
          push(read_binfloat(p));
          break;
        case 0x8c:
        case 'U':
        case 'C':
          push(read_string(p, read_le<1>(p)));
          break;
        case 'X':
        case 'T':
        case 'B':
          push(read_string(p, read_le<4>(p)));
          break;
        case 0x8d:
        case 0x8e:
          push(read_string(p, read_le<8>(p)));
          break;
        case ']':
          push(new_container(Kind::kList));
          break;
        case ')':
          push(new_container(Kind::kTuple));
          break;
        case '}':
          push(new_container(Kind::kDict));
          break;
        case 0x8f:
          push(new_container(Kind::kSet));
          break;
        case 'l':
          push(collect(at, Kind::kList, pop_mark(at)));
          break;
        case 't':
          push(collect(at, Kind::kTuple, pop_mark(at)));
          break;
        case 'd':
          push(collect(at, Kind::kDict, pop_mark(at)));
          break;
        case 0x91:
          push(collect(at, Kind::kSet, pop_mark(at)));
          break;
        case 0x85:
          push(collect(at, Kind::kTuple, stack_size_minus(at, 1)));
          break;
        case 0x86:
          push(collect(at, Kind::kTuple, stack_size_minus(at, 2)));
          break;
        case 0x87:
          push(collect(at, Kind::kTuple, stack_size_minus(at, 3)));
          break;
        case 'a':
          extend(at, Kind::kList, stack_size_minus(at, 2) + 1, false);
          break;
        case 'e':
          extend(at, Kind::kList, pop_mark(at), false);
          break;
        case 's':  // one pair at a time (protocol 0): the dict may not be complete yet
          extend(at, Kind::kDict, stack_size_minus(at, 3) + 1, false);
          break;
        case 'u':
          extend(at, Kind::kDict, pop_mark(at), true);
          break;
        case 0x90:
          extend(at, Kind::kSet, pop_mark(at), false);
          break;
        case 0x94:  // MEMOIZE, once per object a snapshot holds: the next index, no checks
          memo_.push(top(at));
          break;
        case 'q':
          memo_put(at, read_le<1>(p));
          break;
        case 'r':
          memo_put(at, read_le<4>(p));
          break;
        case 'h':
          memo_get(at, read_le<1>(p));
          break;
        case 'j':
          memo_get(at, read_le<4>(p));
          break;
        default: {
          if (const char* name = unsafe_opcode_name(op)) {
            fail(at, std::string("opcode ") + name + " would import or call code; refused");
          }
          char buf[96];
          std::snprintf(buf, sizeof buf,
                        "opcode 0x%02x is outside the snapshot subset this reader accepts", op);
          fail(at, buf);
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(const char* at, const std::string& what) const {
    throw PickleError(static_cast<uint64_t>(at - begin_), what);
  }

  [[noreturn]] __attribute__((noinline)) void fail_past_end(const char* p, uint64_t n) const {
    fail(p, "a length of " + std::to_string(n) + " bytes runs past the end of the pickle (" +
                std::to_string(end_ - p) + " left)");
  }

  // The position n bytes past p, if the pickle has them.
  const char* skip(const char* p, uint64_t n) const {
    if (n > static_cast<uint64_t>(end_ - p)) [[unlikely]]
      fail_past_end(p, n);
    return p + n;
  }

  // n (at most 8) little-endian bytes as an unsigned integer.
  static uint64_t load_le(const char* s, size_t n) {
    uint64_t v = 0;
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(&v, s, n);
    } else {
      for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(s[i]);
    }
    return v;
  }

  // An opcode's N-byte little-endian argument; moves p past it.
  template <size_t N>
  uint64_t read_le(const char*& p) const {
    const char* s = p;
    p = skip(p, N);
    return load_le(s, N);
  }

  static Value make_bool(bool b) {
    Value v;
    v.kind = Kind::kBool;
    v.i = b;
    return v;
  }
  static Value make_int(int64_t i) {
    Value v;
    v.kind = Kind::kInt;
    v.i = i;
    return v;
  }

  // LONG1/LONG4: n bytes of two's complement, little-endian. Python writes the fewest bytes, so
  // more than 8 is beyond 64 bits.
  Value read_long(const char* at, const char*& p, uint64_t n) const {
    (void)at;
    if (n > 8) {
      p = skip(p, n);
      Value v;
      v.kind = Kind::kBigInt;
      return v;
    }
    if (n == 0) return make_int(0);
    const char* s = p;
    p = skip(p, n);
    // Eight bytes loaded at once where the pickle has them (a fixed-size copy is one load), the
    // extra high bytes then shifted out; the shift back sign-extends from the last byte's top bit.
    const auto shift = static_cast<unsigned>(64 - 8 * n);
    const uint64_t v = end_ - s >= 8 ? load_le(s, 8) << shift : load_le(s, n) << shift;
    return make_int(static_cast<int64_t>(v) >> shift);
  }

  Value read_binfloat(const char*& p) const {
    const char* s = p;
    p = skip(p, 8);
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<uint8_t>(s[i]);  // big-endian
    Value v;
    v.kind = Kind::kFloat;
    std::memcpy(&v.f, &bits, sizeof bits);
    return v;
  }

  Value read_string(const char*& p, uint64_t n) {
    const char* s = p;
    p = skip(p, n);
    Value v;
    v.kind = Kind::kString;
    v.ref = static_cast<uint32_t>(doc_.strings.size());
    doc_.strings.emplace_back(s, n);
    return v;
  }

  Value new_container(Kind kind) {
    Value v;
    v.kind = kind;
    v.ref = static_cast<uint32_t>(doc_.containers.size());
    doc_.containers.emplace_back();
    return v;
  }

  void push(Value v) { stack_.push(v); }

  const Value& top(const char* at) const {
    if (stack_.size() <= floor()) fail(at, "the stack is empty");
    return stack_.back();
  }

  Value pop(const char* at) {
    Value v = top(at);
    stack_.pop_back();
    return v;
  }

  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }

  size_t pop_mark(const char* at) {
    if (marks_.empty()) fail(at, "no MARK to pop to");
    const size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }

  size_t stack_size_minus(const char* at, size_t n) const {
    if (stack_.size() < floor() + n) fail(at, "the stack holds too few items");
    return stack_.size() - n;
  }

  // Pops stack_[from..] into a new container of the given kind.
  Value collect(const char* at, Kind kind, size_t from) {
    if (kind == Kind::kDict && (stack_.size() - from) % 2 != 0)
      fail(at, "a dict needs key/value pairs");
    Value v = new_container(kind);
    if (!(kind == Kind::kDict && offer(v.ref, from))) append(at, v.ref, from);
    stack_.shrink(from);
    return v;
  }

  // Appends stack_[from..] to the container just below them. A dict's first SETITEMS batch is
  // offered to the sink (`complete`: the batch holds the whole dict, as pickle writes it).
  void extend(const char* at, Kind kind, size_t from, bool complete) {
    if (from == 0 || from - 1 < floor()) fail(at, "no container below the items to add");
    const Value target = stack_[from - 1];
    if (target.kind != kind) {
      fail(at, std::string("expected a ") + kind_name(kind) + " to add items to, found a " +
                   kind_name(target.kind));
    }
    if (kind == Kind::kDict && (stack_.size() - from) % 2 != 0)
      fail(at, "a dict needs key/value pairs");
    if (!(complete && doc_.containers[target.ref].size == 0 && offer(target.ref, from))) {
      append(at, target.ref, from);
    }
    stack_.shrink(from);
  }

  // Moves stack_[from..] to the end of a container's items.
  __attribute__((noinline)) void append(const char* at, uint32_t container, size_t from) {
    if (!doc_.append(container, stack_.begin() + from, stack_.end()))
      fail(at, "a container of 2^32 items or more");
  }

  // Hands a just-completed dict's items to the sink; true if it took them.
  bool offer(uint32_t container, size_t from) {
    if (!sink_) return false;
    return sink_(container, std::span<const Value>(stack_.begin() + from, stack_.end()), doc_);
  }

  void memo_put(const char* at, uint64_t index) {
    const Value& v = top(at);
    if (index == memo_.size()) [[likely]] {
      memo_.push(v);
    } else if (index < memo_.size()) {
      memo_[index] = v;
    } else {
      fail(at, "memo index " + std::to_string(index) + " skips ahead of the " +
                   std::to_string(memo_.size()) + " entries stored");
    }
  }

  void memo_get(const char* at, uint64_t index) {
    if (index >= memo_.size())
      fail(at, "memo index " + std::to_string(index) + " was never stored");
    push(memo_[index]);
  }

  Document finish(const char* at) {
    if (!marks_.empty()) fail(at, "STOP with an unclosed MARK");
    if (stack_.size() != 1)
      fail(at, "STOP with " + std::to_string(stack_.size()) + " items on the stack, expected 1");
    doc_.root = stack_.back();
    return std::move(doc_);
  }

  const char* const begin_;
  const char* const end_;
  const DictSink& sink_;
  OperandStack stack_;
  std::vector<size_t> marks_;
  Memo memo_;
  Document doc_;
};

}  // namespace

Document decode(std::string_view bytes, const DictSink& sink) {
  return Decoder(bytes, sink).run();
}

}  // namespace allocsim::pickle
