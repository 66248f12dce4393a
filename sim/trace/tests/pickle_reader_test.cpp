// The pickle decoder (plain data in, anything that would run code refused, bad bytes reported) and
// the snapshot reader on top of it.
#include <gtest/gtest.h>

#include <map>

#include "sim/trace/input_error.hpp"
#include "sim/trace/pickle_reader.hpp"
#include "sim/trace/recorder_marks.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim::pickle {
namespace {

std::string error_of(const std::string& bytes) {
  try {
    decode(bytes);
  } catch (const PickleError& e) {
    return e.what();
  }
  return "(decoded)";
}

// pickle.dumps({'a': 1, 'b': [True, None, -2, 3.5, 'x']}, protocol=4)
const std::string kSample(
    "\x80\x04\x95\x27\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x4b\x01\x8c\x01\x62"
    "\x94\x5d\x94"
    "\x28\x88\x4e\x4a\xfe\xff\xff\xff\x47\x40\x0c\x00\x00\x00\x00\x00\x00\x8c\x01\x78\x94\x65\x75"
    "\x2e",
    50);

TEST(PickleReader, DecodesPlainData) {
  const Document doc = decode(kSample);
  ASSERT_EQ(doc.root.kind, Kind::kDict);
  const auto a = doc.get(doc.root, "a");
  ASSERT_TRUE(a && a->kind == Kind::kInt);
  EXPECT_EQ(a->i, 1);
  const auto b = doc.get(doc.root, "b");
  ASSERT_TRUE(b && b->kind == Kind::kList);
  const auto& items = doc.items(*b);
  ASSERT_EQ(items.size(), 5u);
  EXPECT_EQ(items[0].kind, Kind::kBool);
  EXPECT_EQ(items[1].kind, Kind::kNone);
  EXPECT_EQ(items[2].i, -2);
  EXPECT_DOUBLE_EQ(items[3].f, 3.5);
  EXPECT_EQ(doc.str(items[4]), "x");
}

TEST(PickleReader, RefusesOpcodesThatImportOrCall) {
  // pickle.dumps(os.system) style: GLOBAL 'os system', then REDUCE.
  EXPECT_EQ(error_of(std::string("\x80\x02") + "cos\nsystem\n(S'true'\ntR."),
            "byte offset 2: opcode GLOBAL would import or call code; refused");
  EXPECT_EQ(error_of(std::string("\x80\x04\x8c\x02os\x8c\x06system\x93.", 15)),
            "byte offset 14: opcode STACK_GLOBAL would import or call code; refused");
  EXPECT_EQ(error_of(std::string("\x80\x02]R.", 5)),
            "byte offset 3: opcode REDUCE would import or call code; refused");
  EXPECT_EQ(error_of(std::string("\x80\x02]b.", 5)),
            "byte offset 3: opcode BUILD would import or call code; refused");
}

TEST(PickleReader, ReportsTruncationAndBadLengths) {
  EXPECT_EQ(error_of(kSample.substr(0, 30)).rfind("byte offset ", 0), 0u);
  EXPECT_EQ(error_of(""), "byte offset 0: the pickle ends before its STOP opcode (truncated?)");
  // BINUNICODE8 claiming 2^62 bytes: refused before allocating anything.
  EXPECT_EQ(error_of(std::string("\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x40xyz", 14)),
            "byte offset 11: a length of 4611686018427387904 bytes runs past the end of the pickle "
            "(3 left)");
  EXPECT_EQ(error_of(std::string("\x80\x02h\x05.", 5)),
            "byte offset 2: memo index 5 was never stored");
  EXPECT_EQ(error_of(std::string("\x80\x02"
                                 "a.",
                                 4)),
            "byte offset 2: the stack holds too few items");
  EXPECT_EQ(error_of(std::string("\x80\x02\xff.", 4)),
            "byte offset 2: opcode 0xff is outside the snapshot subset this reader accepts");
}

TEST(PickleReader, DeepNestingNeedsNoRecursion) {
  constexpr size_t kDepth = 200000;
  std::string bytes = "\x80\x02";
  bytes += std::string(kDepth, ']');
  bytes += std::string(kDepth - 1, 'a');
  bytes += '.';
  const Document doc = decode(bytes);
  EXPECT_EQ(doc.containers.size(), kDepth);
  // As a snapshot it is refused cleanly, not by a stack overflow.
  EXPECT_THROW((void)read_snapshot_bytes(bytes, "deep.pickle"), InputError);
}

TEST(PickleReader, DupWhileTheStackGrows) {
  // DUP pushes the stack's own top: the copy must be taken before the push grows the stack (found
  // by fuzzing; AddressSanitizer reports the read of the old storage).
  std::string b = "\x80\x02(K\x07";
  b += std::string(4000, '2');  // DUP past every growth of the stack
  b += "t.";                    // TUPLE of them all
  const Document doc = decode(b);
  const auto items = doc.items(doc.root);
  ASSERT_EQ(items.size(), 4001u);
  for (const Value& v : items) ASSERT_EQ(v.i, 7);
}

TEST(PickleReader, LargeListsGrowInTurns) {
  // Two lists, memoized, filled in turns by APPENDS batches until both pass a megabyte of items:
  // each grows while the other's storage stays where it is.
  std::string b("\x80\x04]q\x00]q\x01\x30\x30", 10);  // [] memo 0, [] memo 1, POP twice
  constexpr int kBatches = 140, kBatch = 1000;  // 2.2 MB each: moved out of the arena, then grown
  for (int i = 0; i < kBatches; ++i) {
    for (int list = 0; list < 2; ++list) {
      b += 'h';
      b += static_cast<char>(list);
      b += '(';
      for (int j = 0; j < kBatch; ++j) {
        const int v = (i * kBatch + j) * 2 + list;  // BININT: 4 bytes little-endian
        b += 'J';
        for (int k = 0; k < 4; ++k) b += static_cast<char>((v >> (8 * k)) & 0xff);
      }
      b += "e0";  // APPENDS, POP
    }
  }
  b += std::string("h\x00h\x01\x86.", 6);  // (list 0, list 1)
  const Document doc = decode(b);
  const auto lists = doc.items(doc.root);
  ASSERT_EQ(lists.size(), 2u);
  for (int list = 0; list < 2; ++list) {
    const auto items = doc.items(lists[static_cast<size_t>(list)]);
    ASSERT_EQ(items.size(), size_t{kBatches} * kBatch);
    for (size_t k = 0; k < items.size(); ++k) {
      ASSERT_EQ(items[k].i, static_cast<int64_t>(k * 2) + list) << "list " << list << " item " << k;
    }
  }
}

// Pickle bytes opcode by opcode, strings memoized as Python's pickler writes a snapshot's keys.
class SnapshotBytes {
 public:
  SnapshotBytes() {
    b_ = "\x80\x04}(\x8c\x0d"
         "device_traces](";
    b_ += "](";
  }
  // An event dict whose keys and values are given as (key, value) pairs; a key seen before is
  // fetched from the memo, as pickle does.
  void event(std::initializer_list<std::pair<std::string, int>> fields, const std::string& action,
             const std::string* user_metadata = nullptr) {
    b_ += "}(";
    key("action");
    b_ += "\x8c";
    b_ += static_cast<char>(action.size());
    b_ += action;
    for (const auto& [k, v] : fields) {
      key(k);
      b_ += 'M';  // BININT2
      b_ += static_cast<char>(v & 0xff);
      b_ += static_cast<char>(v >> 8);
    }
    if (user_metadata) {
      key("user_metadata");
      key(*user_metadata);  // a string value, memoized as Python's pickler does
    }
    b_ += 'u';
  }
  // An alloc event whose one stack frame has `line` as its line number's pickle bytes.
  void alloc_with_frame_line(int addr, const std::string& line) {
    b_ += "}(";
    key("action");
    b_ +=
        "\x8c\x05"
        "alloc";
    for (const char* k : {"addr", "size"}) {
      key(k);
      b_ += 'M';
      b_ += static_cast<char>(addr & 0xff);
      b_ += static_cast<char>(addr >> 8);
    }
    key("stream");
    b_ += "K";
    b_ += '\0';
    key("frames");
    b_ += "]}(";  // the frames list, the frame dict
    key("name");
    b_ +=
        "\x8c\x01"
        "f";
    key("filename");
    b_ +=
        "\x8c\x04"
        "x.py";
    key("line");
    b_ += line;
    b_ += "uau";  // the frame dict, APPEND it, the event dict
  }
  // The events after this are the next device's.
  void next_device() { b_ += "e]("; }
  // The same events on devices 0 and 1: `events` called once for each.
  template <class Events>
  void on_two_devices(Events events) {
    events();
    next_device();
    events();
  }
  std::string finish() const { return b_ + "eeu."; }
  // The snapshot closed with allocsim's recorder's own dict: its start mark and the MemPools it
  // saw deleted, by id (and, where given, the device each was made on).
  std::string finish_with_recorder(const std::string& start,
                                   const std::vector<std::vector<int>>& freed_pools) {
    b_ += "ee";
    key("allocsim_recorder");
    b_ += "}(";
    key("start");
    key(start);
    key("freed_pools");
    b_ += "](";
    for (const std::vector<int>& pool : freed_pools) {
      b_ += "](";
      for (const int i : pool) {
        b_ += 'K';
        b_ += static_cast<char>(i);
      }
      b_ += 'e';
    }
    b_ += "euu.";
    return b_;
  }
  // The snapshot closed with allocsim.trace's notes: what it could not know of the program.
  std::string finish_with_trace_notes(const std::vector<std::string>& notes) {
    b_ += "ee";
    key("allocsim_trace");
    b_ += "}(";
    key("warnings");
    b_ += "](";
    for (const std::string& note : notes) {
      b_ += 'X';  // BINUNICODE: a 4-byte length
      for (int shift = 0; shift < 32; shift += 8)
        b_ += static_cast<char>((note.size() >> shift) & 0xff);
      b_ += note;
    }
    b_ += "euu.";
    return b_;
  }

