#include "sim/diff/diff_report.hpp"

#include <cstdio>

#include "core/format_size.hpp"

namespace allocsim {
namespace {

using nlohmann::json;

bool differs(const DiffGroup& g) {
  return g.delta_at_peak() != 0 || g.changed > 0 || g.only_a > 0 || g.only_b > 0;
}

json run_json(const DiffRun& r) {
  return {{"trace", r.trace},
          {"device", r.device},
          {"events", r.events},
          {"allocations", r.allocations},
          {"requested_bytes", r.requested_bytes},
          {"alloc_conf", r.setup.conf.to_string()},
          {"torch_version", r.setup.torch_version.to_string()},
          {"capacity_bytes", r.setup.capacity},
          {"context_bytes", r.setup.context_bytes},
          {"memory_fraction", r.setup.memory_fraction ? json(*r.setup.memory_fraction) : json()},
          {"peak_allocated_bytes", r.peak_allocated},
          {"peak_reserved_bytes", r.peak_reserved},
          {"fragmentation", r.fragmentation},
          {"peak_segments", r.peak_segments},
          {"device_allocs", r.device_allocs},
          {"oom_event", r.oom_event ? json(*r.oom_event) : json()},
          {"allocated_peak_event", r.allocated_peak_event},
          {"live_at_peak_bytes", r.live_at_peak},
          {"steps", r.step_count ? json(*r.step_count) : json()}};
}

json split_json(const DiffSplit& s) {
  return {{"a", s.a},
          {"b", s.b},
          {"difference", s.difference()},
          {"b_under_a", s.b_under_a},
          {"program", s.program()},
          {"allocator", s.allocator()},
          {"a_under_b", s.a_under_b},
          {"program_other_order", s.program_other_order()},
          {"allocator_other_order", s.allocator_other_order()}};
}

std::string count(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string signed_count(int64_t n) {
  return std::string(n > 0 ? "+" : n < 0 ? "-" : "") + count(static_cast<uint64_t>(n < 0 ? -n : n));
}

std::string fixed(double v, const char* format = "%.4f") {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string pad(std::string text, size_t width) {
  if (text.size() < width) text.insert(0, width - text.size(), ' ');
  return text;
}

std::string setting_name(const ReplaySetup& s) {
  const std::string conf = s.conf.to_string();
  return conf.empty() ? "(defaults)" : conf;
}

std::string row(const std::string& name, const std::string& a, const std::string& b,
                const std::string& delta) {
  std::string line = std::string("  ") + name;
  line.resize(22, ' ');
  return line + pad(a, 14) + pad(b, 14) + pad(delta, 14) + "\n";
}

std::string size_row(const std::string& name, int64_t a, int64_t b) {
  return row(name, format_size(static_cast<uint64_t>(a)), format_size(static_cast<uint64_t>(b)),
             format_signed_size(b - a));
}

std::string count_row(const std::string& name, int64_t a, int64_t b) {
  return row(name, count(static_cast<uint64_t>(a)), count(static_cast<uint64_t>(b)),
             signed_count(b - a));
}

std::string split_text(const std::string& what, const DiffSplit& s, bool same_allocator) {
  std::string out = what + ", B - A = " + format_signed_size(s.difference()) + ": ";
  if (same_allocator)
    return out +
           "all of it the program (the runs' allocator is the same: settings, device, cap "
           "and release)\n";
  out += std::string("the program ") + format_signed_size(s.program()) +
         " (B's requests under A's allocator: " + format_size(static_cast<uint64_t>(s.b_under_a)) +
         "), the allocator " + format_signed_size(s.allocator()) + "\n";
  out += std::string("    the other way round: the allocator ") +
         format_signed_size(s.allocator_other_order()) +
         " (A's requests under B's allocator: " + format_size(static_cast<uint64_t>(s.a_under_b)) +
         "), the program " + format_signed_size(s.program_other_order()) + "\n";
  return out;
}

}  // namespace

std::string format_signed_size(int64_t bytes) {
  if (bytes == 0) return "0 bytes";
  return std::string(bytes > 0 ? "+" : "-") +
         format_size(static_cast<uint64_t>(bytes < 0 ? -bytes : bytes));
}

json diff_json(const RunDiff& d) {
  json groups = json::array();
  uint64_t alike = 0;
  for (const DiffGroup& g : d.groups) {
    if (!differs(g)) {
      ++alike;
      continue;
    }
    groups.push_back({{"label", g.label},
                      {"same_size", g.same},
                      {"size_changed", g.changed},
                      {"only_a", g.only_a},
                      {"only_b", g.only_b},
                      {"bytes_a", g.bytes_a},
                      {"bytes_b", g.bytes_b},
                      {"at_peak_a", g.at_peak_a},
                      {"at_peak_b", g.at_peak_b},
                      {"delta_at_peak", g.delta_at_peak()}});
  }
  json parting;
  if (const auto& p = d.reserved_parting) {
    parting = {{"a_event", p->a_event},
               {"b_event", p->b_event},
               {"a_reserved", p->a_reserved},
               {"b_reserved", p->b_reserved},
               {"a_size", p->a_size},
               {"b_size", p->b_size},
               {"site", p->site.empty() ? json() : json(p->site)}};
  }
  return {
      {"a", run_json(d.a)},
      {"b", run_json(d.b)},
      {"pairing",
       {{"by", describe(d.paired_by, d.paired_by_sites)},
        {"source_lines", d.sites},
        {"same_size", d.same},
        {"size_changed", d.changed},
        {"only_a", d.only_a},
        {"only_b", d.only_b}}},
      {"groups", std::move(groups)},
      {"groups_alike", alike},
      {"reserved_parting", parting},
      {"split",
       {{"same_allocator", d.same_allocator},
        {"peak_reserved", split_json(d.peak_reserved)},
        {"peak_allocated", split_json(d.peak_allocated)},
        {"b_under_a_oom_event", d.b_under_a_oom_event ? json(*d.b_under_a_oom_event) : json()},
        {"a_under_b_oom_event", d.a_under_b_oom_event ? json(*d.a_under_b_oom_event) : json()}}},
      {"warnings", d.warnings}};
}

std::string diff_text(const RunDiff& d, size_t listed) {
  std::string out = std::string("allocsim diff: A = ") + d.a.trace + " (device " +
                    std::to_string(d.a.device) + "), B = " + d.b.trace + " (device " +
                    std::to_string(d.b.device) + ")\n";
  out += row("", "A", "B", "B - A");
  out += size_row("peak allocated", d.a.peak_allocated, d.b.peak_allocated);
  out += size_row("peak reserved", d.a.peak_reserved, d.b.peak_reserved);
  out += row("fragmentation", fixed(d.a.fragmentation), fixed(d.b.fragmentation),
             fixed(d.b.fragmentation - d.a.fragmentation, "%+.4f"));
  out += count_row("segments at peak", d.a.peak_segments, d.b.peak_segments);
  out += count_row("cudaMalloc calls", d.a.device_allocs, d.b.device_allocs);
  out += count_row("allocations", static_cast<int64_t>(d.a.allocations),
                   static_cast<int64_t>(d.b.allocations));
  out += size_row("requested", static_cast<int64_t>(d.a.requested_bytes),
                  static_cast<int64_t>(d.b.requested_bytes));
  out += std::string("  settings: A ") + setting_name(d.a.setup) + ", B " +
         setting_name(d.b.setup) + "; devices of " + format_size(d.a.setup.capacity) + " and " +
         format_size(d.b.setup.capacity) + "\n";
  for (const auto& [name, run] : {std::pair{"A", &d.a}, std::pair{"B", &d.b}}) {
    if (run->oom_event)
      out += std::string("  ") + std::string(name) + " runs out of memory at event " +
             count(*run->oom_event) + ": its peaks are up to there\n";
  }
  out += std::string("paired by ") + describe(d.paired_by, d.paired_by_sites) + ": " +
         count(d.same) + " allocations of the same size, " + count(d.changed) +
         " of another size, " + count(d.only_a) + " only in A, " + count(d.only_b) + " only in B\n";
  if (const auto& p = d.reserved_parting) {
    out +=
        std::string("reserved memory parts after A's event ") + count(p->a_event) +
        " and B's event " + count(p->b_event) + " (a request of " + format_size(p->a_size) +
        (p->b_size != p->a_size ? std::string(" in A, ") + format_size(p->b_size) + " in B" : "") +
        (p->site.empty() ? "" : ", at " + p->site) +
        "): " + format_size(static_cast<uint64_t>(p->a_reserved)) + " in A, " +
        format_size(static_cast<uint64_t>(p->b_reserved)) + " in B\n";
  } else if (d.same + d.changed == 0) {
    out += "no request is in both runs: reserved memory is compared after none\n";
  } else {
    out += "reserved memory is the same after every paired request\n";
  }
  out += split_text("peak reserved", d.peak_reserved, d.same_allocator);
  out += split_text("peak allocated", d.peak_allocated, d.same_allocator);
  if (d.b_under_a_oom_event)
    out += std::string("  B's requests under A's allocator run out of memory at event ") +
           count(*d.b_under_a_oom_event) + "\n";
  if (d.a_under_b_oom_event)
    out += std::string("  A's requests under B's allocator run out of memory at event ") +
           count(*d.a_under_b_oom_event) + "\n";
  out += std::string("where the difference is at the allocated peaks (bytes live there, by ") +
         (d.sites ? "source line" : "step and position") + "):\n";
  out += std::string("  ") + pad("B - A", 12) + pad("A", 12) + pad("B", 12) +
         "  allocations: same size / other size / only A / only B\n";
  size_t shown = 0, rest = 0;
  for (const DiffGroup& g : d.groups) {
    if (!differs(g)) continue;
    if (shown == listed) {
      ++rest;
      continue;
    }
    ++shown;
    out += std::string("  ") + pad(format_signed_size(g.delta_at_peak()), 12) +
           pad(format_size(g.at_peak_a), 12) + pad(format_size(g.at_peak_b), 12) + "  " +
           count(g.same) + " / " + count(g.changed) + " / " + count(g.only_a) + " / " +
           count(g.only_b) + "  " + g.label + "\n";
  }
  if (shown == 0) out += "  nothing: the runs make the same requests\n";
  if (rest > 0) out += std::string("  ... and ") + count(rest) + " more (all in the JSON)\n";
  return out;
}

}  // namespace allocsim
