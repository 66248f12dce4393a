// A safe decoder for the pickle subset PyTorch snapshots use. It never executes anything:
// opcodes that would import a name or call an object are refused with an error.
#pragma once

#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "sim/trace/pickle_value.hpp"

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

// Told of each dict as SETITEMS (or DICT) completes it, with its key/value items, while the
// document is still being built. Returning true takes the dict: its items are not kept (the
// container stays, empty). A snapshot reader converts events this way instead of storing them.
using DictSink =
    std::function<bool(uint32_t container, std::span<const Value> items, const Document& doc)>;

Document decode(std::string_view bytes, const DictSink& sink = {});

}  // namespace allocsim::pickle
