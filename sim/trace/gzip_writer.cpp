#include "sim/trace/gzip_writer.hpp"

#include <zlib.h>

#include <algorithm>
#include <stdexcept>

namespace allocsim {

std::string gzip_compress(std::string_view bytes) {
  z_stream zs{};
  // 16 + MAX_WBITS: a gzip wrapper, whose header zlib writes with no time and no name.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    throw std::runtime_error("cannot start zlib");
  }
  std::string out;
  out.resize(deflateBound(&zs, 0) + 64);
  const char* next = bytes.data();
  size_t left = bytes.size();
  size_t made = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    // zlib counts in 32 bits: the input goes in chunks, the output grows as it fills.
    const uInt chunk = static_cast<uInt>(std::min<size_t>(left, uInt{1} << 30));
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(next));
    zs.avail_in = chunk;
    constexpr size_t kMinRoom = size_t{64} << 10;
    if (out.size() - made < kMinRoom) out.resize(out.size() * 2 + kMinRoom);
    const size_t room = std::min<size_t>(out.size() - made, uInt{1} << 30);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + made);
    zs.avail_out = static_cast<uInt>(room);
    rc = deflate(&zs, chunk == left ? Z_FINISH : Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      deflateEnd(&zs);
      throw std::runtime_error("zlib failed to compress");
    }
    const size_t used = chunk - zs.avail_in;
    next += used;
    left -= used;
    made += room - zs.avail_out;
  }
  deflateEnd(&zs);
  out.resize(made);
  return out;
}

}  // namespace allocsim
