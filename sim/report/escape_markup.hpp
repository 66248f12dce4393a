// Text made safe inside HTML and SVG, for every page and picture allocsim writes.
#pragma once

#include <string>

namespace allocsim {

// `text` inside elements and attribute values: & < > " as entities.
std::string escape_markup(const std::string& text);

}  // namespace allocsim
