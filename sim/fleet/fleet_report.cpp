#include "sim/fleet/fleet_report.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "core/format_size.hpp"
#include "sim/diff/diff_report.hpp"
#include "sim/report/escape_markup.hpp"

namespace allocsim {
namespace {

using nlohmann::json;

constexpr size_t kTopSites = 20;
constexpr size_t kBins = 20;

bool snapshot_name(const std::string& name) {
  auto ends = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".pickle") || ends(".pickle.gz") || ends(".atrace");
}

// Per setting (by its settings string): the rows it fits, and of those that ran out of memory.
json settings_totals(const std::vector<const FleetDeviceRow*>& rows) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_conf;  // fits, OOMs avoided
  for (const FleetDeviceRow* r : rows) {
    for (const FleetSetting& s : r->settings) {
      auto& t = by_conf[s.alloc_conf];
      if (s.fits) {
        ++t.first;
        if (r->oom) ++t.second;
      }
    }
  }
  json out = json::array();
  for (const auto& [conf, t] : by_conf) {
    out.push_back({{"alloc_conf", conf}, {"jobs_fitting", t.first}, {"ooms_avoided", t.second}});
  }
  return out;
}

json top_sites(const std::vector<const FleetDeviceRow*>& rows) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_site;  // bytes, jobs
  for (const FleetDeviceRow* r : rows) {
    for (const FleetSite& s : r->sites_at_oom) {
      auto& t = by_site[s.site];
      t.first += s.bytes;
      ++t.second;
    }
  }
  std::vector<std::pair<std::string, std::pair<uint64_t, uint64_t>>> sorted(by_site.begin(),
                                                                            by_site.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  json out = json::array();
  for (size_t i = 0; i < sorted.size() && i < kTopSites; ++i) {
    out.push_back({{"site", sorted[i].first},
                   {"bytes", sorted[i].second.first},
                   {"jobs", sorted[i].second.second}});
  }
  return out;
}

// Each pair's line: the peaks, the program's and the allocator's parts, the line holding most.
std::string pairs_text(const json& pairs, size_t listed) {
  std::string out = "  pairs (B against A): " + std::to_string(pairs.size()) + "\n";
  size_t shown = 0;
  for (const json& p : pairs) {
    const std::string names = p["a"].get<std::string>() + " -> " + p["b"].get<std::string>();
    if (p.contains("error")) {
      if (shown++ < listed) out += "    " + names + ": " + p["error"].get<std::string>() + "\n";
      continue;
    }
    for (const json& d : p["devices"]) {
      if (shown++ >= listed) break;
      out += "    " + names + " (device " + std::to_string(d["device"].get<int>()) +
             "): peak reserved " + format_size(d["peak_reserved_a"].get<uint64_t>()) + " -> " +
             format_size(d["peak_reserved_b"].get<uint64_t>()) + " (" +
             format_signed_size(d["difference"].get<int64_t>()) + ": the program " +
             format_signed_size(d["program"].get<int64_t>()) + ", the allocator " +
             format_signed_size(d["allocator"].get<int64_t>()) + ")";
      if (!d["top_groups"].empty()) {
        const json& g = d["top_groups"][0];
        out += "; most at the peak: " + g["label"].get<std::string>() + " (" +
               format_signed_size(g["delta_at_peak"].get<int64_t>()) + ")";
      }
      out += "\n";
    }
  }
  if (shown > listed)
    out += "    ... and " + std::to_string(shown - listed) + " more (all in the JSON and HTML)\n";
  return out;
}

}  // namespace

std::vector<std::string> find_fleet_files(const std::vector<std::string>& paths) {
  std::set<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      for (auto it = std::filesystem::recursive_directory_iterator(p, ec);
           !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file(ec) && snapshot_name(it->path().filename().string()))
          files.insert(it->path().string());
      }
    } else {
      files.insert(p);  // as given: a missing or unreadable file is listed as a failure
    }
  }
  return {files.begin(), files.end()};
}

