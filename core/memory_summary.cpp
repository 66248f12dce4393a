#include "core/memory_summary.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace allocsim {
namespace {

// Python's `x //= 1024` on ints floors; the reference value picks the unit for a whole column.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// A cell of the table: the reference value (the "all" row of the column) picks the unit, going up
// one while it stays at or above `step_at`; the value is floor-divided along.
template <size_t N>
std::string format_cell(int64_t value, int64_t reference, const char* const (&units)[N],
                        double step_at, int64_t divisor, const char* format) {
  const char* unit = units[0];
  double ref = static_cast<double>(reference);
  for (size_t i = 1; i < N; ++i) {
    if (ref < step_at) break;
    unit = units[i];
    value = floor_div(value, divisor);
    ref /= static_cast<double>(divisor);
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, format, static_cast<long long>(value), unit);
  return buf;
}

std::string format_bytes_cell(int64_t size, int64_t reference) {
  static const char* const kUnits[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
  return format_cell(size, reference, kUnits, 768 * 1024, 1024, "%6lld %s");
}

std::string format_count_cell(int64_t count, int64_t reference) {
  static const char* const kUnits[] = {" ", "K", "M"};
  return format_cell(count, reference, kUnits, 750 * 1000, 1000, "%7lld %s ");
}

std::string pad_right(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string row(const std::string& name, const Stat& s, const Stat& ref, bool bytes) {
  auto cell = [bytes](int64_t v, int64_t r) {
    return bytes ? format_bytes_cell(v, r) : format_count_cell(v, r);
  };
  std::string line(" ");
  line.append(pad_right(name, 21));
  for (const auto& [v, r] :
       {std::pair{s.current, ref.current}, std::pair{s.peak, ref.peak},
        std::pair{s.allocated, ref.allocated}, std::pair{s.freed, ref.freed}}) {
    line.append(" | ").append(cell(v, r));
  }
  line.append(" ");
  return line;
}

}  // namespace

std::string memory_summary(const DeviceStats& stats, int device, bool abbreviated) {
  struct Metric {
    const StatArray* stat;
    const char* name;
    bool bytes;
  };
  const StatArray active = stats.active(), active_bytes = stats.active_bytes();
  const Metric metrics[] = {
      {&stats.allocated_bytes, "Allocated memory", true},
      {&active_bytes, "Active memory", true},
      {&stats.requested_bytes, "Requested memory", true},
      {&stats.reserved_bytes, "GPU reserved memory", true},
      {&stats.inactive_split_bytes, "Non-releasable memory", true},
      {&stats.allocation, "Allocations", false},
      {&active, "Active allocs", false},
      {&stats.segment, "GPU reserved segments", false},
      {&stats.inactive_split, "Non-releasable allocs", false},
  };
  std::vector<std::string> lines;
  const std::string rule_eq(75, '='), rule_dash(75, '-');
  lines.push_back(rule_eq);
  char buf[256];
  std::snprintf(buf, sizeof buf, " %16s PyTorch CUDA memory summary, device ID %-17d ", "", device);
  lines.emplace_back(buf);
  lines.push_back(rule_dash);
  std::snprintf(buf, sizeof buf, "  %9s CUDA OOMs: %-12lld | %6s cudaMalloc retries: %-8lld  ", "",
                static_cast<long long>(stats.num_ooms), "",
                static_cast<long long>(stats.num_alloc_retries));
  lines.emplace_back(buf);
  lines.push_back(rule_eq);
  lines.emplace_back("        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ");
  for (const Metric& m : metrics) {
    lines.push_back(rule_dash);
    const Stat& all = (*m.stat)[kAggregate];
    lines.push_back(row(m.name, all, all, m.bytes));
    if (!abbreviated) {
      lines.push_back(row("      from large pool", (*m.stat)[kLargePool], all, m.bytes));
      lines.push_back(row("      from small pool", (*m.stat)[kSmallPool], all, m.bytes));
    }
  }
  const std::pair<const Stat*, const char*> oversize[] = {
      {&stats.oversize_allocations, "Oversize allocations"},
      {&stats.oversize_segments, "Oversize GPU segments"}};
  for (const auto& [stat, name] : oversize) {
    lines.push_back(rule_dash);
    lines.push_back(row(name, *stat, *stat, false));
  }
  lines.push_back(rule_eq);
  std::string out;
  for (const std::string& line : lines) out += "|" + line + "|\n";
  return out;
}

}  // namespace allocsim
