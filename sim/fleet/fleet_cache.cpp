#include "sim/fleet/fleet_cache.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace allocsim {

std::string fleet_job_key(const std::string& path, const std::string& content,
                          std::optional<uint64_t> advisor_limit, const FleetOptions& options) {
  // The path too: the result names it, and an advisor's snapshot is planned under the limit of
  // the JSON beside it.
  std::string salt = path + "|" + (advisor_limit ? std::to_string(*advisor_limit) : "-") + "|" +
                     std::to_string(options.card_bytes) + "|" +
                     std::to_string(options.context_bytes) + "|" +
                     (options.torch_version ? options.torch_version->to_string() : "-") +
                     "|" ALLOCSIM_FLEET_VERSION;
  for (const std::string& c : options.alloc_confs) salt += "|" + c;
  const XXH128_hash_t h =
      XXH3_128bits_withSeed(content.data(), content.size(), XXH3_64bits(salt.data(), salt.size()));
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return hex;
}

std::optional<FleetJobResult> FleetCache::load(const std::string& key) const {
  if (dir_.empty()) return std::nullopt;
  std::ifstream in(dir_ + "/" + key + ".json", std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json kept = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!kept.is_object()) return std::nullopt;
  kept["file"] = "";
  try {
    return fleet_job_from_json(kept);
  } catch (const std::invalid_argument&) {
    return std::nullopt;  // a file of another form under this name: analysed again
  }
}

void FleetCache::store(const std::string& key, const FleetJobResult& result) const {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  const std::string kept = dir_ + "/" + key + ".json";
  const std::string tmp = kept + ".tmp" + std::to_string(getpid()) + "-" +
                          std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  std::ofstream(tmp) << fleet_outcome_json(result).dump() << "\n";
  std::filesystem::rename(tmp, kept, ec);  // whole or not at all, whatever runs beside
}

}  // namespace allocsim
