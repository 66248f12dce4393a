// Fuzzes the PYTORCH_CUDA_ALLOC_CONF parser: any string parses or is refused with
// AllocConfError, and what parses round-trips through its canonical form.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/alloc_conf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  allocsim::AllocConf conf;
  try {
    conf = allocsim::parse_alloc_conf(text);
  } catch (const allocsim::AllocConfError&) {
    return 0;
  }
  const std::string canonical = conf.to_string();
  try {
    if (!allocsim::parse_alloc_conf(canonical).same_policy(conf)) {
      std::fprintf(stderr, "'%s' -> '%s' does not round-trip\n", text.c_str(), canonical.c_str());
      std::abort();
    }
  } catch (const allocsim::AllocConfError& e) {
    std::fprintf(stderr, "'%s' -> '%s' is refused: %s\n", text.c_str(), canonical.c_str(),
                 e.what());
    std::abort();
  }
  return 0;
}
