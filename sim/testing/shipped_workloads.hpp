// The workloads shipped in workloads/, for tests parameterized over them.
#pragma once

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

namespace allocsim::testing_workloads {

// Every shipped workload with PyTorch's statistics beside it (NAME.json, NAME.pickle.gz), by name:
// in workloads/, or in its `folder` (cuda_graphs).
inline std::vector<std::string> shipped_workload_names(const std::string& folder = "") {
  std::vector<std::string> names;
  const std::string dir =
      std::string(ALLOCSIM_WORKLOADS_DIR) + (folder.empty() ? "" : "/" + folder);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A workload's name as a gtest parameter name (letters, digits and underscores).
template <class ParamInfo>
std::string workload_test_name(const ParamInfo& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

}  // namespace allocsim::testing_workloads
