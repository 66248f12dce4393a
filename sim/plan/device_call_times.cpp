#include "sim/plan/device_call_times.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "sim/plan/device_call_times_data.hpp"
#include "sim/trace/input_error.hpp"

namespace allocsim {
namespace {

constexpr std::array<DeviceOpKind, 4> kKinds = {
    DeviceOpKind::kSegmentAlloc, DeviceOpKind::kSegmentFree, DeviceOpKind::kSegmentMap,
    DeviceOpKind::kSegmentUnmap};

double along(const std::pair<uint64_t, double>& a, const std::pair<uint64_t, double>& b,
             uint64_t size) {
  const double x0 = static_cast<double>(a.first);
  const double x1 = static_cast<double>(b.first);
  return a.second + (b.second - a.second) * (static_cast<double>(size) - x0) / (x1 - x0);
}

}  // namespace

double DeviceCallTimes::seconds(DeviceOpKind kind, uint64_t size) const {
  const auto& p = points[static_cast<size_t>(kind)];
  if (p.empty()) return 0;
  if (p.size() == 1 || size <= p.front().first) return p.front().second;
  auto hi = std::lower_bound(p.begin(), p.end(), size,
                             [](const auto& point, uint64_t s) { return point.first < s; });
  if (hi == p.end()) hi = p.end() - 1;
  return std::max(0.0, along(*(hi - 1), *hi, size));
}

double DeviceCallTimes::seconds(const std::vector<DeviceOp>& ops) const {
  double total = 0;
  for (const DeviceOp& op : ops) total += seconds(op.kind, op.size);
  return total;
}

DeviceCallTimes device_call_times_from_json(const nlohmann::json& json, const std::string& where) {
  auto fail = [&](const std::string& what) -> DeviceCallTimes {
    throw InputError(where + ": " + what);
  };
  if (!json.is_object()) return fail("expected a JSON object of device call times");
  DeviceCallTimes t;
  t.source = where;
  if (json.contains("device") && json["device"].is_string()) t.device = json["device"];
  for (DeviceOpKind kind : kKinds) {
    const char* key = to_string(kind);
    if (!json.contains(key) || !json[key].is_array()) {
      return fail(std::string("expected \"") + key + "\": [[bytes, seconds], ...]");
    }
    auto& out = t.points[static_cast<size_t>(kind)];
    for (const nlohmann::json& row : json[key]) {
      if (!row.is_array() || row.size() != 2 || !row[0].is_number_unsigned() ||
          !row[1].is_number() || row[1].get<double>() < 0) {
        return fail(std::string("\"") + key + "\": expected [bytes, seconds] pairs, got " +
                    row.dump());
      }
      if (!out.empty() && row[0].get<uint64_t>() <= out.back().first) {
        return fail(std::string("\"") + key + "\": sizes must ascend");
      }
      out.emplace_back(row[0].get<uint64_t>(), row[1].get<double>());
    }
  }
  return t;
}

nlohmann::json device_call_times_json(const DeviceCallTimes& times) {
  nlohmann::json json = {{"device", times.device}};
  for (DeviceOpKind kind : kKinds) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& [size, s] : times.points[static_cast<size_t>(kind)]) rows.push_back({size, s});
    json[to_string(kind)] = std::move(rows);
  }
  return json;
}

DeviceCallTimes read_device_call_times(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open the device call times");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann counts bytes from 1, and one past the end where the text ends early.
    throw InputError(path + ": byte offset " + std::to_string(e.byte > 0 ? e.byte - 1 : 0) +
                     ": not JSON (expected the table allocsim calibrate writes)");
  }
  return device_call_times_from_json(json, path);
}

const DeviceCallTimes& shipped_device_call_times() {
  static const DeviceCallTimes times = [] {
    DeviceCallTimes t = device_call_times_from_json(nlohmann::json::parse(kShippedDeviceCallTimes),
                                                    "device_call_times_h100.json");
    t.source = "shipped";
    return t;
  }();
  return times;
}

}  // namespace allocsim
