// The fleet's jobs and report on shipped recordings, a corrupt file among them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sim/fleet/fleet_job.hpp"
#include "sim/fleet/fleet_report.hpp"

namespace allocsim {
namespace {

namespace fs = std::filesystem;

std::string workload(const std::string& name) {
  return std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + name + ".pickle.gz";
}

TEST(Fleet, AJobIsReplayedAndPlanned) {
  FleetOptions options;
  options.card_bytes = uint64_t{11} << 30;
  const nlohmann::json job =
      analyze_fleet_job(workload("llama-varlen-bf16_default_cap10500000000"), options);
  ASSERT_FALSE(job.contains("error")) << job.dump();
  ASSERT_EQ(job["devices"].size(), 1u);
  const nlohmann::json& d = job["devices"][0];
  EXPECT_TRUE(d["oom"].get<bool>());    // the run under its 10.5 GB cap ran out of memory
  EXPECT_FALSE(d["fits"].get<bool>());  // its history needs 10.73 GiB: not on an 11 GiB card
  EXPECT_EQ(d["best_alloc_conf"], "expandable_segments:True");
  EXPECT_GT(d["best_margin_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(job["content_hash"].get<std::string>().size(), 32u);
}

TEST(Fleet, ACorruptFileIsListedNotFatal) {
  const fs::path dir = fs::temp_directory_path() / "allocsim_fleet_test";
  fs::remove_all(dir);
  fs::create_directories(dir / "sub");
  fs::copy_file(workload("resnet50_default"), dir / "sub" / "resnet.pickle.gz");
  std::ofstream(dir / "broken.pickle") << "not a pickle";
  std::ofstream(dir / "notes.txt") << "not a snapshot";
  const std::vector<std::string> files = find_fleet_files({dir.string()});
  ASSERT_EQ(files.size(), 2u);  // the .txt left out, sorted
  EXPECT_EQ(fs::path(files[0]).filename(), "broken.pickle");
  FleetOptions options;
  options.cache_dir = (dir / "cache").string();
  std::vector<nlohmann::json> jobs;
  for (const std::string& f : files) jobs.push_back(analyze_fleet_job(f, options));
  EXPECT_TRUE(jobs[0].contains("error"));
  EXPECT_FALSE(jobs[1].contains("error"));
  const nlohmann::json report = fleet_report_json(jobs, options.card_bytes);
  EXPECT_EQ(report["failed"].size(), 1u);
  EXPECT_EQ(report["totals"]["devices"], 1u);
  EXPECT_NE(fleet_report_html(report).find("broken.pickle"), std::string::npos);
  // Unchanged files come from the cache the second time, with the same results.
  for (size_t i = 0; i < files.size(); ++i) {
    nlohmann::json again = analyze_fleet_job(files[i], options);
    EXPECT_TRUE(again["cached"].get<bool>()) << files[i];
    again["cached"] = false;
    EXPECT_EQ(again, jobs[i]) << files[i];
  }
  // Other options, another key.
  FleetOptions other = options;
  other.card_bytes = uint64_t{24} << 30;
  EXPECT_FALSE(analyze_fleet_job(files[1], other)["cached"].get<bool>());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace allocsim
