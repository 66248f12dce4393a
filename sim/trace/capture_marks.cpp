#include "sim/trace/capture_marks.hpp"

#include <charconv>

namespace allocsim {

std::optional<MempoolId> parse_capture_mark(std::string_view metadata) {
  if (!metadata.starts_with(kCaptureMarkPrefix)) return std::nullopt;
  metadata.remove_prefix(kCaptureMarkPrefix.size());
  MempoolId id;
  const char* end = metadata.data() + metadata.size();
  auto [p, ec] = std::from_chars(metadata.data(), end, id.first);
  if (ec != std::errc() || p == end || *p != ',') return std::nullopt;
  auto [q, ec2] = std::from_chars(p + 1, end, id.second);
  if (ec2 != std::errc() || q != end || id.ordinary()) return std::nullopt;
  return id;
}

}  // namespace allocsim