 private:
  void key(const std::string& k) {
    const auto it = memo_.find(k);
    if (it != memo_.end()) {
      b_ += 'h';
      b_ += static_cast<char>(it->second);
      return;
    }
    b_ += "\x8c";
    b_ += static_cast<char>(k.size());
    b_ += k;
    b_ += "\x94";  // MEMOIZE
    memo_.emplace(k, static_cast<int>(memo_.size()));
  }
  std::string b_;
  std::map<std::string, int> memo_;  // key -> memo index
};

// 2^64-1 as pickle writes it: LONG1 of 9 bytes (the ninth keeps it positive).
const std::string kTwoTo64Minus1("\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00", 11);

TEST(PickleReader, IntsBeyond64BitsAreReadWithoutAValue) {
  const Document doc = decode(std::string("\x80\x04") + kTwoTo64Minus1 + ".");
  EXPECT_EQ(doc.root.kind, Kind::kBigInt);
  // Bounds are still checked: a length past the end is an error, not a skip.
  EXPECT_NE(error_of(std::string("\x80\x04\x8a\x09\xff\xff.", 7)).find("runs past the end"),
            std::string::npos);
}

TEST(SnapshotReader, AllocsimTracesNotesAreItsWarnings) {
  SnapshotBytes s;
  s.event({{"addr", 4096}, {"size", 512}, {"stream", 0}}, "alloc", nullptr);
  const std::string long_note(300, 'x');  // a note of any length
  const Trace t =
      read_snapshot_bytes(s.finish_with_trace_notes({"cuDNN's recurrent kernels not modelled",
                                                     long_note, std::string("not\x01printable")}),
                          "traced.pickle");
  ASSERT_EQ(t.events.size(), 1u);
  std::vector<std::string> notes;
  for (const std::string& w : t.warnings) {
    if (w.find("traced on a CPU: ") != std::string::npos) notes.push_back(w);
  }
  ASSERT_EQ(notes.size(), 2u);  // the unprintable one left out
  EXPECT_EQ(notes[0], "traced.pickle: traced on a CPU: cuDNN's recurrent kernels not modelled");
  EXPECT_EQ(notes[1], "traced.pickle: traced on a CPU: " + long_note);
  // the key is allocsim's own: no "key allocsim does not know" line
  for (const std::string& w : t.warnings) EXPECT_EQ(w.find("does not know"), std::string::npos);
}

TEST(SnapshotReader, AFrameLineBeyond64BitsIsKeptAsUnknownAndSaid) {
  SnapshotBytes s;
  s.alloc_with_frame_line(4096, kTwoTo64Minus1);
  s.alloc_with_frame_line(8192, std::string("K\x07", 2));  // line 7
  const Trace t = read_snapshot_bytes(s.finish(), "compiled.pickle");
  ASSERT_EQ(t.events.size(), 2u);
  ASSERT_EQ(t.frames.size(), 2u);
  EXPECT_EQ(t.frames[t.stacks[t.events[0].stack][0]].line, kUnknownLine);
  EXPECT_EQ(t.frames[t.stacks[t.events[1].stack][0]].line, 7);
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_EQ(t.warnings[0],
            "compiled.pickle: 1 stack frame line number(s) beyond 64 bits (torch.compile writes "
            "2^64-1 for none) kept as unknown");
}

TEST(SnapshotReader, ASizeBeyond64BitsIsRefused) {
  SnapshotBytes s;
  s.event({{"addr", 4096}, {"stream", 0}}, "alloc");
  std::string bytes = s.finish();
  // The size goes where the reader needs a number: insert it before the event dict closes.
  const std::string needle = "\x8c\x06stream";
  bytes.insert(bytes.find(needle), std::string("\x8c\x04size", 6) + kTwoTo64Minus1);
  try {
    (void)read_snapshot_bytes(bytes, "huge.pickle");
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("found int beyond 64 bits"), std::string::npos)
        << e.what();
  }
}

