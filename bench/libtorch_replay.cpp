// The same request stream through PyTorch's own CUDA caching allocator (libtorch's C++ API, real
// GPU memory) and through allocsim's core on a simulated device, timing only the allocator calls.
//
// usage: libtorch_replay TRACE.atrace [REPEATS]   (allocsim convert makes the .atrace)
// Prints one JSON object. A cold pass starts with an empty cache (every cudaMalloc is paid);
// a warm pass replays the stream again on the cache the cold pass left. Best of REPEATS.
// Built on the GPU machine against the torch that is installed there: tools/gpu/bench_libtorch.sh.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "backends/simulated_device.hpp"
#include "core/caching_allocator.hpp"
#include "sim/trace/compact_trace.hpp"
#include "sim/trace/input_error.hpp"

namespace {

using namespace allocsim;
using Clock = std::chrono::steady_clock;

struct Request {
  bool alloc;
  uint32_t slot;
  uint32_t stream;  // index into the streams
  uint64_t size;
};

struct Stream {
  std::vector<Request> requests;
  std::vector<StreamId> stream_ids;
  uint32_t slots = 0;
  uint64_t events = 0;
};

// Allocations and the requests to free them, with each block numbered (its slot), so that the
// timed loops index arrays instead of looking up addresses.
Stream compile(const Trace& trace) {
  Stream s;
  s.events = trace.events.size();
  std::map<uint64_t, uint32_t> live;
  std::map<StreamId, uint32_t> streams;
  for (const TraceEvent& e : trace.events) {
    if (e.action == TraceAction::kAlloc) {
      const auto [it, fresh] = streams.emplace(e.stream, static_cast<uint32_t>(streams.size()));
      if (fresh) s.stream_ids.push_back(e.stream);
      live[e.addr] = s.slots;
      s.requests.push_back({true, s.slots++, it->second, e.size});
    } else if (e.action == TraceAction::kFreeRequested) {
      const auto it = live.find(e.addr);
      if (it == live.end()) continue;  // allocated before the history began
      s.requests.push_back({false, it->second, 0, 0});
      live.erase(it);
    }
  }
  return s;
}

double pytorch_pass(const Stream& s, const std::vector<cudaStream_t>& streams,
                    std::vector<void*>& ptrs, uint64_t& ooms) {
  namespace alloc = c10::cuda::CUDACachingAllocator;
  const auto start = Clock::now();
  for (const Request& r : s.requests) {
    if (r.alloc) {
      try {
        ptrs[r.slot] = alloc::raw_alloc_with_stream(r.size, streams[r.stream]);
      } catch (const c10::OutOfMemoryError&) {
        ptrs[r.slot] = nullptr;
        ++ooms;
      }
    } else if (ptrs[r.slot] != nullptr) {
      alloc::raw_delete(ptrs[r.slot]);
      ptrs[r.slot] = nullptr;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (void*& p : ptrs) {  // blocks the trace never freed
    if (p != nullptr) alloc::raw_delete(p);
    p = nullptr;
  }
  return seconds;
}

double allocsim_pass(const Stream& s, const std::vector<StreamId>& streams, CachingAllocator& a,
                     std::vector<BlockId>& blocks) {
  const auto start = Clock::now();
  for (const Request& r : s.requests) {
    if (r.alloc) {
      blocks[r.slot] = a.malloc(r.size, streams[r.stream]);
    } else if (blocks[r.slot] != kNoBlock) {
      a.free(blocks[r.slot]);
      blocks[r.slot] = kNoBlock;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (BlockId& b : blocks) {
    if (b != kNoBlock) a.free(b);
    b = kNoBlock;
  }
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TRACE.atrace [REPEATS]\n", argv[0]);
    return 2;
  }
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  Trace trace;
  try {
    std::ifstream in(argv[1], std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    if (!in) throw InputError(std::string(argv[1]) + ": cannot read the trace");
    trace = read_compact_trace(bytes.str(), argv[1]);
  } catch (const InputError& e) {
    std::fprintf(stderr, "libtorch_replay: error: %s\n", e.what());
    return 2;
  }
  const Stream s = compile(trace);

  namespace alloc = c10::cuda::CUDACachingAllocator;
  c10::cuda::set_device(0);
  alloc::init(c10::cuda::device_count());
  std::vector<cudaStream_t> streams;
  for (StreamId id : s.stream_ids) {
    cudaStream_t stream = nullptr;
    if (id != 0) cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    streams.push_back(stream);
  }
  std::vector<void*> ptrs(s.slots, nullptr);
  std::vector<BlockId> blocks(s.slots, kNoBlock);
  double torch_cold = 1e30, torch_warm = 1e30, sim_cold = 1e30, sim_warm = 1e30;
  uint64_t ooms = 0;
  AllocatorOptions options;
  options.conf = trace.settings.value_or(AllocConf{});
  options.record_device_ops = false;
  for (int i = 0; i < repeats; ++i) {
    alloc::emptyCache();
    torch_cold = std::min(torch_cold, pytorch_pass(s, streams, ptrs, ooms));
    torch_warm = std::min(torch_warm, pytorch_pass(s, streams, ptrs, ooms));
    SimulatedDevice device(uint64_t{1} << 40, 0);
    CachingAllocator a(device, options);
    sim_cold = std::min(sim_cold, allocsim_pass(s, s.stream_ids, a, blocks));
    sim_warm = std::min(sim_warm, allocsim_pass(s, s.stream_ids, a, blocks));
  }
  alloc::emptyCache();
  const double n = static_cast<double>(s.events);
  std::printf(
      "{\"trace\": \"%s\", \"events\": %llu, \"requests\": %zu, \"ooms\": %llu, \"repeats\": %d,\n"
      " \"pytorch\": {\"cold_s\": %.6f, \"warm_s\": %.6f, \"cold_events_per_s\": %.0f, "
      "\"warm_events_per_s\": %.0f},\n"
      " \"allocsim\": {\"cold_s\": %.6f, \"warm_s\": %.6f, \"cold_events_per_s\": %.0f, "
      "\"warm_events_per_s\": %.0f}}\n",
      argv[1], static_cast<unsigned long long>(s.events), s.requests.size(),
      static_cast<unsigned long long>(ooms), repeats, torch_cold, torch_warm, n / torch_cold,
      n / torch_warm, sim_cold, sim_warm, n / sim_cold, n / sim_warm);
  return 0;
}
