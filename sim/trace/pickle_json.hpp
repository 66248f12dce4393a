// A decoded pickle value written as JSON text, for fields allocsim shows as they are without
// reading them (a newer PyTorch's internal_metadata).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "sim/trace/pickle_value.hpp"

namespace allocsim {

// JSON for `value`: dicts as objects (keys that are not strings written as JSON text), lists,
// tuples and sets as arrays, None, NaN and infinities and ints beyond 64 bits as null. nullopt
// where the text would pass `max_bytes` or the nesting 64 levels.
std::optional<std::string> pickle_json(const pickle::Document& doc, const pickle::Value& value,
                                       size_t max_bytes);

}  // namespace allocsim
