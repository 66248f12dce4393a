// --snapshot-out: the simulated run, written as PyTorch's snapshot pickle, reads back as a trace
// that replays to the same result; and Python's own pickle reads it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "backends/testing/device_op_list.hpp"
#include "sim/replay/replay.hpp"
#include "sim/report/snapshot_writer.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim {
namespace {

TEST(SnapshotWriter, TheWrittenSnapshotReplaysToTheSameResult) {
  for (const char* name :
       {"multistream_default", "gpt2-leak_default_stacks", "llama-varlen-bf16_expandable"}) {
    const Trace trace =
        read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + name + ".pickle.gz");
    ReplayOptions options;
    options.capacity = uint64_t{150109880320};
    options.record_trace = true;
    const ReplayResult first = replay(trace, options);
    const Trace written = read_snapshot_bytes(snapshot_pickle(trace, first), "written");
    EXPECT_EQ(written.events.size(), trace.events.size()) << name;
    EXPECT_EQ(written.stacks.size(), trace.stacks.size()) << name;
    EXPECT_EQ(written.annotations.size(), trace.annotations.size()) << name;
    ASSERT_TRUE(written.settings.has_value());
    EXPECT_TRUE(written.settings->same_policy(first.setup.conf)) << name;
    EXPECT_EQ(written.segments.size(), first.recording.final_segments.size()) << name;
    const ReplayResult second = replay(written, options);
    EXPECT_EQ(second.stats, first.stats) << name;
    EXPECT_EQ(testing::op_list(second.device_ops), testing::op_list(first.device_ops)) << name;
    EXPECT_EQ(second.addresses.mismatches, 0u) << name;
  }
}

TEST(SnapshotWriter, PythonReadsIt) {
  if (std::system("python3 -c 'import pickle' > /dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  const Trace trace =
      read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/gpt2_default_cap100.pickle.gz");
  ReplayOptions options;
  options.capacity = uint64_t{150109880320};
  options.memory_limit = uint64_t{17423138816};
  options.record_trace = true;
  const std::string path = ::testing::TempDir() + "/written.pickle";
  std::ofstream(path, std::ios::binary) << snapshot_pickle(trace, replay(trace, options));
  const std::string check =
      "python3 -c \"import pickle, sys; s = pickle.load(open(sys.argv[1], 'rb')); "
      "t = s['device_traces'][0]; assert any(e['action'] == 'oom' for e in t); "
      "assert s['segments'] and s['segments'][0]['blocks']; assert "
      "s['allocator_settings']['max_split_size'] == -1\" " +
      path;
  EXPECT_EQ(std::system(check.c_str()), 0);
}

}  // namespace
}  // namespace allocsim
