// A safe decoder for the pickle subset PyTorch snapshots use. It never executes anything:
// opcodes that would import a name or call an object are refused with an error.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "sim/pickle_value.hpp"

namespace allocsim::pickle {

// Bad input: `offset` is the byte offset in the (decompressed) pickle stream.
class PickleError : public std::runtime_error {
 public:
  PickleError(uint64_t offset, const std::string& what)
      : std::runtime_error("byte offset " + std::to_string(offset) + ": " + what),
        offset_(offset) {}
  uint64_t offset() const { return offset_; }

 private:
  uint64_t offset_;
};

Document decode(std::string_view bytes);

}  // namespace allocsim::pickle
