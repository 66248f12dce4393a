// SimulatedDevice: a GPU of any size, made of bookkeeping. Deterministic.
//
// Capacity model: cudaMemGetInfo's free = capacity - context (memory the process holds outside
// the allocator: CUDA context, cuBLAS workspaces) - what the allocator holds, where
// ordinary segments are counted in the driver's 2 MiB granularity.
// Address model: addresses recorded in a trace are handed out while the requests match them.
// Otherwise segments are placed as the CUDA driver was seen to place them in recorded traces
// (where segments were freed before, the driver's choice is not a function of the requests:
// docs/fidelity.md has the figures): the driver carves address space into regions of
// whole 32 MiB chunks, each new region directly below the lowest one so far, and serves a request
// from the lowest-addressed hole in an existing region before it opens a new region. Where
// segments were freed, a request that fits in the address range they left goes to the top of the
// highest such range (the highest of the freed ranges is where recorded GPT-2 and BERT jobs put
// theirs; not every job's driver does: docs/fidelity.md).
// Failures of chosen calls: FaultInjectingDevice over this one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/device.hpp"

namespace allocsim {

class SimulatedDevice final : public Device {
 public:
  SimulatedDevice(uint64_t capacity, uint64_t context_bytes);

  std::optional<uint64_t> malloc(uint64_t size) override;
  void free(uint64_t address, uint64_t size) override;
  std::optional<uint64_t> reserve_address(uint64_t size, uint64_t alignment) override;
  void release_address(uint64_t address, uint64_t size) override;
  bool map(uint64_t address, uint64_t size, uint64_t page_size) override;
  void unmap(uint64_t address, uint64_t size, uint64_t page_size) override;
  DeviceMemInfo mem_get_info() const override;

  // Addresses PyTorch got, in order: cudaMalloc results, and expandable reservation bases.
  void use_recorded_segments(std::vector<RecordedSegment> segments);
  void use_recorded_reservations(std::vector<uint64_t> bases);
  // For a trace still being decoded: `read_more` is called when the recorded addresses run out, to
  // add the next ones (add_recorded_*) from further in the trace; it returns false at its end.
  void read_recorded_with(std::function<bool()> read_more) { read_more_ = std::move(read_more); }
  void add_recorded_segment(RecordedSegment segment) { recorded_segments_.push_back(segment); }
  void add_recorded_reservation(uint64_t base) { recorded_reservations_.push_back(base); }
  // How many requests got a recorded address, and how many had to be placed by the model while
  // recorded ones were left (misses) or at all (placed_by_model).
  uint64_t recorded_hits() const { return recorded_hits_; }
  uint64_t recorded_misses() const { return recorded_misses_; }
  uint64_t placed_by_model() const { return placed_by_model_; }

  // While on, malloc and map succeed beyond the capacity: a history's first state is restored as
  // it was held, whatever this device holds.
  void set_overcommit(bool on) { overcommit_ = on; }
  bool overcommitted() const { return context_bytes_ + used_ > capacity_; }

  void set_context_bytes(uint64_t bytes) { context_bytes_ = bytes; }
  uint64_t context_bytes() const { return context_bytes_; }
  uint64_t capacity() const { return capacity_; }
  uint64_t used_bytes() const { return used_; }  // held by the allocator, in driver granularity
  uint64_t live_segments() const { return live_.size(); }
  uint64_t live_reservations() const { return reservations_.size(); }

 private:
  uint64_t free_bytes() const;
  bool overlaps_live(uint64_t address, uint64_t size) const;
  uint64_t place_segment(uint64_t size);
  std::optional<uint64_t> place_in_freed_range(uint64_t size) const;
  void note_region(uint64_t address, uint64_t size);
  void add_freed_range(uint64_t address, uint64_t size);
  void take_freed_range(uint64_t address, uint64_t size);
  void start_tracking_freed_ranges();
  uint64_t place_reservation(uint64_t size, uint64_t alignment);

  uint64_t capacity_;
  uint64_t context_bytes_;
  uint64_t used_ = 0;
  bool overcommit_ = false;
  std::map<uint64_t, uint64_t> live_;          // cudaMalloc'ed ranges: address -> size
  std::map<uint64_t, uint64_t> reservations_;  // reserved VA ranges: address -> size
  std::map<uint64_t, uint64_t> regions_;       // driver address regions: start -> end
  // The address ranges freed segments left, merged (start -> end), kept from the model's first
  // placement on; before it, only the ranges segments were given, from which it is made then (a
  // replay at recorded addresses pays a push per cudaMalloc, not a map's upkeep).
  std::map<uint64_t, uint64_t> freed_;
  bool tracking_freed_ = false;
  std::vector<std::pair<uint64_t, uint64_t>> ever_held_;  // address, size
  uint64_t next_reservation_address_;

  std::vector<RecordedSegment> recorded_segments_;
  size_t recorded_cursor_ = 0;
  std::vector<uint64_t> recorded_reservations_;
  size_t reservation_cursor_ = 0;
  std::function<bool()> read_more_;
  uint64_t recorded_hits_ = 0;
  uint64_t recorded_misses_ = 0;
  uint64_t placed_by_model_ = 0;
};

}  // namespace allocsim
