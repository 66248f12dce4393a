// Benchmarks: the core's fast and slow paths, snapshot parsing, whole-trace replay (from decoded
// events, and from the file with and without the replay alongside the decoding), plan, and the
// timeline page.
// Run: build/allocsim_bench --benchmark_format=json (counters: events/s, bytes/s).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "backends/simulated_device.hpp"
#include "core/caching_allocator.hpp"
#include "sim/diff/run_diff.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/sweep_plan.hpp"
#include "sim/predict/size_sweep.hpp"
#include "sim/replay/prepared_trace.hpp"
#include "sim/replay/replay.hpp"
#include "sim/replay/streamed_replay.hpp"
#include "sim/report/timeline_html.hpp"
#include "sim/report/timeline_moments.hpp"
#include "sim/trace/file_bytes.hpp"
#include "sim/trace/snapshot_reader.hpp"
#include "sim/trace/trace_file.hpp"

namespace allocsim {
namespace {

constexpr uint64_t MiB = 1 << 20;

// The shipped workloads: where the benchmarks were built, or $ALLOCSIM_WORKLOADS_DIR (a binary run
// on another machine).
std::string workloads_dir() {
  const char* dir = std::getenv("ALLOCSIM_WORKLOADS_DIR");
  return dir ? dir : ALLOCSIM_WORKLOADS_DIR;
}

std::string workload(const std::string& name) {
  return workloads_dir() + "/" + name + ".pickle.gz";
}

// malloc + free of one size, over and over: the cached block is found and returned each time.
void BM_MallocFreeCacheHit(benchmark::State& state) {
  SimulatedDevice device(uint64_t{80} << 30, 0);
  CachingAllocator a(device, AllocatorOptions{});
  const uint64_t size = static_cast<uint64_t>(state.range(0));
  a.free(a.malloc(size, 0));
  for (auto _ : state) {
    const BlockId b = a.malloc(size, 0);
    benchmark::DoNotOptimize(b);
    a.free(b);
  }
  state.counters["ops/s"] =
      benchmark::Counter(2.0 * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MallocFreeCacheHit)->Arg(4096)->Arg(5 * MiB)->Arg(64 * MiB);

// Many live blocks of mixed sizes: best fit in a populated pool, splits and merges.
void BM_MallocFreeSplitMerge(benchmark::State& state) {
  SimulatedDevice device(uint64_t{80} << 30, 0);
  CachingAllocator a(device, AllocatorOptions{});
  const auto live = static_cast<size_t>(state.range(0));
  std::vector<BlockId> blocks;
  uint64_t x = 12345;
  auto next_size = [&x] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return 512 + (x >> 33) % (8 * MiB);
  };
  for (size_t i = 0; i < live; ++i) blocks.push_back(a.malloc(next_size(), 0));
  size_t i = 0;
  for (auto _ : state) {
    a.free(blocks[i]);
    blocks[i] = a.malloc(next_size(), 0);
    i = (i + 7) % live;
  }
  state.counters["ops/s"] =
      benchmark::Counter(2.0 * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MallocFreeSplitMerge)->Arg(100)->Arg(1000)->Arg(10000);

// A new segment every time: cudaMalloc, then empty_cache releases it.
void BM_NewSegmentAndRelease(benchmark::State& state) {
  SimulatedDevice device(uint64_t{80} << 30, 0);
  AllocatorOptions options;
  options.conf.expandable_segments = state.range(0) != 0;
  options.record_device_ops = false;
  CachingAllocator a(device, options);
  for (auto _ : state) {
    a.free(a.malloc(30 * MiB, 0));
    a.empty_cache();
  }
}
BENCHMARK(BM_NewSegmentAndRelease)->ArgName("expandable")->Arg(0)->Arg(1);

// Inflate and decode a snapshot file, and decode an already inflated one.
void BM_ReadSnapshotFile(benchmark::State& state, const std::string& name) {
  const std::string path = workload(name);
  const uint64_t inflated = read_file_bytes(path).size();
  for (auto _ : state) benchmark::DoNotOptimize(read_snapshot_file(path));
  state.counters["pickle_bytes/s"] = benchmark::Counter(
      static_cast<double>(inflated * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_ReadSnapshotFile, resnet50, std::string("resnet50_default"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ReadSnapshotFile, gpt2gen, std::string("gpt2gen_default"))
    ->Unit(benchmark::kMillisecond);

void BM_DecodeSnapshot(benchmark::State& state, const std::string& name) {
  const FileBytes bytes = read_file_bytes(workload(name));
  for (auto _ : state) benchmark::DoNotOptimize(read_snapshot_bytes(bytes, name));
  state.counters["pickle_bytes/s"] = benchmark::Counter(
      static_cast<double>(bytes.size() * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_DecodeSnapshot, gpt2gen, std::string("gpt2gen_default"))
    ->Unit(benchmark::kMillisecond);

// What `allocsim replay FILE` does between starting and reporting: read the file and replay it,
// one after the other (streamed:0) or with the replay alongside the decoding (streamed:1).
void BM_ReadAndReplay(benchmark::State& state, const std::string& name) {
  const std::string path = workload(name);
  const bool streamed = state.range(0) != 0;
  uint64_t events = 0;
  for (auto _ : state) {
    if (streamed) {
      StreamedReplay replay(ReplayOptions{}, path);
      const Trace trace = read_trace_file(path, &replay.feed());
      benchmark::DoNotOptimize(replay.finish(trace));
      if (!replay.streamed()) state.SkipWithError("the streamed replay fell back");
      events = trace.events.size();
    } else {
      const Trace trace = read_trace_file(path);
      benchmark::DoNotOptimize(replay(trace, ReplayOptions{}));
      events = trace.events.size();
    }
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events * state.iterations()),
                                                  benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_ReadAndReplay, gpt2gen, std::string("gpt2gen_default"))
    ->ArgName("streamed")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// What `allocsim diff A B` does between starting and reporting, for two 756,000-event snapshots
// (the same file twice): each file read and replayed beside the other, the requests paired, the
// difference grouped, placed and split. Against two BM_ReadAndReplay runs: replaying both.
void BM_ReadAndDiff(benchmark::State& state, const std::string& name) {
  const std::string path = workload(name);
  struct Run {
    Trace trace;
    DiffSide side;
  };
  const auto prepare = [&] {
    Run run{read_trace_file(path), {}};
    run.side = prepare_diff_side(run.trace);
    return run;
  };
  for (auto _ : state) {
    auto b = std::async(std::launch::async, prepare);
    const Run a = prepare();
    const Run rb = b.get();
    benchmark::DoNotOptimize(diff_runs(a.trace, a.side, rb.trace, rb.side));
  }
}
BENCHMARK_CAPTURE(BM_ReadAndDiff, gpt2gen, std::string("gpt2gen_default"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Replay of decoded events, whole trace or its first half (cost against trace length); or of the
// trace prepared for many replays (what plan's searches run), its requests worked out once outside
// the timing, so that what is timed is the allocator core and the engine's bookkeeping.
void replay_benchmark(benchmark::State& state, const std::string& name, bool prepared) {
  Trace trace = read_snapshot_file(workload(name));
  trace.events.resize(trace.events.size() * static_cast<size_t>(state.range(0)) / 100);
  ReplayOptions options;
  options.capacity = uint64_t{150109880320};
  options.record_device_ops = false;
  if (prepared) {
    const PreparedTrace requests(trace, options.capacity);
    for (auto _ : state) benchmark::DoNotOptimize(replay(requests, options));
  } else {
    for (auto _ : state) benchmark::DoNotOptimize(replay(trace, options));
  }
  state.counters["events/s"] = benchmark::Counter(
      static_cast<double>(trace.events.size() * state.iterations()), benchmark::Counter::kIsRate);
}
void BM_Replay(benchmark::State& state, const std::string& name) {
  replay_benchmark(state, name, false);
}
void BM_ReplayPrepared(benchmark::State& state, const std::string& name) {
  replay_benchmark(state, name, true);
}
BENCHMARK_CAPTURE(BM_Replay, gpt2gen, std::string("gpt2gen_default"))
    ->ArgName("percent")
    ->Arg(50)
    ->Arg(100)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, llama_varlen, std::string("llama-varlen-bf16_default"))
    ->ArgName("percent")
    ->Arg(50)
    ->Arg(100)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Replay, gpt2, std::string("gpt2_default"))
    ->ArgName("percent")
    ->Arg(100)
    ->Unit(benchmark::kMillisecond);

BENCHMARK_CAPTURE(BM_ReplayPrepared, gpt2gen, std::string("gpt2gen_default"))
    ->ArgName("percent")
    ->Arg(50)
    ->Arg(100)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ReplayPrepared, llama_varlen, std::string("llama-varlen-bf16_default"))
    ->ArgName("percent")
    ->Arg(50)
    ->Arg(100)
    ->Unit(benchmark::kMillisecond);

// plan on llama-varlen: the recorded setting and five others.
void BM_Plan(benchmark::State& state) {
  const Trace trace = read_snapshot_file(workload("llama-varlen-bf16_default"));
  for (auto _ : state) benchmark::DoNotOptimize(plan(trace, PlanOptions{}));
}
BENCHMARK(BM_Plan)->Unit(benchmark::kMillisecond);

// plan --at on the Llama length sweep (three recordings of about 12,000 events): the recordings
// aligned and modelled, then the largest length that fits under 20 GB for the recorded setting
// and five others. Counter: the values tried.
void BM_PlanSweep(benchmark::State& state) {
  std::vector<Trace> traces;
  for (int v : {256, 512, 1024}) {
    traces.push_back(read_snapshot_file(workloads_dir() + "/sweeps/llama-bf16_seq-" +
                                        std::to_string(v) + ".pickle.gz"));
  }
  size_t tried = 0;
  for (auto _ : state) {
    const SizeSweep sweep({&traces[0], &traces[1], &traces[2]}, {256, 512, 1024});
    PlanOptions options;
    options.limit_bytes = 20'000'000'000;
    const SweepPlanResult r = plan_sweep(sweep, options, 65536);
    tried = 0;
    for (const SweepPlan& p : r.plans) tried += p.tried.size();
    benchmark::DoNotOptimize(r);
  }
  state.counters["values_tried"] = static_cast<double>(tried);
}
BENCHMARK(BM_PlanSweep)->Unit(benchmark::kMillisecond);

// predict on GPT-2's batch sweep (1, 2 and 4, about 10,000 events each): the recordings aligned
// and modelled, the reductions' staging shapes found by PyTorch's rule, and the trace at 16
// written. Counter: the staging buffers the rule sizes.
void BM_PredictSweep(benchmark::State& state) {
  std::vector<Trace> traces;
  for (int v : {1, 2, 4}) {
    traces.push_back(read_snapshot_file(workloads_dir() + "/sweeps/gpt2_batch-" +
                                        std::to_string(v) + ".pickle.gz"));
  }
  size_t staged = 0;
  for (auto _ : state) {
    const SizeSweep sweep({&traces[0], &traces[1], &traces[2]}, {1, 2, 4});
    staged = sweep.summary().models[static_cast<size_t>(SizeModel::kReductionStaging)];
    benchmark::DoNotOptimize(sweep.predict(16));
  }
  state.counters["staging_buffers"] = static_cast<double>(staged);
}
BENCHMARK(BM_PredictSweep)->Unit(benchmark::kMillisecond);

// The timeline page of a decoded trace, as `replay --timeline-out F.html` writes it: the replay
// with its timeline, the moments picked, the replay again keeping their segment maps, the page.
// Counters: the page's bytes, and the events per second of the whole.
void BM_TimelinePage(benchmark::State& state, const std::string& name) {
  const Trace trace = read_snapshot_file(workload(name));
  size_t bytes = 0;
  for (auto _ : state) {
    ReplayOptions options;
    options.record_timeline = true;
    const ReplayResult first = replay(trace, options);
    TimelineRun run{"bench", &first, &trace, timeline_moments(first, 16, {})};
    options.segment_maps_at = moment_events(run.moments);
    const ReplayResult kept = replay(trace, options);
    run.result = &kept;
    bytes = timeline_html({run}).size();
    benchmark::DoNotOptimize(bytes);
  }
  state.counters["page_bytes"] = static_cast<double>(bytes);
  state.counters["events/s"] = benchmark::Counter(
      static_cast<double>(trace.events.size() * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_TimelinePage, gpt2gen, std::string("gpt2gen_default"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TimelinePage, llama_varlen, std::string("llama-varlen-bf16_default"))
    ->Unit(benchmark::kMillisecond);

// Every shipped workload, whole, as recorded (registered in main from the workloads folder).
void BM_ReplayWorkload(benchmark::State& state, const Trace& trace) {
  ReplayOptions options;
  options.capacity = uint64_t{150109880320};
  for (auto _ : state) benchmark::DoNotOptimize(replay(trace, options));
  state.counters["events/s"] = benchmark::Counter(
      static_cast<double>(trace.events.size() * state.iterations()), benchmark::Counter::kIsRate);
}

}  // namespace
}  // namespace allocsim

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(allocsim::workloads_dir())) {
    const std::string file = entry.path().filename().string();
    const std::string suffix = ".pickle.gz";
    if (file.size() > suffix.size() && file.ends_with(suffix))
      names.push_back(file.substr(0, file.size() - suffix.size()));
  }
  std::sort(names.begin(), names.end());
  // Decoded once, up front: the benchmark times the replay alone.
  static std::vector<allocsim::Trace> traces;
  traces.reserve(names.size());
  for (const std::string& name : names) {
    traces.push_back(allocsim::read_snapshot_file(allocsim::workload(name)));
    benchmark::RegisterBenchmark(("BM_ReplayWorkload/" + name).c_str(), allocsim::BM_ReplayWorkload,
                                 std::cref(traces.back()))
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
