// The fleet's jobs and report on shipped recordings, a corrupt file among them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

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
  const FleetJobResult job =
      analyze_fleet_job(workload("llama-varlen-bf16_default_cap10500000000"), options);
  ASSERT_FALSE(job.error) << *job.error;
  ASSERT_EQ(job.devices.size(), 1u);
  const FleetDeviceRow& d = job.devices[0];
  EXPECT_TRUE(d.oom);    // the run under its 10.5 GB cap ran out of memory
  EXPECT_FALSE(d.fits);  // its history needs 10.73 GiB: not on an 11 GiB card
  EXPECT_EQ(d.best_alloc_conf, "expandable_segments:True");
  EXPECT_GT(d.best_margin_bytes, 0);
  EXPECT_EQ(job.content_hash.size(), 32u);
  // The JSON `fleet --job` prints reads back as the same result.
  const nlohmann::json printed = fleet_job_json(job);
  EXPECT_EQ(fleet_job_json(fleet_job_from_json(printed)), printed);
}

TEST(Fleet, AResultMissingAKeyIsRefusedByName) {
  nlohmann::json bad = {{"file", "a.pickle"}, {"devices", {{{"device", 0}}}}};
  try {
    fleet_job_from_json(bad);
    FAIL() << "accepted a row without its figures";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "no 'events'");
  }
  bad = {{"file", "a.pickle"}, {"error", 3}};
  EXPECT_THROW(fleet_job_from_json(bad), std::invalid_argument);
  bad = {{"file", "a.pickle"}};
  EXPECT_THROW(fleet_job_from_json(bad), std::invalid_argument);
  // A worker's failure: a file and its error, nothing else.
  const FleetJobResult failed = fleet_job_from_json({{"file", "a.pickle"}, {"error", "a: no"}});
  EXPECT_EQ(failed.error, "a: no");
  EXPECT_FALSE(failed.cached);
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
  std::vector<FleetJobResult> jobs;
  for (const std::string& f : files) jobs.push_back(analyze_fleet_job(f, options));
  EXPECT_TRUE(jobs[0].error);
  EXPECT_FALSE(jobs[1].error);
  const nlohmann::json report = fleet_report_json(jobs, options.card_bytes);
  EXPECT_EQ(report["failed"].size(), 1u);
  EXPECT_EQ(report["totals"]["devices"], 1u);
  EXPECT_NE(fleet_report_html(report).find("broken.pickle"), std::string::npos);
  // Unchanged files come from the cache the second time, with the same results.
  for (size_t i = 0; i < files.size(); ++i) {
    FleetJobResult again = analyze_fleet_job(files[i], options);
    EXPECT_EQ(again.cached, true) << files[i];
    again.cached = false;
    EXPECT_EQ(fleet_job_json(again), fleet_job_json(jobs[i])) << files[i];
  }
  // Other options, another key.
  FleetOptions other = options;
  other.card_bytes = uint64_t{24} << 30;
  EXPECT_EQ(analyze_fleet_job(files[1], other).cached, false);
  // A kept file of another form is analysed again, not trusted.
  const std::string key = jobs[1].content_hash;
  std::ofstream(dir / "cache" / (key + ".json")) << R"({"devices": [{"device": "zero"}]})";
  EXPECT_EQ(analyze_fleet_job(files[1], options).cached, false);
  fs::remove_all(dir);
}

// One job's two runs, the second against the first; a pair with an unreadable run is listed, not
// fatal.
TEST(Fleet, PairsAreDiffed) {
  const std::string base = workload("diff_pairs/base_b8"), wider = workload("diff_pairs/wider_b8");
  const std::vector<FleetPairResult> pairs = {analyze_fleet_pair(base, wider, {}),
                                              analyze_fleet_pair(base, "/nonexistent", {})};
  ASSERT_FALSE(pairs[0].error) << *pairs[0].error;
  ASSERT_EQ(pairs[0].devices.size(), 1u);
  const FleetPairRow& row = pairs[0].devices[0];
  EXPECT_EQ(row.program + row.allocator, row.peak_reserved_b - row.peak_reserved_a);
  EXPECT_TRUE(row.same_allocator);
  EXPECT_EQ(row.allocator, 0);
  ASSERT_FALSE(row.top_groups.empty());
  EXPECT_GT(row.top_groups.front().delta_at_peak, 0);
  EXPECT_TRUE(pairs[1].error);
  const nlohmann::json report = fleet_report_json({}, 0, pairs);
  ASSERT_EQ(report["pairs"].size(), 2u);
  EXPECT_EQ(report["pairs"][0]["devices"][0]["difference"],
            row.peak_reserved_b - row.peak_reserved_a);
  EXPECT_NE(fleet_report_html(report).find("Pairs (B against A)"), std::string::npos);
  EXPECT_NE(fleet_report_text(report).find("the program +"), std::string::npos);
  EXPECT_FALSE(fleet_report_json({}, 0).contains("pairs"));  // reports without pairs unchanged
}

}  // namespace
}  // namespace allocsim