json fleet_report_json(const std::vector<FleetJobResult>& jobs, uint64_t card_bytes,
                       const std::vector<FleetPairResult>& pairs) {
  json rows = json::array();
  json failed = json::array();
  std::vector<const FleetDeviceRow*> typed_rows;
  uint64_t ooms = 0, leaking = 0, fitting = 0, cached = 0;
  uint64_t unallocated = 0;
  for (const FleetJobResult& job : jobs) {
    cached += job.cached.value_or(false);
    if (job.error) {
      failed.push_back({{"file", job.file}, {"error", *job.error}});
      continue;
    }
    for (const FleetDeviceRow& d : job.devices) {
      json row = fleet_row_json(d);
      row["file"] = job.file;
      ooms += d.oom;
      leaking += d.leak;
      fitting += d.fits;
      unallocated += d.reserved_unallocated_at_peak_bytes;
      rows.push_back(std::move(row));
      typed_rows.push_back(&d);
    }
  }
  json report = {{"card_bytes", card_bytes},
                 {"jobs", jobs.size()},
                 {"jobs_from_cache", cached},
                 {"failed", failed},
                 {"rows", rows},
                 {"totals",
                  {{"devices", rows.size()},
                   {"ooms", ooms},
                   {"fitting_as_recorded", fitting},
                   {"leaking", leaking},
                   {"reserved_unallocated_at_peak_bytes", unallocated},
                   {"settings", settings_totals(typed_rows)},
                   {"top_sites_at_oom", top_sites(typed_rows)}}}};
  if (!pairs.empty()) {
    json listed = json::array();
    for (const FleetPairResult& p : pairs) listed.push_back(fleet_pair_json(p));
    report["pairs"] = std::move(listed);
  }
  return report;
}

std::string fleet_report_text(const json& r) {
  const json& t = r["totals"];
  std::string out = "allocsim fleet: " + std::to_string(r["jobs"].get<uint64_t>()) + " files (" +
                    std::to_string(r["jobs_from_cache"].get<uint64_t>()) + " from the cache), " +
                    std::to_string(t["devices"].get<uint64_t>()) + " device histories, " +
                    std::to_string(r["failed"].size()) + " unreadable\n";
  out += "  ran out of memory: " + std::to_string(t["ooms"].get<uint64_t>()) +
         "; fit as recorded: " + std::to_string(t["fitting_as_recorded"].get<uint64_t>()) +
         "; leaking: " + std::to_string(t["leaking"].get<uint64_t>()) +
         "; reserved but unallocated at the peaks, summed: " +
         format_size(t["reserved_unallocated_at_peak_bytes"].get<uint64_t>()) + "\n";
  for (const json& s : t["settings"]) {
    const std::string conf = s["alloc_conf"].get<std::string>();
    out += "  " + (conf.empty() ? std::string("(defaults)") : conf) + ": fits " +
           std::to_string(s["jobs_fitting"].get<uint64_t>()) + ", avoids " +
           std::to_string(s["ooms_avoided"].get<uint64_t>()) + " of the OOMs\n";
  }
  constexpr size_t kListed = 20;
  if (r.contains("pairs")) out += pairs_text(r["pairs"], kListed);
  for (size_t i = 0; i < r["failed"].size() && i < kListed; ++i)
    out += "  unreadable: " + r["failed"][i]["error"].get<std::string>() + "\n";
  if (r["failed"].size() > kListed)
    out += "  ... and " + std::to_string(r["failed"].size() - kListed) +
           " more unreadable (all in the JSON and HTML reports)\n";
  return out;
}