TEST(SnapshotReader, EventsWithChangingKeyLayouts) {
  SnapshotBytes s;
  s.event({{"addr", 4096}, {"size", 512}, {"stream", 0}}, "alloc");
  s.event({{"addr", 8192}, {"size", 1024}, {"stream", 0}}, "alloc");  // the same keys: reused
  s.event({{"addr", 4096}, {"size", 512}, {"size", 768}}, "alloc");   // repeated: the last wins
  s.event({{"stream", 0}, {"size", 512}, {"addr", 4096}}, "free_requested");   // another order
  s.event({{"addr", 8192}, {"size", 1024}, {"stream", 0}}, "free_requested");  // the first again
  const Trace t = read_snapshot_bytes(s.finish(), "layouts.pickle");
  ASSERT_EQ(t.events.size(), 5u);
  EXPECT_EQ(t.events[0].size, 512u);
  EXPECT_EQ(t.events[1].addr, 8192u);
  EXPECT_EQ(t.events[1].size, 1024u);
  EXPECT_EQ(t.events[2].size, 768u);
  EXPECT_EQ(t.events[3].action, TraceAction::kFreeRequested);
  EXPECT_EQ(t.events[3].addr, 4096u);
  EXPECT_EQ(t.events[4].addr, 8192u);
  EXPECT_EQ(t.events[4].size, 1024u);
}

