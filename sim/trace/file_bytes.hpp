// Reads a whole input file, inflating it when it is gzip (detected by its magic bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace allocsim {

// Refuses to inflate more than this: a gzip bomb gets an error, not all of memory.
inline constexpr uint64_t kMaxInflatedBytes = uint64_t{16} << 30;

// A file's bytes. Not a std::string, which would zero-fill a 54 MB pickle before the inflate
// writes it: growing here leaves the new room uninitialized.
class FileBytes {
 public:
  FileBytes() = default;
  explicit FileBytes(size_t capacity) { reserve(capacity); }

  std::string_view view() const { return {data_.get(), size_}; }
  operator std::string_view() const { return view(); }  // what every reader takes
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  char* data() { return data_.get(); }

  // Room for `capacity` bytes, keeping the first size() (uninitialized past them).
  void reserve(size_t capacity);
  // The first `size` bytes count; the caller has written them (size <= capacity()).
  void set_size(size_t size) { size_ = size; }
  void append(const char* p, size_t n);

 private:
  std::unique_ptr<char[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Throws InputError naming the path and, for a damaged gzip, the compressed byte offset.
[[nodiscard]] FileBytes read_file_bytes(const std::string& path,
                                        uint64_t max_bytes = kMaxInflatedBytes);

}  // namespace allocsim