namespace {

std::string histogram_svg(const std::vector<double>& values, const std::string& title, bool bytes) {
  if (values.empty()) return "";
  const double lo = *std::min_element(values.begin(), values.end());
  const double hi = *std::max_element(values.begin(), values.end());
  const double width = hi > lo ? (hi - lo) / kBins : 1;
  std::vector<uint64_t> bins(kBins, 0);
  for (double v : values) bins[std::min(kBins - 1, static_cast<size_t>((v - lo) / width))]++;
  const uint64_t top = *std::max_element(bins.begin(), bins.end());
  auto label = [&](double v) {
    if (bytes) return format_size(static_cast<uint64_t>(v));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    return std::string(buf);
  };
  std::string svg = "<figure><figcaption>" + escape_markup(title) +
                    "</figcaption><svg width=\"420\" height=\"140\" role=\"img\">";
  for (size_t i = 0; i < kBins; ++i) {
    const uint64_t h = top ? 100 * bins[i] / top : 0;
    svg += "<rect x=\"" + std::to_string(10 + i * 20) + "\" y=\"" + std::to_string(110 - h) +
           "\" width=\"18\" height=\"" + std::to_string(h) + "\"><title>" +
           std::to_string(bins[i]) + " from " +
           escape_markup(label(lo + static_cast<double>(i) * width)) + "</title></rect>";
  }
  svg += "<text x=\"10\" y=\"130\">" + escape_markup(label(lo)) +
         "</text><text x=\"410\" y=\"130\" "
         "text-anchor=\"end\">" +
         escape_markup(label(hi)) + "</text></svg></figure>";
  return svg;
}

const char* const kSortScript = R"js(
document.querySelectorAll("th").forEach((th, col) => th.addEventListener("click", () => {
  const body = th.closest("table").tBodies[0];
  const rows = [...body.rows];
  const up = th.dataset.up !== "1";
  th.dataset.up = up ? "1" : "0";
  const key = r => { const c = r.cells[col]; return c.dataset.v !== undefined ? +c.dataset.v : c.textContent; };
  rows.sort((a, b) => (key(a) > key(b) ? 1 : key(a) < key(b) ? -1 : 0) * (up ? 1 : -1));
  rows.forEach(r => body.appendChild(r));
}));
)js";

std::string cell(const std::string& text, const json& sort_value = nullptr) {
  return sort_value.is_null()
             ? "<td>" + escape_markup(text) + "</td>"
             : "<td data-v=\"" + sort_value.dump() + "\">" + escape_markup(text) + "</td>";
}

std::string setting_name(const std::string& conf) {
  return conf.empty() ? "(defaults)" : conf;
}

std::string pairs_html(const json& pairs) {
  std::string html =
      "<h2>Pairs (B against A)</h2><table><thead><tr><th>A</th><th>B</th><th>device</th>"
      "<th>peak reserved A</th><th>peak reserved B</th><th>B - A</th><th>the program</th>"
      "<th>the allocator</th><th>most at the peak</th></tr></thead><tbody>";
  for (const json& p : pairs) {
    if (p.contains("error")) {
      html += "<tr>" + cell(p["a"].get<std::string>()) + cell(p["b"].get<std::string>()) +
              "<td colspan=\"7\">" + escape_markup(p["error"].get<std::string>()) + "</td></tr>";
      continue;
    }
    for (const json& d : p["devices"]) {
      std::string top;
      for (const json& g : d["top_groups"]) {
        top += (top.empty() ? "" : "; ") + g["label"].get<std::string>() + " (" +
               format_signed_size(g["delta_at_peak"].get<int64_t>()) + ")";
      }
      html += "<tr>" + cell(p["a"].get<std::string>()) + cell(p["b"].get<std::string>()) +
              cell(std::to_string(d["device"].get<int>()), d["device"]) +
              cell(format_size(d["peak_reserved_a"].get<uint64_t>()), d["peak_reserved_a"]) +
              cell(format_size(d["peak_reserved_b"].get<uint64_t>()), d["peak_reserved_b"]) +
              cell(format_signed_size(d["difference"].get<int64_t>()), d["difference"]) +
              cell(format_signed_size(d["program"].get<int64_t>()), d["program"]) +
              cell(format_signed_size(d["allocator"].get<int64_t>()), d["allocator"]) + cell(top) +
              "</tr>";
    }
  }
  return html + "</tbody></table>";
}

}  // namespace