// A recorder's capture marks (sim/trace/recorder_marks.hpp): the events whose user_metadata names
// a pool, with its id; any other metadata is no mark.
TEST(SnapshotReader, CaptureMarksAreReadFromUserMetadata) {
  SnapshotBytes s;
  const std::string mark = "cuda_graph_pool=3,0", none, other = "step 4", bad = "cuda_graph_pool=3",
                    ordinary = "cuda_graph_pool=0,0";
  s.event({{"addr", 4096}, {"size", 512}, {"stream", 7}}, "alloc", &mark);
  s.event({{"addr", 8192}, {"size", 512}, {"stream", 0}}, "alloc", &none);
  s.event({{"addr", 4608}, {"size", 512}, {"stream", 7}}, "alloc", &mark);  // memoized
  s.event({{"addr", 9216}, {"size", 512}, {"stream", 0}}, "alloc", &other);
  s.event({{"addr", 9728}, {"size", 512}, {"stream", 0}}, "alloc", &bad);
  s.event({{"addr", 9728}, {"size", 512}, {"stream", 0}}, "alloc", &ordinary);
  s.event({{"size", 512}, {"stream", 7}}, "oom", &mark);
  const Trace t = read_snapshot_bytes(s.finish(), "marked.pickle");
  ASSERT_EQ(t.events.size(), 7u);
  const std::vector<std::pair<uint64_t, MempoolId>> want{
      {0, MempoolId{3, 0}}, {2, MempoolId{3, 0}}, {6, MempoolId{3, 0}}};
  EXPECT_EQ(t.capture_marks, want);
}

