#include "sim/trace/pickle_writer.hpp"

#include <cstring>

namespace allocsim::pickle {

Writer::Writer() {
  raw(0x80);  // PROTO 4
  raw(4);
}

void Writer::le(uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) raw(static_cast<uint8_t>(v >> (8 * i)));
}

void Writer::none() {
  raw('N');
}
void Writer::boolean(bool v) {
  raw(v ? 0x88 : 0x89);
}

void Writer::integer(int64_t v) {
  if (v >= 0 && v < 256) {
    raw('K');  // BININT1
    raw(static_cast<uint8_t>(v));
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    raw('J');  // BININT
    le(static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
  } else {
    raw(0x8a);  // LONG1, 8 bytes two's complement
    raw(8);
    le(static_cast<uint64_t>(v), 8);
  }
}

void Writer::real(double v) {
  raw('G');  // BINFLOAT, big-endian
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  for (int i = 7; i >= 0; --i) raw(static_cast<uint8_t>(bits >> (8 * i)));
}

void Writer::string(std::string_view s) {
  if (s.size() < 256) {
    raw(0x8c);  // SHORT_BINUNICODE
    raw(static_cast<uint8_t>(s.size()));
  } else {
    raw('X');  // BINUNICODE
    le(s.size(), 4);
  }
  out_.append(s);
}

void Writer::begin_dict() {
  raw('}');
  raw('(');
}
void Writer::end_dict() {
  raw('u');
}
void Writer::begin_list() {
  raw(']');
  raw('(');
}
void Writer::end_list() {
  raw('e');
}
void Writer::tuple2() {
  raw(0x86);
}

std::string Writer::finish() {
  raw('.');
  return std::move(out_);
}

}  // namespace allocsim::pickle
