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
#include "sim/plan/device_call_times.hpp"
#include "sim/replay/replay.hpp"
#include "sim/trace/trace.hpp"

namespace allocsim {

struct PlanOptions {
  std::vector<AllocConf> settings;  // empty: the recorded setting and a useful set beside it
  // The PyTorch release whose allocator every replay follows (nullopt: the trace's, else 2.11).
  std::optional<TorchVersion> torch_version;
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
  // What each device call costs (nullptr: the shipped table, measured on an H100).
  const DeviceCallTimes* call_times = nullptr;
  std::function<void(size_t done, size_t total)> progress;
};

// The device calls of one run and their estimated time: the run under the cap answered for (the
// card less the context, or the limit), or under the setting's min limit where that is larger
// (a run that does not fit would stop at its OOM).
struct DeviceCallCost {
  uint64_t cap_bytes = 0;
  int64_t allocs = 0;  // cudaMalloc
  int64_t frees = 0;   // cudaFree
  int64_t maps = 0;    // an expandable segment's pages mapped, and unmapped
  int64_t unmaps = 0;
  double seconds = 0;  // estimated from DeviceCallTimes
  [[nodiscard]] int64_t calls() const { return allocs + frees + maps + unmaps; }
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
  DeviceCallCost calls;
};

// One of a plan's remedies: a setting (plans[setting]), or the first setting with
// torch.cuda.empty_cache() before every step (empty_cache_every_step).
struct Remedy {
  enum class Kind { kSetting, kEmptyCacheEveryStep };
  Kind kind = Kind::kSetting;
  size_t setting = 0;  // for kSetting
  bool operator==(const Remedy&) const = default;
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
  std::string call_times_device;  // the GPU the device call times were measured on
  // The PyTorch release the replays followed, where given or told by the trace (else 2.11).
  std::optional<TorchVersion> torch_version;
  // The remedy that fits at the least estimated device-call time. None when nothing fits.
  std::optional<Remedy> cheapest;
};

// The plan of `remedy` in `result`.
const Plan& remedy_plan(const PlanResult& result, const Remedy& remedy);

// The settings tried by default: the recorded one, expandable segments, max_split_size_mb at
// 128, 256 and 512, and garbage collection at 0.8 (active here, since plan sets a cap).
std::vector<AllocConf> default_plan_settings(const Trace& trace);

[[nodiscard]] PlanResult plan(const Trace& trace, const PlanOptions& options);
nlohmann::json plan_json(const PlanResult& result);
std::string plan_text(const PlanResult& result);
// One row of the table, its JSON and the header (first column `label`), for tables of other
// remedies.
nlohmann::json plan_row_json(const Plan& p);
std::string plan_table_header(const std::string& label, bool under_limit);
std::string plan_table_row(const std::string& label, const Plan& p, const std::string& marks);

}  // namespace allocsim