// allocsim's recorder's counts (sim/trace/recorder_marks.hpp): the calls between two marked
// entries, at the later one; an empty_cache() that completed waiting frees first, at the
// releases after them; the call made last, last.
TEST(SnapshotReader, RecorderCountsBecomeTheCallsBetweenEntries) {
  SnapshotBytes s;
  const std::string base = "allocsim_recorder=1;empty_cache=4",
                    capped =
                        "allocsim_recorder=1;empty_cache=4;memory_fraction.0=0.5;"
                        "last=memory_fraction;cuda_graph_pool=2,0",
                    emptied =
                        "allocsim_recorder=1;empty_cache=6;memory_fraction.0=0.5;"
                        "reset_accumulated.0=1;last=empty_cache",
                    reset =
                        "allocsim_recorder=1;empty_cache=6;memory_fraction.0=0.5;"
                        "reset_accumulated.0=1;reset_peak.0=2;reset_peak.1=7;last=reset_peak",
                    future = "allocsim_recorder=1;a_later_field=x;empty_cache=6";
  s.event({{"addr", 4096}, {"size", 512}, {"stream", 0}}, "alloc", &base);
  s.event({{"addr", 8192}, {"size", 512}, {"stream", 0}}, "alloc", &capped);
  s.event({{"addr", 8192}, {"size", 512}, {"stream", 0}}, "free_completed", &emptied);
  s.event({{"addr", 8192}, {"size", 2097152}, {"stream", 0}}, "segment_free", &emptied);
  s.event({{"addr", 4096}, {"size", 512}, {"stream", 0}}, "free_requested", &reset);
  s.event({{"addr", 4096}, {"size", 512}, {"stream", 0}}, "free_completed", &future);
  const Trace t = read_snapshot_bytes(s.finish(), "recorded.pickle");
  ASSERT_EQ(t.events.size(), 6u);
  EXPECT_EQ(t.calls_marked_from, 0u);
  using C = RecordedCall;
  const std::vector<RecordedCall> want{
      {1, C::kSetMemoryFraction, 0.5}, {2, C::kResetAccumulatedStats, 0},
      {3, C::kEmptyCache, 0},          {3, C::kEmptyCache, 0},
      {4, C::kResetPeakStats, 0},      {4, C::kResetPeakStats, 0}};
  EXPECT_EQ(t.recorded_calls, want);
  EXPECT_EQ(t.capture_marks, (std::vector<std::pair<uint64_t, MempoolId>>{{1, MempoolId{2, 0}}}));
}

// use_mem_pool blocks route like captures (the one begun last wins where both are open, as
// PyTorch's allocator searches its captures_underway from the end), and the
// MemPools deleted between two entries are the calls at the later one, their pools named by the
// snapshot's list (counted from the history's start).
TEST(SnapshotReader, MemPoolMarksRouteRequestsAndNameTheDeletedPools) {
  SnapshotBytes s;
  const std::string in_pool = "allocsim_recorder=1;empty_cache=0;pool_freed=1;mem_pool=0,4",
                    capture_first =
                        "allocsim_recorder=1;empty_cache=0;pool_freed=1;cuda_graph_pool=0,5;"
                        "mem_pool=0,4",
                    deleted = "allocsim_recorder=1;empty_cache=0;pool_freed=3;last=pool_freed",
                    unnamed = "allocsim_recorder=1;empty_cache=0;pool_freed=4;last=pool_freed";
  s.event({{"addr", 4096}, {"size", 512}, {"stream", 0}}, "alloc", &in_pool);
  s.event({{"addr", 8192}, {"size", 512}, {"stream", 7}}, "alloc", &capture_first);
  s.event({{"addr", 4096}, {"size", 2048}, {"stream", 0}}, "segment_free", &deleted);
  s.event({{"addr", 8192}, {"size", 512}, {"stream", 7}}, "free_requested", &unnamed);
  const Trace t = read_snapshot_bytes(
      s.finish_with_recorder("allocsim_recorder=1;empty_cache=0;pool_freed=1", {{0, 3}, {0, 4}}),
      "pools.pickle");
  EXPECT_EQ(t.capture_marks, (std::vector<std::pair<uint64_t, MempoolId>>{{0, MempoolId{0, 4}},
                                                                          {1, MempoolId{0, 4}}}));
  EXPECT_EQ(t.mem_pools, (std::vector<MempoolId>{MempoolId{0, 4}}));
  using C = RecordedCall;
  const std::vector<RecordedCall> want{{2, C::kFreeMemPool, 0, MempoolId{0, 3}},
                                       {2, C::kFreeMemPool, 0, MempoolId{0, 4}}};
  EXPECT_EQ(t.recorded_calls, want);
  ASSERT_EQ(t.warnings.size(), 2u);
  EXPECT_EQ(t.warnings[1],
            "pools.pickle: private pools of CUDA graphs and MemPools (0, 4): 2 of 2 allocations "
            "served from them, as the recording marked its captures and use_mem_pool blocks "
            "(user_metadata cuda_graph_pool=A,B, mem_pool=A,B)");
  EXPECT_EQ(t.warnings[0],
            "pools.pickle: 1 torch.cuda.MemPool deletion(s) counted by the recorder name no pool "
            "(the snapshot has no 'allocsim_recorder' 'freed_pools' for them): not made, so those "
            "pools keep their segments");
}

