#include "sim/trace/rmm_csv_reader.hpp"

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "sim/trace/input_error.hpp"

namespace allocsim {
namespace {

constexpr std::string_view kHeader = "Thread,Time,Action,Pointer,Size,Stream";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ')) s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  return s;
}

// A pointer or stream: "0x7f8a40000000" (or plain decimal).
bool parse_number(std::string_view field, uint64_t& out) {
  const std::string text(field);
  if (text.empty() || text[0] == '-' || text[0] == '+') return false;
  const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  errno = 0;
  char* end = nullptr;
  out = std::strtoull(text.c_str() + (hex ? 2 : 0), &end, hex ? 16 : 10);
  return errno == 0 && end != text.c_str() + (hex ? 2 : 0) && *end == '\0';
}

}  // namespace

bool looks_like_rmm_csv(std::string_view bytes) {
  return bytes.substr(0, kHeader.size()) == kHeader;
}

Trace read_rmm_csv_bytes(std::string_view bytes, const std::string& source) {
  Trace trace;
  trace.source = source;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string_view::npos) end = bytes.size();
    const std::string_view line = trim(bytes.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    auto fail = [&](const std::string& what) {
      throw InputError(source + ": line " + std::to_string(line_no) + ": " + what);
    };
    if (line_no == 1) {
      if (line.substr(0, kHeader.size()) != kHeader) {
        fail("expected RMM's header '" + std::string(kHeader) + "'");
      }
      continue;
    }
    if (line.empty()) continue;
    std::vector<std::string_view> fields;
    size_t start = 0;
    while (fields.size() < 7) {
      const size_t comma = line.find(',', start);
      fields.push_back(trim(line.substr(
          start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (fields.size() != 6)
      fail("expected 6 comma-separated fields (Thread,Time,Action,Pointer,Size,Stream)");
    TraceEvent e;
    if (!parse_number(fields[3], e.addr))
      fail("expected a pointer such as 0x7f8a40000000, found '" + std::string(fields[3]) + "'");
    if (!parse_number(fields[4], e.size))
      fail("expected a size in bytes, found '" + std::string(fields[4]) + "'");
    if (!parse_number(fields[5], e.stream))
      fail("expected a stream such as 0x0, found '" + std::string(fields[5]) + "'");
    const std::string_view action = fields[2];
    if (action == "allocate") {
      e.action = TraceAction::kAlloc;
      trace.events.push_back(e);
    } else if (action == "deallocate" || action == "free") {
      e.action = TraceAction::kFreeRequested;
      trace.events.push_back(e);
      e.action = TraceAction::kFreeCompleted;
      trace.events.push_back(e);
    } else if (action == "allocate failure") {
      e.action = TraceAction::kOom;
      e.addr = 0;
      trace.events.push_back(e);
    } else {
      fail("expected the action allocate, deallocate or allocate failure, found '" +
           std::string(action) + "'");
    }
  }
  if (line_no == 0)
    throw InputError(source + ": empty file; expected RMM's header '" + std::string(kHeader) + "'");
  return trace;
}

}  // namespace allocsim
