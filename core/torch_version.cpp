#include "core/torch_version.hpp"

#include <charconv>

namespace allocsim {

std::optional<TorchVersion> TorchVersion::parse(std::string_view text) {
  TorchVersion v;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v.major);
  if (ec != std::errc() || p == end || *p != '.') return std::nullopt;
  auto [q, ec2] = std::from_chars(p + 1, end, v.minor);
  if (ec2 != std::errc() || v.major < 0 || v.minor < 0) return std::nullopt;
  // What may follow: the patch release and a local or pre-release part.
  if (q != end && *q != '.' && *q != '+' && *q != 'a' && *q != 'b' && *q != 'r')
    return std::nullopt;
  return v;
}

std::string TorchVersion::to_string() const {
  return std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace allocsim