// An empty_cache() between two entries a private pool took (a capture or a use_mem_pool block
// open) was made while it did: PyTorch then neither synchronises nor releases the ordinary pools.
TEST(SnapshotReader, AnEmptyCacheInsideABlockIsMarkedSo) {
  SnapshotBytes s;
  const std::string plain = "allocsim_recorder=1;empty_cache=0",
                    first_call = "allocsim_recorder=1;empty_cache=1;last=empty_cache",
                    in_block = "allocsim_recorder=1;empty_cache=1;last=empty_cache;mem_pool=0,2@0",
                    second_call =
                        "allocsim_recorder=1;empty_cache=2;last=empty_cache;mem_pool=0,2@0;"
                        "cuda_graph_pool=0,4";
  s.event({{"addr", 4096}, {"size", 512}, {"stream", 0}}, "alloc", &plain);
  s.event({{"addr", 8192}, {"size", 512}, {"stream", 0}}, "alloc", &first_call);
  s.event({{"addr", 12288}, {"size", 512}, {"stream", 0}}, "alloc", &in_block);
  s.event({{"addr", 16384}, {"size", 512}, {"stream", 7}}, "alloc", &second_call);
  const Trace t = read_snapshot_bytes(s.finish(), "calls.pickle");
  using C = RecordedCall;
  const std::vector<RecordedCall> want{{1, C::kEmptyCache, 0, {}, false},
                                       {3, C::kEmptyCache, 0, {}, true}};
  EXPECT_EQ(t.recorded_calls, want);
}

// A use_mem_pool block is one device's (mem_pool=A,B@D): the recorder's mark is on every entry
// the thread records in it, every device's, and only that device's requests go to the pool; the
// others take the capture's it began inside, if any. A capture begun inside the block takes every
// device's (begun last). A mark without a device (an older recorder's) routes every device's.
TEST(SnapshotReader, MemPoolMarksRouteOnlyTheirDevicesRequests) {
  SnapshotBytes s;
  const std::string on_0 = "allocsim_recorder=1;empty_cache=0;mem_pool=0,4@0",
                    then_capture =
                        "allocsim_recorder=1;empty_cache=0;mem_pool=0,4@0;"
                        "cuda_graph_pool=0,5",
                    in_capture =
                        "allocsim_recorder=1;empty_cache=0;cuda_graph_pool=0,5;"
                        "mem_pool=0,4@0",
                    anywhere = "allocsim_recorder=1;empty_cache=0;mem_pool=0,6";
  s.on_two_devices([&] {
    s.event({{"addr", 4096}, {"size", 512}, {"stream", 0}}, "alloc", &on_0);
    s.event({{"addr", 8192}, {"size", 512}, {"stream", 0}}, "alloc", &then_capture);
    s.event({{"addr", 12288}, {"size", 512}, {"stream", 0}}, "alloc", &in_capture);
    s.event({{"addr", 16384}, {"size", 512}, {"stream", 0}}, "alloc", &anywhere);
  });
  const std::vector<Trace> devices = read_snapshot_devices(s.finish(), "two.pickle");
  ASSERT_EQ(devices.size(), 2u);
  using Marks = std::vector<std::pair<uint64_t, MempoolId>>;
  EXPECT_EQ(
      devices[0].capture_marks,
      (Marks{
          {0, MempoolId{0, 4}}, {1, MempoolId{0, 5}}, {2, MempoolId{0, 4}}, {3, MempoolId{0, 6}}}));
  EXPECT_EQ(devices[0].mem_pools, (std::vector<MempoolId>{MempoolId{0, 4}, MempoolId{0, 6}}));
  EXPECT_EQ(devices[1].capture_marks,
            (Marks{{1, MempoolId{0, 5}}, {2, MempoolId{0, 5}}, {3, MempoolId{0, 6}}}));
  EXPECT_EQ(devices[1].mem_pools, (std::vector<MempoolId>{MempoolId{0, 6}}));
}

