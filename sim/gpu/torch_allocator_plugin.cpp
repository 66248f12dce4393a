// liballocsim_torch.so: allocsim's allocator core on a real GPU inside a live PyTorch job, through
// torch.cuda.memory.CUDAPluggableAllocator(path, "allocsim_malloc", "allocsim_free").
// tools/allocsim_torch.py installs it and calls the other exports through ctypes.
//
// PYTORCH_CUDA_ALLOC_CONF is read at the first allocation, as PyTorch reads it. Every request and
// segment operation is recorded as a trace, which allocsim_save_trace writes in allocsim's compact
// format (allocsim replay reads it). One device per process. The pluggable interface has no
// record_stream: a block is reused as soon as it is freed, on its own stream.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "backends/cuda_device.hpp"
#include "core/caching_allocator.hpp"
#include "sim/trace/compact_trace.hpp"

namespace {

using namespace allocsim;

struct PluginState {
  explicit PluginState(int ordinal, AllocConf conf) : device(ordinal), conf(conf) {
    AllocatorOptions options;
    options.conf = conf;
    allocator.emplace(device, options);
    trace.settings = conf;
  }
  CudaDevice device;
  AllocConf conf;
  std::optional<CachingAllocator> allocator;
  std::map<uint64_t, BlockId> live;  // address -> block
  Trace trace;
  size_t ops_recorded = 0;
  uint64_t ooms = 0;

  // The segment operations the last call made, as PyTorch's trace records them.
  void record_device_ops() {
    static constexpr TraceAction kAction[] = {TraceAction::kSegmentAlloc, TraceAction::kSegmentFree,
                                              TraceAction::kSegmentMap, TraceAction::kSegmentUnmap};
    const auto& ops = allocator->device_ops();
    for (; ops_recorded < ops.size(); ++ops_recorded) {
      const DeviceOp& op = ops[ops_recorded];
      trace.events.push_back({.action = kAction[static_cast<int>(op.kind)],
                              .addr = op.address,
                              .size = op.size,
                              .stream = op.stream});
    }
  }
};

std::mutex g_mutex;
std::optional<PluginState> g_state;
int g_device = -1;
std::string g_last_json;

PluginState* state_for(int device) {
  if (g_state) {
    if (device == g_device) return &*g_state;
    std::fprintf(stderr, "allocsim: one device per process: asked for device %d after device %d\n",
                 device, g_device);
    return nullptr;
  }
  AllocConf conf;
  if (const char* env = std::getenv("PYTORCH_CUDA_ALLOC_CONF")) {
    try {
      conf = parse_alloc_conf(env);
    } catch (const AllocConfError& e) {
      std::fprintf(stderr, "allocsim: PYTORCH_CUDA_ALLOC_CONF='%s': %s\n", env, e.what());
      return nullptr;
    }
  }
  try {
    g_state.emplace(device, conf);
  } catch (const CudaError& e) {
    std::fprintf(stderr, "allocsim: %s\n", e.what());
    return nullptr;
  }
  g_device = device;
  return &*g_state;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* allocsim_malloc(size_t size, int device,
                                                             cudaStream_t stream) {
  if (size == 0) return nullptr;
  std::lock_guard lock(g_mutex);
  PluginState* s = state_for(device);
  if (s == nullptr) return nullptr;
  const auto stream_id = static_cast<StreamId>(reinterpret_cast<uintptr_t>(stream));
  try {
    const BlockId b = s->allocator->malloc(size, stream_id);
    s->record_device_ops();
    if (b == kNoBlock) {
      ++s->ooms;
      const OutOfMemory& oom = *s->allocator->last_oom();
      s->trace.events.push_back({.action = TraceAction::kOom,
                                 .size = oom.rounded,
                                 .stream = stream_id,
                                 .device_free = oom.device_free});
      std::fprintf(stderr, "allocsim: %s\n",
                   oom.message(oom.device_total - oom.device_free).c_str());
      return nullptr;
    }
    const uint64_t address = s->allocator->block_address(b);
    s->live.emplace(address, b);
    s->trace.events.push_back(
        {.action = TraceAction::kAlloc, .addr = address, .size = size, .stream = stream_id});
    return reinterpret_cast<void*>(address);
  } catch (const CudaError& e) {
    std::fprintf(stderr, "allocsim: %s\n", e.what());
    return nullptr;
  }
}

__attribute__((visibility("default"))) void allocsim_free(void* ptr, size_t size, int device,
                                                          cudaStream_t stream) {
  if (ptr == nullptr) return;
  std::lock_guard lock(g_mutex);
  PluginState* s = state_for(device);
  if (s == nullptr) return;
  const auto address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr));
  const auto it = s->live.find(address);
  if (it == s->live.end()) {
    std::fprintf(stderr, "allocsim: free of %p, which allocsim did not allocate\n", ptr);
    return;
  }
  const auto stream_id = static_cast<StreamId>(reinterpret_cast<uintptr_t>(stream));
  s->trace.events.push_back(
      {.action = TraceAction::kFreeRequested, .addr = address, .size = size, .stream = stream_id});
  s->trace.events.push_back(
      {.action = TraceAction::kFreeCompleted, .addr = address, .size = size, .stream = stream_id});
  try {
    s->allocator->free(it->second);
    s->live.erase(it);
    s->record_device_ops();
  } catch (const CudaError& e) {
    std::fprintf(stderr, "allocsim: %s\n", e.what());
  }
}

// torch.cuda.empty_cache() does not reach a pluggable allocator: call this instead.
__attribute__((visibility("default"))) void allocsim_empty_cache() {
  std::lock_guard lock(g_mutex);
  if (!g_state) return;
  g_state->allocator->empty_cache();
  g_state->record_device_ops();
}

// Writes the trace so far; returns 0, or -1 (with a line on stderr) if it could not.
__attribute__((visibility("default"))) int allocsim_save_trace(const char* path) {
  std::lock_guard lock(g_mutex);
  Trace empty;
  const Trace& trace = g_state ? g_state->trace : empty;
  std::ofstream out(path, std::ios::binary);
  out << write_compact_trace(trace);
  if (!out) {
    std::fprintf(stderr, "allocsim: %s: cannot write the trace\n", path);
    return -1;
  }
  return 0;
}

// The allocator's statistics (PyTorch's memory_stats() keys) and counts, as JSON text; valid until
// the next call.
__attribute__((visibility("default"))) const char* allocsim_stats_json() {
  std::lock_guard lock(g_mutex);
  nlohmann::json j = nlohmann::json::object();
  if (g_state) {
    const DeviceStats& stats = g_state->allocator->stats();
    nlohmann::json flat = nlohmann::json::object();
    for (const auto& [key, value] : stats.flatten()) flat[key] = value;
    j["memory_stats"] = flat;
    j["device_ops"] = g_state->allocator->device_ops().size();
    j["events"] = g_state->trace.events.size();
    j["ooms"] = g_state->ooms;
    j["alloc_conf"] = g_state->conf.to_string();
    j["device"] = g_state->device.info().name;
  }
  g_last_json = j.dump();
  return g_last_json.c_str();
}

}  // extern "C"
