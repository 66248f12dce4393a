// Bad input from a user: reported as one line naming the file, the place and what was expected.
#pragma once

#include <stdexcept>
#include <string>

namespace allocsim {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace allocsim
