// The differential fuzzer's shrunk cases (workloads/oracle_fuzz/): random allocation programs run
// through PyTorch's own allocator on a GPU, each recorded beside PyTorch's statistics and OOMs.
// A replay matches the recording exactly, or, for the cases DEPARTURES lists, says where it
// departs: never a silent difference.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/replay/pool_guess_settling.hpp"
#include "sim/replay/replay.hpp"
#include "sim/report/recording_departure.hpp"
#include "sim/testing/shipped_workloads.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim {
namespace {

const std::string kDir = std::string(ALLOCSIM_WORKLOADS_DIR) + "/oracle_fuzz/";

// The cases that still depart, by name: the first word of each line of DEPARTURES.
std::set<std::string> expected_departures() {
  std::set<std::string> names;
  std::ifstream in(kDir + "DEPARTURES");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    names.insert(line.substr(0, line.find(' ')));
  }
  return names;
}

// Where the replay differs from what PyTorch did, as text; empty when it does not. What the trace
// cannot show is allowed for (tools/oracle_fuzz/compare.py says what, docs/verification.md why).
std::string differences(const Trace& trace, const nlohmann::json& meta, const ReplayResult& r) {
  std::ostringstream out;
  std::vector<std::pair<std::string, uint64_t>> recorded_ops;
  std::vector<uint64_t> recorded_ooms;
  for (uint64_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.action >= TraceAction::kSegmentAlloc && e.action <= TraceAction::kSegmentUnmap)
      recorded_ops.emplace_back(to_string(e.action), e.size);
    if (e.action == TraceAction::kOom) recorded_ooms.push_back(i);
  }
  std::vector<std::pair<std::string, uint64_t>> replayed_ops;
  for (const DeviceOp& op : r.device_ops) replayed_ops.emplace_back(to_string(op.kind), op.size);
  if (replayed_ops != recorded_ops) out << "segment operations; ";
  if (r.addresses.mismatches > 0) out << r.addresses.mismatches << " block addresses; ";
  std::vector<uint64_t> replayed_ooms;
  for (const auto& o : r.outcome.oom_events) replayed_ooms.push_back(o.event_index);
  if (replayed_ooms != recorded_ooms || r.outcome.recorded_ooms_not_reproduced > 0) out << "OOMs; ";
  // The programs catch their OOMs: those the trace shows a later request after went on.
  uint64_t caught = 0;
  for (uint64_t i : recorded_ooms) {
    for (uint64_t j = i + 1; j < trace.events.size(); ++j) {
      if (trace.events[j].action == TraceAction::kAlloc ||
          trace.events[j].action == TraceAction::kOom) {
        ++caught;
        break;
      }
    }
  }
  if (r.outcome.ooms_caught != caught)
    out << r.outcome.ooms_caught << " OOMs caught for " << caught << "; ";
  if (r.outcome.oom && r.outcome.oom->recorded &&
      r.outcome.oom->caught != (caught == recorded_ooms.size()))
    out << "the last OOM's caught flag; ";
  // A recording made through allocsim's recorder names every empty_cache(): none is unknowable.
  const bool marked = meta.value("recorder_marks", false);
  const int64_t silent = marked ? 0 : meta.value("empty_cache_calls_without_trace_entry", 0);
  const int64_t like_a_retry = marked ? 0 : meta.value("empty_cache_calls_like_a_retry", 0);
  const auto in_capture = static_cast<int64_t>(r.outcome.recorded_ooms_capture_unknown);
  const auto guessed = static_cast<int64_t>(r.outcome.releases_before_guessed_capture);
  for (const auto& [key, value] : meta["memory_stats"].items()) {
    const int64_t diff = r.stats.get(key) - value.get<int64_t>();
    if (diff == 0) continue;
    if (key == "num_sync_all_streams" && -(silent + like_a_retry) <= diff && diff <= in_capture)
      continue;
    if (key == "num_alloc_retries" && -guessed <= diff && diff <= like_a_retry + in_capture)
      continue;
    out << key << " " << r.stats.get(key) << " for " << value << "; ";
  }
  return out.str();
}

class OracleFuzzCase : public ::testing::TestWithParam<std::string> {};

TEST_P(OracleFuzzCase, MatchesPyTorchOrSaysWhereItDeparts) {
  std::ifstream in(kDir + GetParam() + ".json");
  const nlohmann::json meta = nlohmann::json::parse(in);
  Trace trace = read_snapshot_file(kDir + GetParam() + ".pickle.gz");
  ReplayOptions options;
  options.capacity = meta["total_bytes"].get<uint64_t>();
  // The cap, where the recording's marks do not carry it (and its changes) themselves.
  if (meta["cap_bytes"].get<uint64_t>() > 0 && !meta.value("recorder_marks", false)) {
    options.memory_fraction = static_cast<double>(meta["cap_bytes"].get<uint64_t>()) /
                              static_cast<double>(options.capacity);
  }
  settle_pool_guesses(trace, options);  // as allocsim's reading does, on the run's device
  const ReplayResult result = replay(trace, options);
  const std::string diff = differences(trace, meta, result);
  if (expected_departures().count(GetParam())) {
    EXPECT_TRUE(recording_departure(trace, result).has_value())
        << "differs silently: " << (diff.empty() ? "(now exact: take it off DEPARTURES)" : diff);
  } else {
    EXPECT_EQ(diff, "");
    EXPECT_FALSE(recording_departure(trace, result).has_value());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shrunk, OracleFuzzCase,
    ::testing::ValuesIn(testing_workloads::shipped_workload_names("oracle_fuzz")),
    testing_workloads::workload_test_name<::testing::TestParamInfo<std::string>>);

}  // namespace
}  // namespace allocsim
