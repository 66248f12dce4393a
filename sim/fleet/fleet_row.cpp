#include "sim/fleet/fleet_row.hpp"

#include <stdexcept>

namespace allocsim {
namespace {

using nlohmann::json;

template <typename T>
T field(const json& object, const char* key) {
  if (!object.is_object() || !object.contains(key))
    throw std::invalid_argument(std::string("no '") + key + "'");
  try {
    return object[key].get<T>();
  } catch (const json::exception&) {
    throw std::invalid_argument(std::string("'") + key + "' is a " + object[key].type_name() +
                                ", not what a fleet result holds there");
  }
}

const json& list(const json& object, const char* key) {
  if (!object.contains(key) || !object[key].is_array())
    throw std::invalid_argument(std::string("'") + key + "' is not a list");
  return object[key];
}

FleetDeviceRow row_from_json(const json& j) {
  FleetDeviceRow r;
  r.device = field<int>(j, "device");
  r.events = field<uint64_t>(j, "events");
  r.alloc_conf = field<std::string>(j, "alloc_conf");
  r.oom = field<bool>(j, "oom");
  r.needed_bytes = field<uint64_t>(j, "needed_bytes");
  r.fits = field<bool>(j, "fits");
  r.margin_bytes = field<int64_t>(j, "margin_bytes");
  r.best_alloc_conf = field<std::string>(j, "best_alloc_conf");
  r.best_margin_bytes = field<int64_t>(j, "best_margin_bytes");
  if (j.contains("limit_bytes") && !j["limit_bytes"].is_null())
    r.limit_bytes = field<uint64_t>(j, "limit_bytes");
  r.peak_reserved_bytes = field<int64_t>(j, "peak_reserved_bytes");
  r.fragmentation = field<double>(j, "fragmentation");
  r.reserved_unallocated_at_peak_bytes = field<uint64_t>(j, "reserved_unallocated_at_peak_bytes");
  r.leak = field<bool>(j, "leak");
  r.growth_bytes_per_step = field<double>(j, "growth_bytes_per_step");
  for (const json& s : list(j, "settings")) {
    r.settings.push_back({field<std::string>(s, "alloc_conf"),
                          field<uint64_t>(s, "min_limit_bytes"), field<bool>(s, "fits")});
  }
  for (const json& s : list(j, "sites_at_oom"))
    r.sites_at_oom.push_back({field<std::string>(s, "site"), field<uint64_t>(s, "bytes")});
  if (j.contains("torch_version")) {
    const json& v = j["torch_version"];
    r.torch_version =
        FleetTorchVersion{field<std::string>(v, "version"), field<std::string>(v, "told_by")};
  }
  return r;
}

}  // namespace

json fleet_row_json(const FleetDeviceRow& r) {
  json settings = json::array();
  for (const FleetSetting& s : r.settings) {
    settings.push_back(
        {{"alloc_conf", s.alloc_conf}, {"min_limit_bytes", s.min_limit_bytes}, {"fits", s.fits}});
  }
  json sites = json::array();
  for (const FleetSite& s : r.sites_at_oom) sites.push_back({{"site", s.site}, {"bytes", s.bytes}});
  json row = {{"device", r.device},
              {"events", r.events},
              {"alloc_conf", r.alloc_conf},
              {"oom", r.oom},
              {"needed_bytes", r.needed_bytes},
              {"fits", r.fits},
              {"margin_bytes", r.margin_bytes},
              {"best_alloc_conf", r.best_alloc_conf},
              {"best_margin_bytes", r.best_margin_bytes},
              {"limit_bytes", r.limit_bytes ? json(*r.limit_bytes) : json(nullptr)},
              {"peak_reserved_bytes", r.peak_reserved_bytes},
              {"fragmentation", r.fragmentation},
              {"reserved_unallocated_at_peak_bytes", r.reserved_unallocated_at_peak_bytes},
              {"leak", r.leak},
              {"growth_bytes_per_step", r.growth_bytes_per_step},
              {"settings", std::move(settings)},
              {"sites_at_oom", std::move(sites)}};
  if (r.torch_version)
    row["torch_version"] = {{"version", r.torch_version->version},
                            {"told_by", r.torch_version->told_by}};
  return row;
}

json fleet_outcome_json(const FleetJobResult& job) {
  if (job.error) return {{"error", *job.error}};
  json devices = json::array();
  for (const FleetDeviceRow& d : job.devices) devices.push_back(fleet_row_json(d));
  return {{"devices", std::move(devices)}, {"warnings", job.warnings}};
}

json fleet_job_json(const FleetJobResult& job) {
  json out = fleet_outcome_json(job);
  out["file"] = job.file;
  if (!job.content_hash.empty()) out["content_hash"] = job.content_hash;
  if (job.cached) out["cached"] = *job.cached;
  return out;
}

FleetJobResult fleet_job_from_json(const json& j) {
  FleetJobResult job;
  job.file = field<std::string>(j, "file");
  if (j.contains("content_hash")) job.content_hash = field<std::string>(j, "content_hash");
  if (j.contains("cached")) job.cached = field<bool>(j, "cached");
  if (j.contains("error")) {
    job.error = field<std::string>(j, "error");
    return job;
  }
  if (!j.contains("devices")) throw std::invalid_argument("neither 'devices' nor 'error'");
  for (const json& d : list(j, "devices")) job.devices.push_back(row_from_json(d));
  if (j.contains("warnings")) {
    for (const json& w : list(j, "warnings")) {
      if (!w.is_string()) throw std::invalid_argument("'warnings' holds a non-string");
      job.warnings.push_back(w.get<std::string>());
    }
  }
  return job;
}

}  // namespace allocsim
