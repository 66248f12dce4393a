// Sizes as users write them: "24GiB", "80GB", "512MiB", "1.5 GiB", or plain bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace allocsim {

// nullopt for anything else ("12XB", "-1GB", "", an overflow).
std::optional<uint64_t> parse_byte_size(std::string_view text);

}  // namespace allocsim
