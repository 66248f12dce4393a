#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "backends/block_pattern.hpp"
#include "backends/cuda_device.hpp"

namespace allocsim {
namespace {

__device__ unsigned long long g_bad_words;
__device__ unsigned long long g_first_bad_tag;

constexpr int kThreads = 256;
constexpr uint64_t kMaxGrid = 4096;

__device__ __forceinline__ uint32_t tag_seed(uint64_t tag) {
  uint64_t x = tag + 0x9E3779B97F4A7C15ull;  // splitmix64's finaliser: nearby tags differ widely
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return static_cast<uint32_t>(x ^ (x >> 31));
}

// Word i of a block holds seed ^ i: a shifted copy of the right pattern fails too.
__global__ void fill_kernel(uint4* words, uint64_t count, uint64_t tag) {
  const uint32_t seed = tag_seed(tag);
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint32_t w = static_cast<uint32_t>(i * 4);
    words[i] = make_uint4(seed ^ w, seed ^ (w + 1), seed ^ (w + 2), seed ^ (w + 3));
  }
}

__global__ void check_kernel(const uint4* words, uint64_t count, uint64_t tag) {
  const uint32_t seed = tag_seed(tag);
  unsigned long long bad = 0;
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += uint64_t{gridDim.x} * blockDim.x) {
    const uint32_t w = static_cast<uint32_t>(i * 4);
    const uint4 v = words[i];
    bad += (v.x != (seed ^ w)) + (v.y != (seed ^ (w + 1))) + (v.z != (seed ^ (w + 2))) +
           (v.w != (seed ^ (w + 3)));
  }
  if (bad != 0) {
    atomicAdd(&g_bad_words, bad);
    atomicMin(&g_first_bad_tag, static_cast<unsigned long long>(tag));
  }
}

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    throw CudaError(std::string(what) + ": " + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ")");
  }
}

unsigned grid_for(uint64_t count) {
  return static_cast<unsigned>(std::clamp<uint64_t>((count + kThreads - 1) / kThreads, 1, kMaxGrid));
}

}  // namespace

BlockPattern::BlockPattern() {
  const unsigned long long zero = 0, none = UINT64_MAX;
  cudaError_t e = cudaMemcpyToSymbol(g_bad_words, &zero, sizeof zero);
  if (e == cudaSuccess) e = cudaMemcpyToSymbol(g_first_bad_tag, &none, sizeof none);
  if (e == cudaSuccess) {
    cudaFuncAttributes attributes{};
    e = cudaFuncGetAttributes(&attributes, fill_kernel);
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&attributes, check_kernel);
  }
  if (e != cudaSuccess) {
    throw CudaError(std::string("loading the pattern kernels: ") + cudaGetErrorName(e));
  }
}

// Blocks are multiples of 512 bytes at 512-byte aligned addresses: whole 16-byte words.
void BlockPattern::fill(uint64_t address, uint64_t size, uint64_t tag) {
  const uint64_t count = size / 16;
  if (count == 0) return;
  fill_kernel<<<grid_for(count), kThreads>>>(reinterpret_cast<uint4*>(address), count, tag);
  check_launch("launching the pattern fill kernel");
  ++counts_.fills;
  counts_.bytes_written += count * 16;
}

void BlockPattern::check(uint64_t address, uint64_t size, uint64_t tag) {
  const uint64_t count = size / 16;
  if (count == 0) return;
  check_kernel<<<grid_for(count), kThreads>>>(reinterpret_cast<const uint4*>(address), count, tag);
  check_launch("launching the pattern check kernel");
  ++counts_.checks;
}

PatternResult BlockPattern::collect() {
  cudaError_t e = cudaDeviceSynchronize();
  unsigned long long bad = 0, first = 0;
  if (e == cudaSuccess) e = cudaMemcpyFromSymbol(&bad, g_bad_words, sizeof bad);
  if (e == cudaSuccess) e = cudaMemcpyFromSymbol(&first, g_first_bad_tag, sizeof first);
  if (e != cudaSuccess) {
    throw CudaError(std::string("the pattern kernels failed: ") + cudaGetErrorName(e) + " (" +
                    cudaGetErrorString(e) + ")");
  }
  counts_.bad_words = bad;
  counts_.first_bad_tag = first;
  return counts_;
}

}  // namespace allocsim
