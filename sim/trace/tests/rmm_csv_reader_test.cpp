// The RMM log reader: a log of the same requests replays exactly as the snapshot does.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "sim/replay/replay.hpp"
#include "sim/trace/input_error.hpp"
#include "sim/trace/rmm_csv_reader.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim {
namespace {

// What RMM's logging_resource_adaptor writes for the trace's requests.
std::string as_rmm_log(const Trace& trace) {
  std::string csv = "Thread,Time,Action,Pointer,Size,Stream\n";
  char line[160];
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    const char* action = e.action == TraceAction::kAlloc           ? "allocate"
                         : e.action == TraceAction::kFreeCompleted ? "deallocate"
                         : e.action == TraceAction::kOom           ? "allocate failure"
                                                                   : nullptr;
    if (!action) continue;
    std::snprintf(line, sizeof line, "140573312345856,%zu.%06zu,%s,0x%llx,%llu,0x%llx\n",
                  1634567890 + i / 1000, i % 1000, action, static_cast<unsigned long long>(e.addr),
                  static_cast<unsigned long long>(e.size),
                  static_cast<unsigned long long>(e.stream));
    csv += line;
  }
  return csv;
}

TEST(RmmCsvReader, ALogOfTheSameRequestsReplaysAsTheSnapshotDoes) {
  for (const char* name : {"resnet50_default", "gpt2_default_cap100"}) {
    const Trace snapshot =
        read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/" + name + ".pickle.gz");
    const Trace log = read_rmm_csv_bytes(as_rmm_log(snapshot), "log.csv");
    ReplayOptions options;
    options.capacity = uint64_t{150109880320};
    options.use_recorded_addresses = false;  // an RMM log records no cudaMalloc addresses
    if (std::string(name) == "gpt2_default_cap100") options.memory_limit = uint64_t{17423138816};
    const ReplayResult a = replay(snapshot, options);
    const ReplayResult b = replay(log, options);
    EXPECT_EQ(a.stats, b.stats) << name;
    EXPECT_EQ(a.device_ops, b.device_ops) << name;
    EXPECT_EQ(a.outcome.ooms, b.outcome.ooms) << name;
  }
}

TEST(RmmCsvReader, BadLinesAreNamed) {
  auto error_of = [](const std::string& text) {
    try {
      (void)read_rmm_csv_bytes(text, "log.csv");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(read)");
  };
  const std::string header = "Thread,Time,Action,Pointer,Size,Stream\n";
  EXPECT_EQ(error_of("a,b\n"),
            "log.csv: line 1: expected RMM's header 'Thread,Time,Action,Pointer,Size,Stream'");
  EXPECT_EQ(error_of(header + "1,2,allocate,0x10,12XB,0x0\n"),
            "log.csv: line 2: expected a size in bytes, found '12XB'");
  EXPECT_EQ(error_of(header + "1,2,allocate,zz,12,0x0\n"),
            "log.csv: line 2: expected a pointer such as 0x7f8a40000000, found 'zz'");
  EXPECT_EQ(error_of(header + "1,2,reallocate,0x10,12,0x0\n"),
            "log.csv: line 2: expected the action allocate, deallocate or allocate failure, found "
            "'reallocate'");
  EXPECT_EQ(error_of(header + "1,2,allocate,0x10\n"),
            "log.csv: line 2: expected 6 comma-separated fields "
            "(Thread,Time,Action,Pointer,Size,Stream)");
  EXPECT_EQ(read_rmm_csv_bytes(header + "7,1.5,allocate,0x7f0000000000,4096,0x0\r\n", "log.csv")
                .events.size(),
            1u);
}

}  // namespace
}  // namespace allocsim