// A MemPool's destructor releases it on the device it was made on, which the recorder writes
// after the pool's id: only that device's replay deletes it. An entry without a device (an older
// recorder's) is every device's.
TEST(SnapshotReader, DeletedMemPoolsAreTheirOwnDevicesCalls) {
  SnapshotBytes s;
  const std::string before = "allocsim_recorder=1;empty_cache=0;pool_freed=0",
                    deleted = "allocsim_recorder=1;empty_cache=0;pool_freed=3;last=pool_freed";
  s.on_two_devices([&] {
    s.event({{"addr", 4096}, {"size", 512}, {"stream", 0}}, "alloc", &before);
    s.event({{"addr", 4096}, {"size", 512}, {"stream", 0}}, "free_requested", &deleted);
  });
  const std::vector<Trace> devices = read_snapshot_devices(
      s.finish_with_recorder(before, {{0, 3, 0}, {0, 4, 1}, {0, 5}}), "two_pools.pickle");
  ASSERT_EQ(devices.size(), 2u);
  using C = RecordedCall;
  EXPECT_EQ(devices[0].recorded_calls,
            (std::vector<RecordedCall>{{1, C::kFreeMemPool, 0, MempoolId{0, 3}},
                                       {1, C::kFreeMemPool, 0, MempoolId{0, 5}}}));
  EXPECT_EQ(devices[1].recorded_calls,
            (std::vector<RecordedCall>{{1, C::kFreeMemPool, 0, MempoolId{0, 4}},
                                       {1, C::kFreeMemPool, 0, MempoolId{0, 5}}}));
  for (const Trace& t : devices) EXPECT_TRUE(t.warnings.empty()) << t.warnings[0];
}

// A call of one device names it in the recent kinds ("a1"): each device's trace orders its own
// calls by them, and leaves the other devices' out (empty_cache() is every device's).
TEST(SnapshotReader, RecentKindsOrderEachDevicesOwnCalls) {
  SnapshotBytes s;
  const std::string base = "allocsim_recorder=1;empty_cache=4;calls=1;recent=e",
                    later =
                        "allocsim_recorder=1;empty_cache=6;reset_accumulated.0=1;"
                        "reset_accumulated.1=1;last=reset_accumulated;calls=5;recent=eea1ea";
  s.on_two_devices([&] {
    s.event({{"addr", 4096}, {"size", 512}, {"stream", 0}}, "alloc", &base);
    s.event({{"addr", 8192}, {"size", 512}, {"stream", 0}}, "free_completed", &later);
    s.event({{"addr", 8192}, {"size", 2048}, {"stream", 0}}, "segment_free", &later);
  });
  const std::vector<Trace> devices = read_snapshot_devices(s.finish(), "two.pickle");
  ASSERT_EQ(devices.size(), 2u);
  using C = RecordedCall;
  EXPECT_EQ(
      devices[0].recorded_calls,
      (std::vector<RecordedCall>{
          {2, C::kEmptyCache, 0}, {2, C::kEmptyCache, 0}, {2, C::kResetAccumulatedStats, 0}}));
  EXPECT_EQ(devices[1].recorded_calls, (std::vector<RecordedCall>{{2, C::kEmptyCache, 0},
                                                                  {2, C::kResetAccumulatedStats, 0},
                                                                  {2, C::kEmptyCache, 0}}));
  for (const Trace& t : devices) EXPECT_TRUE(t.warnings.empty()) << t.warnings[0];
  // A device after an empty_cache() is not the recorder's: the field is passed over.
  const std::optional<RecorderMark> odd =
      parse_recorder_mark("allocsim_recorder=1;empty_cache=1;calls=1;recent=pe1");
  ASSERT_TRUE(odd);
  EXPECT_TRUE(odd->recent.empty());
  EXPECT_EQ(parse_recorder_mark("allocsim_recorder=1;calls=2;recent=p12d")->recent,
            (std::vector<RecorderMark::RecentCall>{{RecordedCall::kResetPeakStats, 12},
                                                   {RecordedCall::kFreeMemPool, 0}}));
}

