#include "sim/cli/byte_size.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace allocsim {
namespace {

std::optional<double> unit_factor(std::string unit) {
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (unit.empty() || unit == "b") return 1.0;
  const std::string prefixes = "kmgtp";
  if (unit.size() < 2 || unit.size() > 3 || prefixes.find(unit[0]) == std::string::npos)
    return std::nullopt;
  const int power = static_cast<int>(prefixes.find(unit[0])) + 1;
  if (unit.size() == 2 && unit[1] == 'b') return std::pow(1000.0, power);
  if (unit.size() == 3 && unit[1] == 'i' && unit[2] == 'b') return std::pow(1024.0, power);
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> parse_byte_size(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  const std::string number(text.substr(0, i));
  if (number.empty() || number == "." || number.find('.') != number.rfind('.')) return std::nullopt;
  while (i < text.size() && text[i] == ' ') ++i;
  const auto factor = unit_factor(std::string(text.substr(i)));
  if (!factor) return std::nullopt;
  if (number.find('.') == std::string::npos && *factor == 1.0) {
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(number.c_str(), &end, 10);
    if (errno == ERANGE || *end != '\0') return std::nullopt;
    return static_cast<uint64_t>(v);
  }
  const long double bytes =
      std::strtold(number.c_str(), nullptr) * static_cast<long double>(*factor);
  if (!(bytes < 18446744073709551616.0L)) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

}  // namespace allocsim
