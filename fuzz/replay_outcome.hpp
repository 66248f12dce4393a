// What a differential replay fuzzer compares: the JSON report of one way of replaying, or the error
// that stopped it (two ways must agree on both).
#pragma once

#include <string>

#include "core/alloc_conf.hpp"
#include "sim/trace/input_error.hpp"

namespace allocsim::fuzzing {

// `replay()` returns the JSON report's text.
template <class Replay>
std::string replay_outcome(Replay&& replay) {
  try {
    return replay();
  } catch (const InputError& e) {
    return std::string("InputError: ") + e.what();
  } catch (const AllocConfError& e) {
    return std::string("AllocConfError: ") + e.what();
  }
}

}  // namespace allocsim::fuzzing
