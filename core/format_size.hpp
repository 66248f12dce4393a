// PyTorch's C++ format_size: "512 bytes", "1.50 KiB", "20.00 MiB", "1.54 GiB".
#pragma once

#include <cstdint>
#include <string>

namespace allocsim {

std::string format_size(uint64_t bytes);

}  // namespace allocsim
