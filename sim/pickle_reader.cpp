#include "sim/pickle_reader.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

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

class Decoder {
 public:
  Decoder(std::string_view in, const DictSink& sink) : in_(in), sink_(sink) {
    // Room for as many objects as a snapshot of this size usually holds, reserved up front:
    // growing by doubling would touch (and fault in) every element twice. Untouched capacity
    // costs address space only.
    const size_t expected = std::min<size_t>(in.size() / 16, size_t{1} << 24);
    doc_.containers.reserve(expected);
    doc_.strings.reserve(expected / 4);
    memo_.reserve(expected);
  }

  Document run() {
    while (true) {
      if (pos_ >= in_.size()) fail(pos_, "the pickle ends before its STOP opcode (truncated?)");
      const uint64_t at = pos_;
      const auto op = static_cast<uint8_t>(in_[pos_++]);
      switch (op) {
        case 0x80:
          take(1);
          break;  // PROTO
        case 0x95:
          take(8);
          break;  // FRAME: framing is only a hint for buffered readers
        case '.':
          return finish(at);
        case '(':
          marks_.push_back(stack_.size());
          break;
        case '0':
          pop(at);
          break;
        case '1':
          stack_.resize(pop_mark(at));
          break;
        case '2':
          stack_.push_back(top(at));
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
          push(make_int(static_cast<int32_t>(read_le(4))));
          break;
        case 'K':
          push(make_int(static_cast<int64_t>(read_le(1))));
          break;
        case 'M':
          push(make_int(static_cast<int64_t>(read_le(2))));
          break;
        case 0x8a:
          push(read_long(at, read_le(1)));
          break;
        case 0x8b:
          push(read_long(at, read_le(4)));
          break;
        case 'G':
          push(read_binfloat());
          break;
        case 0x8c:
        case 'U':
        case 'C':
          push(read_string(read_le(1)));
          break;
        case 'X':
        case 'T':
        case 'B':
          push(read_string(read_le(4)));
          break;
        case 0x8d:
        case 0x8e:
          push(read_string(read_le(8)));
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
        case 0x94:
          memo_put(at, memo_.size());
          break;
        case 'q':
          memo_put(at, read_le(1));
          break;
        case 'r':
          memo_put(at, read_le(4));
          break;
        case 'h':
          memo_get(at, read_le(1));
          break;
        case 'j':
          memo_get(at, read_le(4));
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
  [[noreturn]] static void fail(uint64_t at, const std::string& what) {
    throw PickleError(at, what);
  }

  [[noreturn]] __attribute__((noinline)) void fail_past_end(uint64_t n) const {
    fail(pos_, "a length of " + std::to_string(n) + " bytes runs past the end of the pickle (" +
                   std::to_string(in_.size() - pos_) + " left)");
  }

  std::string_view take(uint64_t n) {
    if (n > in_.size() - pos_) [[unlikely]]
      fail_past_end(n);
    std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }

  uint64_t read_le(int n) {
    const std::string_view s = take(static_cast<uint64_t>(n));
    uint64_t v = 0;
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(&v, s.data(), static_cast<size_t>(n));
    } else {
      for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[i]);
    }
    return v;
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

  Value read_long(uint64_t at, uint64_t n) {
    if (n > 8) fail(at, "an integer of " + std::to_string(n) + " bytes does not fit in 64 bits");
    const std::string_view s = take(n);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(s[i]);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(s[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);
    return make_int(static_cast<int64_t>(v));
  }

  Value read_binfloat() {
    const std::string_view s = take(8);
    uint64_t bits = 0;
    for (char c : s) bits = (bits << 8) | static_cast<uint8_t>(c);  // big-endian
    Value v;
    v.kind = Kind::kFloat;
    std::memcpy(&v.f, &bits, sizeof bits);
    return v;
  }

  Value read_string(uint64_t n) {
    Value v;
    v.kind = Kind::kString;
    v.ref = static_cast<uint32_t>(doc_.strings.size());
    doc_.strings.push_back(take(n));
    return v;
  }

  Value new_container(Kind kind) {
    Value v;
    v.kind = kind;
    v.ref = static_cast<uint32_t>(doc_.containers.size());
    doc_.containers.emplace_back(doc_.arena.get());
    return v;
  }

  void push(const Value& v) { stack_.push_back(v); }

  const Value& top(uint64_t at) const {
    if (stack_.size() <= floor()) fail(at, "the stack is empty");
    return stack_.back();
  }

  Value pop(uint64_t at) {
    Value v = top(at);
    stack_.pop_back();
    return v;
  }

  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }

  size_t pop_mark(uint64_t at) {
    if (marks_.empty()) fail(at, "no MARK to pop to");
    const size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }

  size_t stack_size_minus(uint64_t at, size_t n) const {
    if (stack_.size() < floor() + n) fail(at, "the stack holds too few items");
    return stack_.size() - n;
  }

  // Pops stack_[from..] into a new container of the given kind.
  Value collect(uint64_t at, Kind kind, size_t from) {
    if (kind == Kind::kDict && (stack_.size() - from) % 2 != 0)
      fail(at, "a dict needs key/value pairs");
    Value v = new_container(kind);
    if (!(kind == Kind::kDict && offer(v.ref, from))) {
      doc_.containers[v.ref].assign(stack_.begin() + static_cast<long>(from), stack_.end());
    }
    stack_.resize(from);
    return v;
  }

  // Appends stack_[from..] to the container just below them. A dict's first SETITEMS batch is
  // offered to the sink (`complete`: the batch holds the whole dict, as pickle writes it).
  void extend(uint64_t at, Kind kind, size_t from, bool complete) {
    if (from == 0 || from - 1 < floor()) fail(at, "no container below the items to add");
    const Value target = stack_[from - 1];
    if (target.kind != kind) {
      fail(at, std::string("expected a ") + kind_name(kind) + " to add items to, found a " +
                   kind_name(target.kind));
    }
    if (kind == Kind::kDict && (stack_.size() - from) % 2 != 0)
      fail(at, "a dict needs key/value pairs");
    auto& items = doc_.containers[target.ref];
    if (!(complete && items.empty() && offer(target.ref, from))) {
      items.insert(items.end(), stack_.begin() + static_cast<long>(from), stack_.end());
    }
    stack_.resize(from);
  }

  // Hands a just-completed dict's items to the sink; true if it took them.
  bool offer(uint32_t container, size_t from) {
    if (!sink_) return false;
    return sink_(container, std::span<const Value>(stack_.data() + from, stack_.size() - from),
                 doc_);
  }

  void memo_put(uint64_t at, uint64_t index) {
    const Value& v = top(at);
    if (index < memo_.size()) {
      memo_[index] = v;
    } else if (index == memo_.size()) {
      memo_.push_back(v);
    } else {
      fail(at, "memo index " + std::to_string(index) + " skips ahead of the " +
                   std::to_string(memo_.size()) + " entries stored");
    }
  }

  void memo_get(uint64_t at, uint64_t index) {
    if (index >= memo_.size())
      fail(at, "memo index " + std::to_string(index) + " was never stored");
    stack_.push_back(memo_[index]);
  }

  Document finish(uint64_t at) {
    if (!marks_.empty()) fail(at, "STOP with an unclosed MARK");
    if (stack_.size() != 1)
      fail(at, "STOP with " + std::to_string(stack_.size()) + " items on the stack, expected 1");
    doc_.root = stack_.back();
    return std::move(doc_);
  }

  std::string_view in_;
  const DictSink& sink_;
  uint64_t pos_ = 0;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::vector<Value> memo_;
  Document doc_;
};

}  // namespace

Document decode(std::string_view bytes, const DictSink& sink) {
  return Decoder(bytes, sink).run();
}

}  // namespace allocsim::pickle
