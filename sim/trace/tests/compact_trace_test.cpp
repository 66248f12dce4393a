// allocsim's compact trace: a converted trace replays exactly as the snapshot does.
#include <gtest/gtest.h>

#include "sim/replay/replay.hpp"
#include "sim/trace/compact_trace.hpp"
#include "sim/trace/input_error.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim {
namespace {

TEST(CompactTrace, AConvertedTraceReplaysAsTheSnapshotDoes) {
  for (const char* name :
       {"multistream_default", "gpt2_default_cap100", "llama-varlen-bf16_expandable"}) {
    const Trace snapshot =
        read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + name + ".pickle.gz");
    const std::string bytes = write_compact_trace(snapshot);
    EXPECT_LT(bytes.size(), snapshot.events.size() * 16) << name;
    const Trace compact = read_compact_trace(bytes, "t.atrace");
    ASSERT_EQ(compact.events.size(), snapshot.events.size());
    for (size_t i = 0; i < compact.events.size(); ++i) {
      const TraceEvent &a = compact.events[i], &b = snapshot.events[i];
      ASSERT_TRUE(a.action == b.action && a.addr == b.addr && a.size == b.size &&
                  a.stream == b.stream && a.time_us == b.time_us && a.device_free == b.device_free)
          << name << " event " << i;
    }
    ReplayOptions options;
    options.capacity = uint64_t{150109880320};
    if (std::string(name) == "gpt2_default_cap100") options.memory_limit = uint64_t{17423138816};
    EXPECT_EQ(replay(compact, options).stats, replay(snapshot, options).stats) << name;
    EXPECT_EQ(write_compact_trace(compact), bytes) << name;  // deterministic
  }
}

// A trace whose history starts mid-run carries the segments its start is reconstructed from
// (predict writes its traces so): with them, it replays as the snapshot does.
TEST(CompactTrace, SegmentsTravelWhereAskedFor) {
  const Trace snapshot = read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) +
                                            "/sweeps/vit-fp16_batch-8.pickle.gz");
  Trace only_blocks = snapshot;  // a segment-less history: as a predicted trace is
  std::erase_if(only_blocks.events, [](const TraceEvent& e) {
    return e.action != TraceAction::kAlloc && e.action != TraceAction::kFreeRequested &&
           e.action != TraceAction::kFreeCompleted;
  });
  only_blocks.addresses_recorded = false;
  const std::string bytes = write_compact_trace(only_blocks, true);
  const Trace compact = read_compact_trace(bytes, "t.atrace");
  EXPECT_FALSE(compact.addresses_recorded);
  ASSERT_EQ(compact.segments.size(), snapshot.segments.size());
  for (size_t i = 0; i < compact.segments.size(); ++i) {
    EXPECT_EQ(compact.segments[i].address, snapshot.segments[i].address);
    EXPECT_EQ(compact.segments[i].blocks.size(), snapshot.segments[i].blocks.size());
  }
  ReplayOptions options;
  options.capacity = uint64_t{150109880320};
  EXPECT_EQ(replay(compact, options).stats, replay(only_blocks, options).stats);
  EXPECT_EQ(write_compact_trace(compact, true), bytes);
  // Without them (the default), the bytes are those of a whole history's trace.
  EXPECT_LT(write_compact_trace(only_blocks).size(), bytes.size());
  // A truncated segment section is named.
  EXPECT_THROW((void)read_compact_trace(bytes.substr(0, bytes.size() - 3), "t.atrace"), InputError);
}

TEST(CompactTrace, BadBytesAreNamed) {
  auto error_of = [](const std::string& bytes) {
    try {
      (void)read_compact_trace(bytes, "t.atrace");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(read)");
  };
  EXPECT_EQ(error_of("NOTATRACE"),
            "t.atrace: byte offset 0: expected the magic \"ATRACE1\\n\" of an allocsim trace");
  EXPECT_EQ(error_of(std::string("ATRACE1\n\x00\xff\xff\xff\xff\x0f", 14)),
            "t.atrace: byte offset 14: claims 4294967295 events, more than its bytes can hold");
  EXPECT_EQ(error_of(std::string("ATRACE1\n\x00\x01\x09\x00\x00\x00\x00\x00", 16)),
            "t.atrace: byte offset 11: event 0: unknown action 9");
  Trace t;
  t.events.push_back({.action = TraceAction::kAlloc, .addr = 1 << 20, .size = 512, .time_us = 7});
  const std::string good = write_compact_trace(t);
  EXPECT_NE(error_of(good.substr(0, good.size() - 1)).find("the trace ends early"),
            std::string::npos);
  // After the events, only the segment section may follow.
  EXPECT_NE(error_of(good + "x").find("unknown flags 120 before the segments"), std::string::npos);
  EXPECT_NE(error_of(good + '\0' + '\0' + "x").find("bytes after the last segment"),
            std::string::npos);
}

}  // namespace
}  // namespace allocsim
