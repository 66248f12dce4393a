#include "sim/report/breakdown_format.hpp"

#include <cstdio>

#include "core/format_size.hpp"

namespace allocsim {

nlohmann::json to_json(const MemoryBreakdown& b) {
  auto rows = [](const std::vector<BreakdownRow>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const BreakdownRow& r : v) {
      a.push_back({{"group", r.group},
                   {"segments", r.segments},
                   {"reserved", r.reserved},
                   {"allocated", r.allocated},
                   {"cached_free", r.cached_free},
                   {"largest_free", r.largest_free},
                   {"free_in_split_segments", r.free_in_split}});
    }
    return a;
  };
  return {{"by_pool", rows(b.by_pool)}, {"by_segment_size", rows(b.by_segment_size)}};
}

std::string to_text(const MemoryBreakdown& b) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-20s %8s %12s %12s %12s %12s %16s\n", "", "segments",
                "reserved", "allocated", "cached free", "largest free", "free, unreleasable");
  out += buf;
  for (const auto* rows : {&b.by_pool, &b.by_segment_size}) {
    if (rows == &b.by_segment_size) out += "  by segment size:\n";
    for (const BreakdownRow& r : *rows) {
      std::snprintf(buf, sizeof buf, "  %-20s %8llu %12s %12s %12s %12s %16s\n", r.group.c_str(),
                    static_cast<unsigned long long>(r.segments), format_size(r.reserved).c_str(),
                    format_size(r.allocated).c_str(), format_size(r.cached_free).c_str(),
                    format_size(r.largest_free).c_str(), format_size(r.free_in_split).c_str());
      out += buf;
    }
  }
  return out;
}

}  // namespace allocsim
