// Capacity planning: for each allocator setting, the smallest memory limit under which a trace
// runs without an OOM, found by search over replays.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/alloc_conf.hpp"
#include "sim/replay/replay.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

struct PlanOptions {
  std::vector<AllocConf> settings;  // empty: the recorded setting and a useful set beside it
  uint64_t card_bytes = kDefaultCapacityBytes;  // the device to answer for
  uint64_t context_bytes = kDefaultContextBytes;
  // A cap on reserved memory to answer for instead of the card (as
  // set_per_process_memory_fraction sets it): a setting fits when its min limit is within it.
  std::optional<uint64_t> limit_bytes;
  uint64_t granularity = uint64_t{2} << 20;  // the search stops at this resolution
  // A what-if: torch.cuda.empty_cache() before each of these trace events (ascending), in every
  // replay (ReplayOptions::empty_cache_before).
  std::vector<uint64_t> empty_cache_before;
  // Where each training step after the first begins (the trace's step structure), if known and no
  // what-if's calls are given: the plan then adds the remedy of calling torch.cuda.empty_cache()
  // there, under the first setting.
  std::vector<uint64_t> step_starts;
  std::function<void(size_t done, size_t total)> progress;
};

struct Plan {
  AllocConf conf;
  uint64_t min_limit_bytes = 0;  // the smallest cap (bytes the allocator may reserve) with no OOM
  uint64_t peak_allocated_bytes = 0;  // at that cap
  uint64_t peak_reserved_bytes = 0;
  double fragmentation = 0;  // 1 - peak active / peak reserved, at that cap
  uint64_t unconstrained_peak_reserved_bytes = 0;
  int replays = 0;
  bool fits = false;  // min limit + context <= card, or min limit <= the limit given
  int64_t margin_bytes = 0;
  int64_t device_allocs = 0;  // cudaMalloc calls (or maps) of the run with no cap
};

struct PlanResult {
  std::vector<Plan> plans;
  uint64_t card_bytes = 0;
  uint64_t context_bytes = 0;
  std::optional<uint64_t> limit_bytes;
  size_t best = 0;                           // index of the setting with the smallest limit
  std::vector<uint64_t> empty_cache_before;  // the what-if's calls, as planned with
  // The first setting with torch.cuda.empty_cache() before every step (PlanOptions::step_starts),
  // and the calls that adds.
  std::optional<Plan> empty_cache_every_step;
  uint64_t empty_cache_calls = 0;
};

// The settings tried by default: the recorded one, expandable segments, max_split_size_mb at
// 128, 256 and 512, and garbage collection at 0.8 (active here, since plan sets a cap).
std::vector<AllocConf> default_plan_settings(const Trace& trace);

[[nodiscard]] PlanResult plan(const Trace& trace, const PlanOptions& options);
nlohmann::json plan_json(const PlanResult& result);
std::string plan_text(const PlanResult& result);

}  // namespace allocsim
