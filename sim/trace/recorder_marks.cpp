#include "sim/trace/recorder_marks.hpp"

#include <algorithm>
#include <charconv>
#include <string>

namespace allocsim {
namespace {

template <class T>
bool parse_number(std::string_view text, T& out) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && p == end;
}

std::optional<MempoolId> parse_pool(std::string_view text) {
  const size_t comma = text.find(',');
  MempoolId id;
  if (comma == std::string_view::npos || !parse_number(text.substr(0, comma), id.first) ||
      !parse_number(text.substr(comma + 1), id.second) || id.ordinary()) {
    return std::nullopt;
  }
  return id;
}

DeviceCallCounts& counts_of(RecorderMark& mark, int device) {
  auto it = std::find_if(mark.devices.begin(), mark.devices.end(),
                         [&](const DeviceCallCounts& c) { return c.device == device; });
  if (it != mark.devices.end()) return *it;
  mark.devices.push_back(DeviceCallCounts{device, std::nullopt, 0, 0, 0});
  return mark.devices.back();
}

// One "key=value" field into `mark`; false where it is not one of a mark's.
bool parse_field(std::string_view field, RecorderMark& mark) {
  const size_t eq = field.find('=');
  if (eq == std::string_view::npos) return false;
  std::string_view key = field.substr(0, eq);
  const std::string_view value = field.substr(eq + 1);
  if (key == kCaptureMarkPrefix.substr(0, kCaptureMarkPrefix.size() - 1)) {
    // Where a use_mem_pool block is open too, the recorder writes the two in the order they
    // began, and PyTorch routes by the one begun last: its allocator searches captures_underway
    // from the end (read from the 2.11 and 2.14 libraries' get_pool). A capture begun inside the
    // block takes the requests, on every device (the mark does not say the capture's).
    const std::optional<MempoolId> pool = parse_pool(value);
    mark.capture_pool = pool;
    mark.mem_pool = false;
    mark.mem_pool_device.reset();
    mark.other_devices_pool.reset();
    return pool.has_value();
  }
  if (key == kMemPoolMarkPrefix.substr(0, kMemPoolMarkPrefix.size() - 1)) {
    // "A,B@D": the block's device (a recorder before it wrote none: every device's requests).
    const size_t at = value.find('@');
    const std::optional<MempoolId> pool = parse_pool(value.substr(0, at));
    uint64_t device = 0;
    if (at != std::string_view::npos && !parse_number(value.substr(at + 1), device)) return false;
    // Begun inside a capture, the block takes its device's requests (begun last), and the other
    // devices' go on to the capture's pool.
    if (mark.capture_pool && at != std::string_view::npos)
      mark.other_devices_pool = mark.capture_pool;
    mark.capture_pool = pool;
    mark.mem_pool = pool.has_value();
    if (at != std::string_view::npos) mark.mem_pool_device = static_cast<int>(device);
    return mark.mem_pool;
  }
  if (key == "allocsim_recorder") {
    mark.marks_every_call = value == "1";
    return mark.marks_every_call;
  }
  if (key == "empty_cache") return parse_number(value, mark.empty_cache);
  if (key == "pool_freed") return parse_number(value, mark.pools_freed);
  if (key == "settings") return parse_number(value, mark.settings);
  if (key == "calls") {
    uint64_t calls = 0;
    if (!parse_number(value, calls)) return false;
    mark.calls = calls;
    return true;
  }
  if (key == "recent") {
    // A letter each, and after the letter of a call of one device its index where not 0.
    std::vector<RecorderMark::RecentCall> recent;
    for (size_t i = 0; i < value.size();) {
      const std::optional<RecordedCall::Kind> kind = RecorderMark::kind_of_letter(value[i++]);
      if (!kind) return false;
      size_t digits = i;
      while (digits < value.size() && value[digits] >= '0' && value[digits] <= '9') ++digits;
      int device = 0;
      // empty_cache() and a settings string are every device's
      const bool every_device =
          *kind == RecordedCall::kEmptyCache || *kind == RecordedCall::kSetAllocatorSettings;
      if (digits > i && (every_device || !parse_number(value.substr(i, digits - i), device)))
        return false;
      recent.push_back({*kind, every_device ? std::nullopt : std::optional<int>(device)});
      i = digits;
    }
    mark.recent = std::move(recent);
    return true;
  }
  if (key == "last") {
    for (const auto& [name, kind] : {std::pair{"empty_cache", RecordedCall::kEmptyCache},
                                     {"memory_fraction", RecordedCall::kSetMemoryFraction},
                                     {"reset_peak", RecordedCall::kResetPeakStats},
                                     {"reset_accumulated", RecordedCall::kResetAccumulatedStats},
                                     {"pool_freed", RecordedCall::kFreeMemPool},
                                     {"settings", RecordedCall::kSetAllocatorSettings}}) {
      if (value == name) mark.last_call = kind;
    }
    return mark.last_call.has_value();
  }
  const size_t dot = key.rfind('.');
  int device = 0;
  if (dot == std::string_view::npos || !parse_number(key.substr(dot + 1), device) || device < 0)
    return false;
  key = key.substr(0, dot);
  DeviceCallCounts& counts = counts_of(mark, device);
  if (key == "memory_fraction") {
    // from_chars for doubles reads Python's repr() of a float exactly.
    double f = 0;
    if (!parse_number(value, f) || !(f >= 0 && f <= 1)) return false;
    counts.memory_fraction = f;
    return true;
  }
  if (key == "reset_peak") return parse_number(value, counts.reset_peak);
  if (key == "reset_accumulated") return parse_number(value, counts.reset_accumulated);
  if (key == "empty_cache_in_pool") return parse_number(value, counts.empty_cache_in_pool);
  return false;
}

}  // namespace

std::optional<RecordedCall::Kind> RecorderMark::kind_of_letter(char letter) {
  switch (letter) {
    case 'e':
      return RecordedCall::kEmptyCache;
    case 'f':
      return RecordedCall::kSetMemoryFraction;
    case 'p':
      return RecordedCall::kResetPeakStats;
    case 'a':
      return RecordedCall::kResetAccumulatedStats;
    case 'd':
      return RecordedCall::kFreeMemPool;
    case 's':
      return RecordedCall::kSetAllocatorSettings;
    default:
      return std::nullopt;
  }
}

DeviceCallCounts RecorderMark::of_device(int device) const {
  for (const DeviceCallCounts& c : devices) {
    if (c.device == device) return c;
  }
  return DeviceCallCounts{device, std::nullopt, 0, 0};
}

std::optional<RecorderMark> parse_recorder_mark(std::string_view metadata) {
  RecorderMark mark;
  size_t fields = 0, unknown = 0;
  while (true) {
    const size_t semicolon = metadata.find(';');
    ++fields;
    if (!parse_field(metadata.substr(0, semicolon), mark)) ++unknown;
    if (semicolon == std::string_view::npos) break;
    metadata.remove_prefix(semicolon + 1);
  }
  // allocsim's recorder: fields a later one adds are passed over. Otherwise only a capture's
  // mark, alone: any other string is the user's own metadata.
  if (mark.marks_every_call) return mark;
  if (fields == 1 && unknown == 0 && mark.capture_pool && !mark.mem_pool) return mark;
  return std::nullopt;
}

}  // namespace allocsim
