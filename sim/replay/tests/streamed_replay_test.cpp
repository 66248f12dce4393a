#include "sim/replay/streamed_replay.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "sim/report/replay_report.hpp"
#include "sim/testing/shipped_workloads.hpp"
#include "sim/trace/compact_trace.hpp"
#include "sim/trace/file_bytes.hpp"
#include "sim/trace/input_error.hpp"
#include "sim/trace/trace_file.hpp"

namespace allocsim {
namespace {

std::string workload_path(const std::string& name) {
  return std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + name + ".pickle.gz";
}

// Replays `path` alongside its decoding; `streamed` says whether the streamed result was used.
std::string streamed_report(const std::string& path, const ReplayOptions& options, bool* streamed) {
  StreamedReplay replay(options, path);
  const Trace trace = read_trace_file(path, &replay.feed());
  const ReplayResult result = replay.finish(trace);
  *streamed = replay.streamed();
  return replay_report_json_text(trace, result);
}

std::string ordinary_report(const std::string& path, const ReplayOptions& options) {
  const Trace trace = read_trace_file(path);
  return replay_report_json_text(trace, replay(trace, options));
}

class StreamedReplayTest : public testing::TestWithParam<std::string> {};

// Every shipped workload, at its recorded settings and under a what-if that runs out of memory:
// the same report as the ordinary replay, whether the guess held or not.
TEST_P(StreamedReplayTest, SameReportAsTheOrdinaryReplay) {
  const std::string path = workload_path(GetParam());
  ReplayOptions recorded;
  ReplayOptions what_if;
  what_if.capacity = uint64_t{12} << 30;
  what_if.alloc_conf = parse_alloc_conf("expandable_segments:True");
  what_if.on_oom = OnOom::kContinue;
  what_if.record_trace = true;
  for (const ReplayOptions& options : {recorded, what_if}) {
    bool streamed = false;
    EXPECT_EQ(streamed_report(path, options, &streamed), ordinary_report(path, options));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Workloads, StreamedReplayTest, testing::ValuesIn(testing_workloads::shipped_workload_names()),
    testing_workloads::workload_test_name<testing::TestParamInfo<std::string>>);

// The guess holds for a whole history at default settings, or with settings given; it fails for
// recorded non-default settings and for a history that starts mid-run, which replay again.
TEST(StreamedReplay, UsesTheStreamedResultOnlyWhenTheGuessHolds) {
  bool streamed = false;
  streamed_report(workload_path("gpt2gen_default"), ReplayOptions{}, &streamed);
  EXPECT_TRUE(streamed);
  streamed_report(workload_path("gpt2_maxsplit128"), ReplayOptions{}, &streamed);
  EXPECT_FALSE(streamed);
  ReplayOptions given;
  given.alloc_conf = parse_alloc_conf("max_split_size_mb:128");
  streamed_report(workload_path("gpt2_maxsplit128"), given, &streamed);
  EXPECT_TRUE(streamed);
  streamed_report(workload_path("llama-varlen-bf16_default_stacks_window"), ReplayOptions{},
                  &streamed);
  EXPECT_FALSE(streamed);
}

// A compact trace is not decoded through the feed: the replay thread is let go and the ordinary
// replay runs.
TEST(StreamedReplay, OtherFormatsReplayAfterReading) {
  const Trace trace = read_trace_file(workload_path("gpt2_default"));
  const std::string path = testing::TempDir() + "/streamed_replay_test.trace";
  {
    const std::string bytes = write_compact_trace(trace);
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<long>(bytes.size()));
  }
  bool streamed = true;
  EXPECT_EQ(streamed_report(path, ReplayOptions{}, &streamed),
            ordinary_report(path, ReplayOptions{}));
  EXPECT_FALSE(streamed);
}

// A snapshot cut short fails in the decoder after events were published: the replay thread must
// let go of them before they are freed (ASan checks), and the error is the decoder's.
TEST(StreamedReplay, DecodingErrorsStopTheReplayThread) {
  const FileBytes bytes = read_file_bytes(workload_path("gpt2_default"));
  const std::string path = testing::TempDir() + "/streamed_replay_cut.pickle";
  for (const size_t keep : {bytes.size() / 2, bytes.size() - 1, size_t{100}}) {
    std::ofstream(path, std::ios::binary).write(bytes.view().data(), static_cast<long>(keep));
    StreamedReplay replay(ReplayOptions{}, path);
    EXPECT_THROW((void)read_trace_file(path, &replay.feed()), InputError) << keep;
  }
}

}  // namespace
}  // namespace allocsim