std::string fleet_report_html(const json& r) {
  const json& t = r["totals"];
  std::string html =
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>allocsim fleet report</title>"
      "<style>body{font:14px sans-serif;margin:2em}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:3px 6px}th{cursor:pointer;background:#eee}"
      "rect{fill:#4a7ab5}figure{display:inline-block}</style></head><body>";
  html += "<h1>allocsim fleet report</h1><pre>" + escape_markup(fleet_report_text(r)) + "</pre>";
  std::vector<double> needed, frag;
  for (const json& row : r["rows"]) {
    needed.push_back(row["needed_bytes"].get<double>());
    frag.push_back(row["fragmentation"].get<double>());
  }
  html += histogram_svg(needed, "memory needed (the recorded setting's min limit)", true);
  html += histogram_svg(frag, "fragmentation (1 - peak active / peak reserved)", false);
  html +=
      "<h2>Jobs</h2><table><thead><tr><th>file</th><th>device</th><th>OOM</th>"
      "<th>needs</th><th>as recorded</th><th>best setting</th><th>its margin</th>"
      "<th>fragmentation</th><th>reserved unallocated at peak</th><th>leak</th>"
      "</tr></thead><tbody>";
  for (const json& row : r["rows"]) {
    const int64_t margin = row["margin_bytes"].get<int64_t>();
    const int64_t best = row["best_margin_bytes"].get<int64_t>();
    auto signed_size = [](int64_t v) {
      std::string text(v < 0 ? "-" : "");
      text += format_size(static_cast<uint64_t>(v < 0 ? -v : v));
      return text;
    };
    char frag_text[32];
    std::snprintf(frag_text, sizeof frag_text, "%.4f", row["fragmentation"].get<double>());
    html += "<tr>" + cell(row["file"].get<std::string>()) +
            cell(std::to_string(row["device"].get<int>()), row["device"]) +
            cell(row["oom"].get<bool>() ? "yes" : "no") +
            cell(format_size(row["needed_bytes"].get<uint64_t>()), row["needed_bytes"]) +
            cell(std::string(margin >= 0 ? "fits, " : "short, ") + signed_size(margin), margin) +
            cell(setting_name(row["best_alloc_conf"].get<std::string>())) +
            cell(signed_size(best), best) + cell(frag_text, row["fragmentation"]) +
            cell(format_size(row["reserved_unallocated_at_peak_bytes"].get<uint64_t>()),
                 row["reserved_unallocated_at_peak_bytes"]) +
            cell(row["leak"].get<bool>() ? "growing" : "no") + "</tr>";
  }
  html +=
      "</tbody></table><h2>Settings</h2><table><thead><tr><th>PYTORCH_CUDA_ALLOC_CONF</th>"
      "<th>jobs it fits</th><th>OOMs it avoids</th></tr></thead><tbody>";
  for (const json& s : t["settings"]) {
    html += "<tr>" + cell(setting_name(s["alloc_conf"].get<std::string>())) +
            cell(std::to_string(s["jobs_fitting"].get<uint64_t>()), s["jobs_fitting"]) +
            cell(std::to_string(s["ooms_avoided"].get<uint64_t>()), s["ooms_avoided"]) + "</tr>";
  }
  html +=
      "</tbody></table><h2>Source lines holding the most memory at OOMs</h2><table><thead>"
      "<tr><th>site</th><th>bytes</th><th>jobs</th></tr></thead><tbody>";
  for (const json& s : t["top_sites_at_oom"]) {
    html += "<tr>" + cell(s["site"].get<std::string>()) +
            cell(format_size(s["bytes"].get<uint64_t>()), s["bytes"]) +
            cell(std::to_string(s["jobs"].get<uint64_t>()), s["jobs"]) + "</tr>";
  }
  html += "</tbody></table>";
  if (r.contains("pairs")) html += pairs_html(r["pairs"]);
  if (!r["failed"].empty()) {
    html += "<h2>Unreadable files</h2><ul>";
    for (const json& f : r["failed"])
      html += "<li>" + escape_markup(f["error"].get<std::string>()) + "</li>";
    html += "</ul>";
  }
  html += std::string("<script>") + kSortScript + "</script></body></html>\n";
  return html;
}

}  // namespace allocsim
