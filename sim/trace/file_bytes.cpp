#include "sim/trace/file_bytes.hpp"

#include <sys/stat.h>
#include <zlib.h>
#ifdef ALLOCSIM_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "sim/trace/huge_pages.hpp"
#include "sim/trace/input_error.hpp"

namespace allocsim {
namespace {

#ifdef ALLOCSIM_HAVE_LIBDEFLATE
// The common case, a single gzip member under 4 GiB, in one call: the trailer's ISIZE gives the
// inflated size. Anything else (several members, bad data) goes to zlib, which also finds the
// offset of an error.
std::optional<FileBytes> inflate_whole(std::string_view in, uint64_t max_bytes) {
  if (in.size() < 18) return std::nullopt;
  uint64_t size = 0;
  for (size_t i = 1; i <= 4; ++i) size = (size << 8) | static_cast<uint8_t>(in[in.size() - i]);
  // DEFLATE inflates at most 1032:1: a larger ISIZE is a lie, not worth allocating for.
  if (size > max_bytes || size > in.size() * 1032 + 1024) return std::nullopt;
  const std::unique_ptr<libdeflate_decompressor, decltype(&libdeflate_free_decompressor)> d(
      libdeflate_alloc_decompressor(), &libdeflate_free_decompressor);
  if (!d) return std::nullopt;
  FileBytes out(size);
  advise_huge_pages(out.data(), size);
  size_t in_used = 0, out_made = 0;
  const libdeflate_result r = libdeflate_gzip_decompress_ex(d.get(), in.data(), in.size(),
                                                            out.data(), size, &in_used, &out_made);
  if (r != LIBDEFLATE_SUCCESS || in_used != in.size() || out_made != size) return std::nullopt;
  out.set_size(size);
  return out;
}
#endif

FileBytes inflate_gzip(const std::string& path, std::string_view in, uint64_t max_bytes) {
  FileBytes out(std::min<uint64_t>(in.size() * 4 + 1024, max_bytes));
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw InputError(path + ": cannot start zlib");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  uint64_t in_left = in.size();
  uint64_t produced = 0;
  int rc = Z_OK;
  while (true) {
    if (produced == out.capacity()) {
      if (out.capacity() >= max_bytes) {
        inflateEnd(&zs);
        throw InputError(path + ": inflates to more than " + std::to_string(max_bytes) +
                         " bytes; refusing (is it a gzip bomb?)");
      }
      out.set_size(produced);
      out.reserve(std::min<uint64_t>(out.capacity() * 2, max_bytes));
    }
    const uInt in_chunk = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
    const uInt out_chunk =
        static_cast<uInt>(std::min<uint64_t>(out.capacity() - produced, 1u << 30));
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
  out.set_size(produced);
  return out;
}

}  // namespace

void FileBytes::reserve(size_t capacity) {
  if (capacity <= capacity_) return;
  std::unique_ptr<char[]> grown(new char[capacity]);  // default-initialized: not zeroed
  if (size_ > 0) std::memcpy(grown.get(), data_.get(), size_);
  data_ = std::move(grown);
  capacity_ = capacity;
}

void FileBytes::append(const char* p, size_t n) {
  if (n > capacity_ - size_) reserve(std::max(capacity_ * 2, size_ + n));
  std::memcpy(data_.get() + size_, p, n);
  size_ += n;
}

FileBytes read_file_bytes(const std::string& path, uint64_t max_bytes) {
  struct CloseFile {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  const std::unique_ptr<std::FILE, CloseFile> f(std::fopen(path.c_str(), "rb"));
  if (!f) throw InputError(path + ": cannot open: " + std::strerror(errno));
  FileBytes data;
  // A regular file's size is known: room for it up front, so the data is copied once.
  if (struct stat st{}; fstat(fileno(f.get()), &st) == 0 && S_ISREG(st.st_mode)) {
    data.reserve(std::min<uint64_t>(static_cast<uint64_t>(st.st_size), max_bytes) + 1);
  }
  char chunk[1 << 16];
  size_t n;
  // Whole chunks appended: no per-byte stream iteration, and pipes work as well as files.
  while ((n = std::fread(chunk, 1, sizeof chunk, f.get())) > 0) {
    data.append(chunk, n);
    if (data.size() > max_bytes)
      throw InputError(path + ": larger than " + std::to_string(max_bytes) + " bytes; refusing");
  }
  if (std::ferror(f.get())) throw InputError(path + ": read error: " + std::strerror(errno));
  const std::string_view bytes = data.view();
  if (bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == 0x1f &&
      static_cast<uint8_t>(bytes[1]) == 0x8b) {
#ifdef ALLOCSIM_HAVE_LIBDEFLATE
    if (auto whole = inflate_whole(bytes, max_bytes)) return std::move(*whole);
#endif
    return inflate_gzip(path, bytes, max_bytes);
  }
  return data;
}

}  // namespace allocsim
