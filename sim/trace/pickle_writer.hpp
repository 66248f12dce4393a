// Writes plain data as a pickle (protocol 4 opcodes, no memo): what Python's pickle.load and
// PyTorch's memory_viz read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace allocsim::pickle {

class Writer {
 public:
  Writer();
  void none();
  void boolean(bool v);
  void integer(int64_t v);
  void real(double v);
  void string(std::string_view s);
  // A dict: begin_dict(), then key, value, key, value ..., then end_dict(). Likewise lists.
  void begin_dict();
  void end_dict();
  void begin_list();
  void end_list();
  void tuple2();  // makes a tuple of the two values just written
  std::string finish();

 private:
  void raw(uint8_t byte) { out_.push_back(static_cast<char>(byte)); }
  void le(uint64_t v, int bytes);
  std::string out_;
};

}  // namespace allocsim::pickle
