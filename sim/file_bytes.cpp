#include "sim/file_bytes.hpp"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "sim/input_error.hpp"

namespace allocsim {
namespace {

std::string inflate_gzip(const std::string& path, const std::string& in, uint64_t max_bytes) {
  std::string out;
  out.resize(std::min<uint64_t>(in.size() * 4 + 1024, max_bytes));
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw InputError(path + ": cannot start zlib");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  uint64_t in_left = in.size();
  uint64_t produced = 0;
  int rc = Z_OK;
  while (true) {
    if (produced == out.size()) {
      if (out.size() >= max_bytes) {
        inflateEnd(&zs);
        throw InputError(path + ": inflates to more than " + std::to_string(max_bytes) +
                         " bytes; refusing (is it a gzip bomb?)");
      }
      out.resize(std::min<uint64_t>(out.size() * 2, max_bytes));
    }
    const uInt in_chunk = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
    const uInt out_chunk = static_cast<uInt>(std::min<uint64_t>(out.size() - produced, 1u << 30));
    zs.avail_in = in_chunk;
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    zs.avail_out = out_chunk;
    rc = inflate(&zs, Z_NO_FLUSH);
    in_left -= in_chunk - zs.avail_in;
    produced += out_chunk - zs.avail_out;
    if (rc == Z_STREAM_END) {
      if (in_left == 0) break;
      // Another gzip member follows (concatenated .gz files are one stream to gunzip).
      if (inflateReset(&zs) != Z_OK) break;
      continue;
    }
    if (rc == Z_BUF_ERROR && in_left == 0) {
      inflateEnd(&zs);
      throw InputError(path + ": gzip data ends early at compressed byte offset " +
                       std::to_string(in.size()) + " (truncated file?)");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const uint64_t at = in.size() - in_left;
      const std::string why = zs.msg ? zs.msg : "corrupt data";
      inflateEnd(&zs);
      throw InputError(path + ": bad gzip data at compressed byte offset " + std::to_string(at) +
                       ": " + why);
    }
  }
  inflateEnd(&zs);
  out.resize(produced);
  return out;
}

}  // namespace

std::string read_file_bytes(const std::string& path, uint64_t max_bytes) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot open: " + std::strerror(errno));
  std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw InputError(path + ": read error");
  if (data.size() >= 2 && static_cast<uint8_t>(data[0]) == 0x1f &&
      static_cast<uint8_t>(data[1]) == 0x8b) {
    return inflate_gzip(path, data, max_bytes);
  }
  return data;
}

}  // namespace allocsim