// The kinds of the recent calls order those between two entries where the count of all calls
// says how many came (a reset made after an empty_cache() goes after its releases); without them
// (an older recorder) a reset beside calls of other kinds is warned of.
TEST(SnapshotReader, RecentKindsOrderTheCallsBetweenEntries) {
  const std::string base = "allocsim_recorder=1;empty_cache=4;calls=1;recent=e",
                    later =
                        "allocsim_recorder=1;empty_cache=5;memory_fraction.0=0.5;"
                        "reset_accumulated.0=1;last=memory_fraction;calls=4;recent=eaef",
                    unordered =
                        "allocsim_recorder=1;empty_cache=5;memory_fraction.0=0.5;"
                        "reset_accumulated.0=1;last=memory_fraction";
  for (const bool ordered : {true, false}) {
    SnapshotBytes s;
    const std::string& now = ordered ? later : unordered;
    s.event({{"addr", 4096}, {"size", 512}, {"stream", 0}}, "alloc", &base);
    s.event({{"addr", 8192}, {"size", 512}, {"stream", 0}}, "free_completed", &now);
    s.event({{"addr", 8192}, {"size", 2048}, {"stream", 0}}, "segment_free", &now);
    const Trace t = read_snapshot_bytes(s.finish(), "order.pickle");
    using C = RecordedCall;
    // The empty_cache() is placed at its releases (event 2): the reset made after it, too.
    const std::vector<RecordedCall> want =
        ordered ? std::vector<RecordedCall>{{1, C::kResetAccumulatedStats, 0},
                                            {2, C::kEmptyCache, 0},
                                            {2, C::kSetMemoryFraction, 0.5}}
                : std::vector<RecordedCall>{{1, C::kResetAccumulatedStats, 0},
                                            {1, C::kSetMemoryFraction, 0.5},
                                            {2, C::kEmptyCache, 0}};
    EXPECT_EQ(t.recorded_calls, want) << ordered;
    EXPECT_EQ(t.warnings.size(), ordered ? 0u : 1u);
  }
}

TEST(RecorderMark, AnyOtherMetadataIsNoMark) {
  EXPECT_FALSE(parse_recorder_mark("step 4"));
  EXPECT_FALSE(parse_recorder_mark("empty_cache=3"));  // counts without the recorder's field
  EXPECT_FALSE(parse_recorder_mark("cuda_graph_pool=1,2;empty_cache=3"));
  EXPECT_FALSE(parse_recorder_mark("mem_pool=0,2"));  // only allocsim's recorder writes it
  EXPECT_FALSE(parse_recorder_mark(""));
  const auto mark =
      parse_recorder_mark("allocsim_recorder=1;memory_fraction.3=0.125;last=reset_peak");
  ASSERT_TRUE(mark);
  EXPECT_EQ(mark->of_device(3).memory_fraction, 0.125);
  EXPECT_FALSE(mark->of_device(0).memory_fraction);
  EXPECT_EQ(mark->last_call, RecordedCall::kResetPeakStats);
  EXPECT_FALSE(parse_recorder_mark("allocsim_recorder=1;memory_fraction.0=1.5")
                   ->of_device(0)
                   .memory_fraction);  // out of range: left out
}

}  // namespace
}  // namespace allocsim::pickle
