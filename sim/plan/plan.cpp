#include "sim/plan/plan.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>

#include "core/format_size.hpp"
#include "sim/replay/prepared_trace.hpp"

namespace allocsim {
namespace {

struct Trial {
  bool ok;
  uint64_t peak_allocated, peak_reserved;
  double fragmentation;
};

constexpr uint64_t kPlanCapacity = uint64_t{1} << 50;  // the cap, not the device, is searched

// A replay of the search: the setting under a cap (none: unconstrained) on a device it never fills.
ReplayOptions capped_replay(const AllocConf& conf, std::optional<uint64_t> limit,
                            const std::vector<uint64_t>& empty_cache_before,
                            std::optional<TorchVersion> torch_version) {
  ReplayOptions o;
  o.torch_version = torch_version;
  o.empty_cache_before = empty_cache_before;
  o.alloc_conf = conf;
  o.capacity = kPlanCapacity;
  o.context_bytes = 0;
  o.memory_limit = limit;
  o.replace_recorded_caps = true;  // the limit is the whole job's, not only where it starts
  return o;
}

Trial try_limit(const PreparedTrace& trace, const AllocConf& conf, std::optional<uint64_t> limit,
                const std::vector<uint64_t>& empty_cache_before,
                std::optional<TorchVersion> torch_version) {
  ReplayOptions o = capped_replay(conf, limit, empty_cache_before, torch_version);
  o.record_device_ops = false;
  const ReplayResult r = replay(trace, o);
  // Fits only without any OOM: where the job catches OOMs (cuDNN's algorithm search), what it
  // does at another cap is not the recording's, so such a cap is not counted as fitting (an upper
  // bound on the smallest cap).
  return {r.outcome.ooms == 0, static_cast<uint64_t>(r.stats.allocated_bytes[kAggregate].peak),
          static_cast<uint64_t>(r.stats.reserved_bytes[kAggregate].peak), r.fragmentation.gmlake};
}

DeviceCallCost device_call_cost(const PreparedTrace& trace, const AllocConf& conf, uint64_t cap,
                                const std::vector<uint64_t>& empty_cache_before,
                                std::optional<TorchVersion> torch_version,
                                const DeviceCallTimes& times) {
  const ReplayResult r = replay(trace, capped_replay(conf, cap, empty_cache_before, torch_version));
  DeviceCallCost cost;
  cost.cap_bytes = cap;
  for (const DeviceOp& op : r.device_ops) {
    switch (op.kind) {
      case DeviceOpKind::kSegmentAlloc:
        ++cost.allocs;
        break;
      case DeviceOpKind::kSegmentFree:
        ++cost.frees;
        break;
      case DeviceOpKind::kSegmentMap:
        ++cost.maps;
        break;
      case DeviceOpKind::kSegmentUnmap:
        ++cost.unmaps;
        break;
    }
  }
  cost.seconds = times.seconds(r.device_ops);
  return cost;
}

}  // namespace

std::vector<AllocConf> default_plan_settings(const Trace& trace) {
  const AllocConf recorded = trace.settings.value_or(AllocConf{});
  std::vector<AllocConf> out{recorded};
  auto add = [&](const std::string& text) {
    const AllocConf c = parse_alloc_conf(text);
    for (const AllocConf& have : out) {
      if (have.same_policy(c)) return;
    }
    out.push_back(c);
  };
  for (const char* text :
       {"expandable_segments:True", "max_split_size_mb:128", "max_split_size_mb:256",
        "max_split_size_mb:512", "garbage_collection_threshold:0.8"}) {
    add(text);
  }
  return out;
}

namespace {

// The search for one setting: widen until a cap works, then bisect to the granularity.
Plan plan_one(const PreparedTrace& trace, const AllocConf& conf, const PlanOptions& options,
              const std::vector<uint64_t>& empty_cache_before) {
  const uint64_t g = options.granularity;
  Plan p;
  p.conf = conf;
  const Trial free_run =
      try_limit(trace, p.conf, std::nullopt, empty_cache_before, options.torch_version);
  ++p.replays;
  p.unconstrained_peak_reserved_bytes = free_run.peak_reserved;
  // The answer lies between the peak of live bytes (no cap can go below it) and what the run
  // reserves unconstrained (a cap there is never reached) - unless garbage collection, which
  // a cap switches on, changes the run: then widen until a cap works.
  uint64_t lo = free_run.peak_allocated / g * g;  // fails or is the answer
  uint64_t hi = (free_run.peak_reserved + g - 1) / g * g;
  Trial at_hi = try_limit(trace, p.conf, hi, empty_cache_before, options.torch_version);
  ++p.replays;
  while (!at_hi.ok) {
    lo = hi;
    hi += std::max(hi / 4, g);
    at_hi = try_limit(trace, p.conf, hi, empty_cache_before, options.torch_version);
    ++p.replays;
  }
  Trial best = at_hi;
  // Fitting is not monotonic in the cap (a cap switches garbage collection on, and what a run
  // frees to retry changes what it allocates after): the room asked about is tried itself, so
  // that a bisection stepping over it cannot miss that it works.
  const uint64_t room = options.limit_bytes ? *options.limit_bytes
                                            : (options.card_bytes > options.context_bytes
                                                   ? options.card_bytes - options.context_bytes
                                                   : 0);
  if (room > lo && room < hi) {
    const Trial at_room = try_limit(trace, p.conf, room, empty_cache_before, options.torch_version);
    ++p.replays;
    if (at_room.ok) {
      hi = room;
      best = at_room;
    }
  }
  while (hi - lo > g) {
    // (At least a granule above lo: the room tried above need not be a multiple of one.)
    const uint64_t mid = lo + std::max((hi - lo) / 2 / g * g, g);
    const Trial t = try_limit(trace, p.conf, mid, empty_cache_before, options.torch_version);
    ++p.replays;
    if (t.ok) {
      hi = mid;
      best = t;
    } else {
      lo = mid;
    }
  }
  if (lo > 0 && hi - lo == g) {
    // lo was never tried when it is the peak of live bytes itself.
    const Trial t = try_limit(trace, p.conf, lo, empty_cache_before, options.torch_version);
    ++p.replays;
    if (t.ok) {
      hi = lo;
      best = t;
    }
  }
  p.min_limit_bytes = hi;
  p.peak_allocated_bytes = best.peak_allocated;
  p.peak_reserved_bytes = best.peak_reserved;
  p.fragmentation = best.fragmentation;
  p.margin_bytes = static_cast<int64_t>(room) - static_cast<int64_t>(p.min_limit_bytes);
  p.fits = p.margin_bytes >= 0;
  const DeviceCallTimes& times =
      options.call_times ? *options.call_times : shipped_device_call_times();
  const uint64_t answered = room > 0 ? static_cast<uint64_t>(room) : 0;
  p.calls = device_call_cost(trace, p.conf, std::max(p.min_limit_bytes, answered),
                             empty_cache_before, options.torch_version, times);
  ++p.replays;
  return p;
}

// The fitting remedy with the least estimated device-call time; the first of equals.
std::optional<Remedy> cheapest_fit(const PlanResult& r) {
  std::optional<Remedy> best;
  double seconds = 0;
  auto consider = [&](const Plan& p, Remedy remedy) {
    if (p.fits && (!best || p.calls.seconds < seconds)) {
      best = remedy;
      seconds = p.calls.seconds;
    }
  };
  for (size_t i = 0; i < r.plans.size(); ++i) consider(r.plans[i], {Remedy::Kind::kSetting, i});
  if (r.empty_cache_every_step)
    consider(*r.empty_cache_every_step, {Remedy::Kind::kEmptyCacheEveryStep, 0});
  return best;
}

}  // namespace

const Plan& remedy_plan(const PlanResult& result, const Remedy& remedy) {
  return remedy.kind == Remedy::Kind::kEmptyCacheEveryStep ? *result.empty_cache_every_step
                                                           : result.plans[remedy.setting];
}

PlanResult plan(const Trace& trace, const PlanOptions& options) {
  PlanResult result;
  result.card_bytes = options.card_bytes;
  result.context_bytes = options.context_bytes;
  result.limit_bytes = options.limit_bytes;
  result.empty_cache_before = options.empty_cache_before;
  if (options.torch_version || trace.torch_version)
    result.torch_version = replay_torch_version(trace, options.torch_version);
  const std::vector<AllocConf> settings =
      options.settings.empty() ? default_plan_settings(trace) : options.settings;
  // Every replay of the search works on the same requests: worked out once, shared by the threads.
  const PreparedTrace prepared(trace, kPlanCapacity);
  // Settings are independent: search them on all cores, keep the results in order.
  // Each setting, then the remedy of empty_cache() every step under the first.
  struct Candidate {
    AllocConf conf;
    const std::vector<uint64_t>* empty_cache_before;
  };
  std::vector<Candidate> candidates;
  candidates.reserve(settings.size() + 1);
  for (const AllocConf& c : settings) candidates.push_back({c, &options.empty_cache_before});
  const bool remedy = !options.step_starts.empty() && options.empty_cache_before.empty();
  if (remedy) candidates.push_back({settings.front(), &options.step_starts});
  std::vector<Plan> plans(candidates.size());
  // A setting that cannot be replayed (bad settings, a trace the replay refuses) throws: kept by
  // setting, and the first setting's error rethrown once every thread has joined. Thrown out of a
  // thread, it would end the program instead.
  std::vector<std::exception_ptr> errors(candidates.size());
  std::atomic<size_t> next{0}, done{0};
  std::mutex progress_mutex;
  auto worker = [&] {
    for (size_t i = next++; i < candidates.size(); i = next++) {
      try {
        plans[i] =
            plan_one(prepared, candidates[i].conf, options, *candidates[i].empty_cache_before);
      } catch (...) {
        errors[i] = std::current_exception();
      }
      const size_t finished = ++done;
      if (options.progress) {
        std::lock_guard<std::mutex> lock(progress_mutex);
        options.progress(finished, candidates.size());
      }
    }
  };
  const size_t threads =
      std::min<size_t>(candidates.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  if (remedy) {
    result.empty_cache_every_step = plans.back();
    result.empty_cache_calls = options.step_starts.size();
    plans.pop_back();
  }
  for (const Plan& p : plans) {
    result.plans.push_back(p);
    if (p.min_limit_bytes < result.plans[result.best].min_limit_bytes) {
      result.best = result.plans.size() - 1;
    }
  }
  result.call_times_device =
      (options.call_times ? *options.call_times : shipped_device_call_times()).device;
  result.cheapest = cheapest_fit(result);
  return result;
}

}  // namespace allocsim
