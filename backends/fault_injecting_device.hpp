// FaultInjectingDevice: an adaptor over any Device (simulated or real) whose chosen cudaMalloc or
// map calls fail, as a driver out of memory would, without reaching the device beneath; every
// other call passes through. It counts the calls, so tests can also see how many were made.
#pragma once

#include <cstdint>
#include <optional>
#include <set>

#include "core/device.hpp"

namespace allocsim {

class FaultInjectingDevice final : public Device {
 public:
  explicit FaultInjectingDevice(Device& upstream) : upstream_(upstream) {}

  void fail_malloc_call(uint64_t n) { failing_mallocs_.insert(n); }  // 1-based call number
  void fail_map_call(uint64_t n) { failing_maps_.insert(n); }
  uint64_t malloc_calls() const { return malloc_calls_; }
  uint64_t map_calls() const { return map_calls_; }
  uint64_t injected_failures() const { return injected_failures_; }

  std::optional<uint64_t> malloc(uint64_t size) override {
    if (failing_mallocs_.count(++malloc_calls_)) {
      ++injected_failures_;
      return std::nullopt;
    }
    return upstream_.malloc(size);
  }
  void free(uint64_t address, uint64_t size) override { upstream_.free(address, size); }
  std::optional<uint64_t> reserve_address(uint64_t size, uint64_t alignment) override {
    return upstream_.reserve_address(size, alignment);
  }
  void release_address(uint64_t address, uint64_t size) override {
    upstream_.release_address(address, size);
  }
  bool map(uint64_t address, uint64_t size, uint64_t page_size) override {
    if (failing_maps_.count(++map_calls_)) {
      ++injected_failures_;
      return false;
    }
    return upstream_.map(address, size, page_size);
  }
  void unmap(uint64_t address, uint64_t size, uint64_t page_size) override {
    upstream_.unmap(address, size, page_size);
  }
  DeviceMemInfo mem_get_info() const override { return upstream_.mem_get_info(); }

 private:
  Device& upstream_;
  std::set<uint64_t> failing_mallocs_, failing_maps_;
  uint64_t malloc_calls_ = 0, map_calls_ = 0, injected_failures_ = 0;
};

}  // namespace allocsim
