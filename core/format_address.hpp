// A device address as messages and reports write it: "0x7f2a00000000".
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace allocsim {

inline std::string format_address(uint64_t address) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(address));
  return buf;
}

}  // namespace allocsim
