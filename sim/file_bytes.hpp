// Reads a whole input file, inflating it when it is gzip (detected by its magic bytes).
#pragma once

#include <cstdint>
#include <string>

namespace allocsim {

// Refuses to inflate more than this: a gzip bomb gets an error, not all of memory.
inline constexpr uint64_t kMaxInflatedBytes = uint64_t{16} << 30;

// Throws InputError naming the path and, for a damaged gzip, the compressed byte offset.
std::string read_file_bytes(const std::string& path, uint64_t max_bytes = kMaxInflatedBytes);

}  // namespace allocsim
