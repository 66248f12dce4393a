#include "sim/report/replay_report.hpp"

#include <algorithm>
#include <cstdio>

#include "core/format_size.hpp"
#include "core/memory_summary.hpp"
#include "sim/report/breakdown_format.hpp"
#include "sim/report/recording_departure.hpp"
#include "sim/report/replay_warnings.hpp"
#include "sim/report/stack_site.hpp"
#include "sim/report/step_analysis.hpp"

namespace allocsim {
namespace {

constexpr size_t kLiveBlocksListed = 100;

const char* departure_kind(RecordingDeparture::Kind kind) {
  switch (kind) {
    case RecordingDeparture::kOom:
      return "oom";
    case RecordingDeparture::kAddress:
      return "address";
    case RecordingDeparture::kSegmentOperation:
      break;
  }
  return "segment_operation";
}

std::string settings_text(const AllocConf& conf) {
  const std::string s = conf.to_string();
  return s.empty() ? "(defaults)" : s;
}

std::string site(const Trace& trace, uint32_t stack) {
  return stack == kNoStack ? "" : describe_site(trace, stack);
}

using nlohmann::json;

json departure_json(const RecordingDeparture& d) {
  json j = {{"kind", departure_kind(d.kind)},
            {"op_index", d.op_index},
            {"event_index", d.event_index ? json(*d.event_index) : json(nullptr)},
            {"recorded", d.recorded},
            {"replayed", d.replayed}};
  if (!d.cause.empty()) j["cause"] = d.cause;
  return j;
}

json device_ops_json(const std::vector<DeviceOp>& device_ops) {
  json ops = json::array();
  for (const DeviceOp& op : device_ops) {
    ops.push_back({{"action", to_string(op.kind)},
                   {"address", op.address},
                   {"size", op.size},
                   {"stream", op.stream}});
  }
  return ops;
}

json oom_json(const ReplayOom& oom) {
  return {{"event_index", oom.event_index},
          {"size", oom.requested},
          {"rounded_size", oom.rounded},
          {"alloc_size", oom.alloc_size},
          {"stream", oom.stream},
          {"recorded", oom.recorded},
          {"largest_free_block", oom.largest_free_block},
          {"reserved_unallocated", oom.reserved_unallocated},
          {"allocated_bytes", oom.allocated},
          {"reserved_bytes", oom.reserved},
          {"message", oom.message}};
}

// The run's outcome: how far it went, its OOMs, and what it restored, inferred and checked.
void add_outcome(json& report, const ReplayResult& r) {
  report["oom"] = r.outcome.oom ? oom_json(*r.outcome.oom) : json(nullptr);
  if (r.outcome.oom && r.outcome.oom->caught) report["oom"]["caught"] = true;
  report["ooms"] = r.outcome.ooms;
  if (r.outcome.ooms_caught) report["ooms_caught"] = r.outcome.ooms_caught;
  json oom_events = json::array();
  for (const auto& e : r.outcome.oom_events) {
    oom_events.push_back(
        {{"event_index", e.event_index}, {"size", e.size}, {"recorded", e.recorded}});
  }
  report["oom_events"] = std::move(oom_events);
  report["stopped_at_oom"] = r.outcome.stopped_at_oom;
  report["events_total"] = r.outcome.events_total;
  report["events_replayed"] = r.outcome.events_replayed;
  report["recorded_ooms"] = r.outcome.recorded_ooms;
  report["recorded_ooms_not_reproduced"] = r.outcome.recorded_ooms_not_reproduced;
  if (r.outcome.recorded_ooms_capture_unknown)
    report["recorded_ooms_capture_unknown"] = r.outcome.recorded_ooms_capture_unknown;
  if (r.outcome.releases_before_guessed_capture)
    report["releases_before_guessed_capture"] = r.outcome.releases_before_guessed_capture;
  if (r.outcome.releases_read_as_retry)
    report["releases_read_as_retry"] = r.outcome.releases_read_as_retry;
  if (r.outcome.recorded_calls_made || r.outcome.recorded_limit_changes_replaced ||
      r.outcome.recorded_starting_cap_replaced || r.outcome.recorded_settings_changes_replaced) {
    report["recorded_calls"] = {
        {"made", r.outcome.recorded_calls_made},
        {"limit_changes_replaced", r.outcome.recorded_limit_changes_replaced},
        {"starting_cap_replaced", r.outcome.recorded_starting_cap_replaced},
        {"settings_changes_replaced", r.outcome.recorded_settings_changes_replaced},
        {"settings_refused", r.outcome.recorded_settings_refused}};
  }
  if (r.outcome.pools_freed_holding_blocks > 0) {
    report["pools_freed_holding_blocks"] = {{"pools", r.outcome.pools_freed_holding_blocks},
                                            {"taken_over", r.outcome.freed_pools_taken_over}};
  }
  report["frees_of_unknown_blocks"] = r.outcome.contradictions.frees_of_unknown_blocks;
  report["restored"] = {{"segments", r.restored.segments}, {"blocks", r.restored.blocks}};
  report["inferred_empty_cache_calls"] = r.outcome.inferred_empty_cache_calls;
  if (r.setup.adds_empty_cache)
    report["empty_cache_calls_added"] = r.outcome.empty_cache_calls_added;
  if (r.outcome.added_device_calls) {
    report["empty_cache_cost"] = {{"extra_device_allocs", r.outcome.added_device_calls->first},
                                  {"extra_device_frees", r.outcome.added_device_calls->second}};
  }
  report["addresses"] = {
      {"checked", r.addresses.checks},
      {"mismatched", r.addresses.mismatches},
      {"first_mismatch_event",
       r.addresses.mismatches ? json(r.addresses.first_mismatch_event) : json(nullptr)},
      {"segments_placed", r.addresses.segments_placed},
      {"segments_placed_by_model", r.addresses.segments_placed_by_model}};
}

// The blocks still allocated at the end: their count and bytes, the first kLiveBlocksListed.
json leaks_json(const Trace& trace, const std::vector<LiveBlock>& live_blocks) {
  uint64_t live_bytes = 0;
  json blocks = json::array();
  for (const LiveBlock& b : live_blocks) {
    live_bytes += b.size;
    if (blocks.size() >= kLiveBlocksListed) continue;
    json block = {
        {"address", b.address},
        {"size", b.size},
        {"requested", b.requested},
        {"stream", b.stream},
        {"event_index", b.event_index == kBeforeTrace ? json(nullptr) : json(b.event_index)}};
    if (b.event_index == kBeforeTrace) block["before_trace"] = true;
    if (b.stack != kNoStack) block["site"] = site(trace, b.stack);
    blocks.push_back(std::move(block));
  }
  return {{"count", live_blocks.size()}, {"bytes", live_bytes}, {"blocks", std::move(blocks)}};
}

json fragmentation_json(const ReplayResult& r) {
  json frag = {{"gmlake_1_minus_peak_active_over_peak_reserved", r.fragmentation.gmlake},
               {"reserved_unallocated_at_peak", r.fragmentation.reserved_unallocated_at_peak},
               {"largest_free_block_at_end", r.fragmentation.largest_free_block_end}};
  if (r.outcome.oom) {
    frag["reserved_unallocated_at_oom"] = r.outcome.oom->reserved_unallocated;
    frag["largest_free_block_at_oom"] = r.outcome.oom->largest_free_block;
    frag["failed_request_alloc_size"] = r.outcome.oom->alloc_size;
  }
  frag["breakdown_at_end"] = to_json(r.breakdown_end);
  if (r.breakdown_at_oom) frag["breakdown_at_oom"] = to_json(*r.breakdown_at_oom);
  return frag;
}

// The source lines holding the most memory at the allocated peak and at the OOM.
json sites_json(const Trace& trace, const ReplayResult& r) {
  auto at = [&trace](uint64_t event_index) {
    json a = json::array();
    for (const SiteUsage& u : sites_live_at(trace, event_index)) {
      a.push_back({{"site", u.site}, {"bytes", u.bytes}, {"blocks", u.blocks}});
    }
    return a;
  };
  return {{"at_allocated_peak", at(r.allocated_peak_event)},
          {"at_oom", r.outcome.oom ? at(r.outcome.oom->event_index) : json(nullptr)}};
}

json steps_json(const StepAnalysis& steps) {
  json boundaries = json::array();
  for (const StepBoundary& b : steps.boundaries) {
    boundaries.push_back({{"event_index", b.event_index}, {"live_bytes", b.live_bytes}});
  }
  json sites = json::array();
  for (const LeakSite& site : steps.sites) {
    sites.push_back({{"site", site.site},
                     {"operation", site.operation},
                     {"bytes", site.bytes},
                     {"blocks", site.blocks},
                     {"steps", site.steps}});
  }
  return {{"marker", steps.marker},
          {"boundaries", std::move(boundaries)},
          {"growing", steps.growing},
          {"growth_bytes_per_step", steps.growth_bytes_per_step},
          {"outliving_sites", std::move(sites)}};
}

}  // namespace

nlohmann::json replay_report_json(const Trace& trace, const ReplayResult& r) {
  json report;
  report["trace"] = trace.source;
  // What the reading went past, and where the replay stopped reproducing the recording.
  std::vector<std::string> warnings = trace.warnings;
  const std::optional<RecordingDeparture> departure = recording_departure(trace, r);
  for (std::string& w : replay_warnings(trace, r)) warnings.push_back(std::move(w));
  if (!warnings.empty()) report["warnings"] = warnings;
  if (departure) report["departure"] = departure_json(*departure);
  report["alloc_conf"] = r.setup.conf.to_string();
  // Only where it is not the default's 2.11: reports of 2.11 recordings stay as they were.
  if (r.setup.torch_version_given || trace.torch_version) {
    report["torch_version"] = {
        {"version", r.setup.torch_version.to_string()},
        {"told_by", r.setup.torch_version_given ? std::string("--torch-version")
                                                : "the snapshot: " + trace.torch_version_evidence}};
  }
  report["capacity_bytes"] = r.setup.capacity;
  report["context_bytes"] = r.setup.context_bytes;
  report["memory_fraction"] =
      r.setup.memory_fraction ? json(*r.setup.memory_fraction) : json(nullptr);
  json stats = json::object();
  for (const auto& [key, value] : r.stats.flatten(r.setup.torch_version)) stats[key] = value;
  report["memory_stats"] = std::move(stats);
  report["device_ops"] = device_ops_json(r.device_ops);
  add_outcome(report, r);
  report["leaks"] = leaks_json(trace, r.live_blocks);
  report["fragmentation"] = fragmentation_json(r);
  report["sites"] = sites_json(trace, r);
  report["steps"] = steps_json(analyze_steps(trace));
  if (!trace.block_annotations.empty()) {
    json annotations = json::array();
    for (const auto& a : trace.block_annotations)
      annotations.push_back({{"event_index", a.event}, {"address", a.address}, {"text", a.text}});
    report["block_annotations"] = std::move(annotations);
  }
  if (const auto& h = trace.host_memory) {
    report["host_memory"] = {{"segments", h->segments},
                             {"reserved_bytes", h->reserved_bytes},
                             {"allocated_bytes", h->allocated_bytes},
                             {"peak_reserved_bytes", h->peak_reserved_bytes},
                             {"peak_allocated_bytes", h->peak_allocated_bytes},
                             {"trace_entries", h->trace_entries}};
  }
  if (trace.internal_metadata) report["internal_metadata"] = json::parse(*trace.internal_metadata);
  return report;
}

std::string replay_report_json_text(const Trace& trace, const ReplayResult& result) {
  return replay_report_json(trace, result)
             .dump(1, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

nlohmann::json replay_report_json(std::span<const DeviceReplay> devices) {
  using nlohmann::json;
  if (devices.size() == 1) return replay_report_json(devices[0].trace, devices[0].result);
  json report;
  report["trace"] = devices.empty() ? "" : devices[0].trace.source;
  uint64_t events_total = 0, events_replayed = 0, ooms = 0, ooms_caught = 0, recorded_ooms = 0;
  json oom_devices = json::array();
  std::vector<std::string> warnings;
  json each = json::array();
  for (const DeviceReplay& d : devices) {
    const ReplayOutcome& o = d.result.outcome;
    events_total += o.events_total;
    events_replayed += o.events_replayed;
    ooms += o.ooms;
    ooms_caught += o.ooms_caught;
    recorded_ooms += o.recorded_ooms;
    if (o.ooms > 0 || o.recorded_ooms > 0) oom_devices.push_back(d.trace.device);
    for (const std::string& w : d.trace.warnings) {
      if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
    }
    json one = replay_report_json(d.trace, d.result);
    one["device"] = d.trace.device;
    // The release is the process's: named once at the top as well.
    if (one.contains("torch_version") && !report.contains("torch_version"))
      report["torch_version"] = one["torch_version"];
    each.push_back(std::move(one));
  }
  if (!warnings.empty()) report["warnings"] = warnings;
  report["events_total"] = events_total;
  report["events_replayed"] = events_replayed;
  report["ooms"] = ooms;
  if (ooms_caught) report["ooms_caught"] = ooms_caught;
  report["recorded_ooms"] = recorded_ooms;
  report["oom_devices"] = std::move(oom_devices);
  report["devices"] = std::move(each);
  return report;
}

std::string replay_report_json_text(std::span<const DeviceReplay> devices) {
  return replay_report_json(devices).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

std::string replay_report_text(std::span<const DeviceReplay> devices) {
  if (devices.size() == 1) return replay_report_text(devices[0].trace, devices[0].result);
  std::string out;
  for (const DeviceReplay& d : devices) {
    out += "== device " + std::to_string(d.trace.device) + " (of " +
           std::to_string(devices.size()) + " devices in the file) ==\n";
    out += replay_report_text(d.trace, d.result);
  }
  return out;
}

namespace {

// A printf into `out`, for lines with fixed-width numbers.
template <class... Args>
void append_format(std::string& out, const char* format, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, format, args...);
  out += buf;
}

using ull = unsigned long long;

// The trace, the simulated device and settings, and how far the replay went.
void header_text(std::string& out, const Trace& trace, const ReplayResult& r) {
  append_format(out, "allocsim replay of %s\n", trace.source.c_str());
  append_format(out, "  device: %s capacity, %s outside PyTorch%s\n",
                format_size(r.setup.capacity).c_str(), format_size(r.setup.context_bytes).c_str(),
                r.setup.memory_fraction
                    ? (", memory fraction " + std::to_string(*r.setup.memory_fraction)).c_str()
                    : "");
  out += "  PYTORCH_CUDA_ALLOC_CONF: " + settings_text(r.setup.conf) + "\n";
  append_format(out, "  events: %llu of %llu replayed\n",
                static_cast<ull>(r.outcome.events_replayed),
                static_cast<ull>(r.outcome.events_total));
  if (r.outcome.inferred_empty_cache_calls) {
    append_format(out, "  torch.cuda.empty_cache() calls inferred from the trace: %llu\n",
                  static_cast<ull>(r.outcome.inferred_empty_cache_calls));
  }
  if (r.setup.adds_empty_cache) {
    append_format(out, "  torch.cuda.empty_cache() calls added (--empty-cache-at): %llu\n",
                  static_cast<ull>(r.outcome.empty_cache_calls_added));
  }
  if (r.outcome.added_device_calls) {
    append_format(out,
                  "    costing %lld more cudaMalloc (or map) and %lld more cudaFree (or unmap) "
                  "calls than the run without them\n",
                  static_cast<long long>(r.outcome.added_device_calls->first),
                  static_cast<long long>(r.outcome.added_device_calls->second));
  }
  if (r.restored.segments) {
    append_format(out,
                  "  the history starts mid-run: %llu segments and %llu blocks that existed before "
                  "its first event "
                  "were reconstructed\n",
                  static_cast<ull>(r.restored.segments), static_cast<ull>(r.restored.blocks));
  }
  out += "\n";
}

void oom_text(std::string& out, const ReplayOutcome& outcome) {
  const ReplayOom& oom = *outcome.oom;
  const char* where = !oom.recorded ? "the recorded run did not fail here"
                      : oom.caught  ? "the recorded run failed here too, caught it and went on"
                                    : "the recorded run failed here too";
  append_format(
      out, "OOM at event %llu (%s, %s on stream %llu)%s:\n", static_cast<ull>(oom.event_index),
      where, format_size(oom.requested).c_str(), static_cast<ull>(oom.stream),
      outcome.ooms > 1 ? (" [" + std::to_string(outcome.ooms) + " OOMs in all]").c_str() : "");
  out += "torch.OutOfMemoryError: " + oom.message + "\n";
  if (outcome.ooms_caught > 0) {
    append_format(out,
                  "%llu of the OOMs were caught: the recorded run went on after each (an op that "
                  "retries with less memory, as cuDNN's algorithm search does, or the job's own "
                  "try/except)%s\n",
                  static_cast<ull>(outcome.ooms_caught),
                  outcome.fatal_ooms() == 0 ? "; none ended the job" : "");
  }
  out += "\n";
}

// The peaks, the fragmentation figures and where the reserved memory is.
void memory_text(std::string& out, const ReplayResult& r) {
  const auto& s = r.stats;
  append_format(out,
                "\npeak allocated %s, peak reserved %s (max_memory_allocated %lld, "
                "max_memory_reserved %lld)\n",
                format_size(static_cast<uint64_t>(s.allocated_bytes[kAggregate].peak)).c_str(),
                format_size(static_cast<uint64_t>(s.reserved_bytes[kAggregate].peak)).c_str(),
                static_cast<long long>(s.allocated_bytes[kAggregate].peak),
                static_cast<long long>(s.reserved_bytes[kAggregate].peak));
  out += "fragmentation:\n";
  append_format(out, "  1 - peak active / peak reserved (GMLake): %.4f\n", r.fragmentation.gmlake);
  out += "  reserved but unallocated at the reserved peak: " +
         format_size(r.fragmentation.reserved_unallocated_at_peak) + "\n";
  if (r.outcome.oom) {
    out += "  reserved but unallocated at the OOM: " +
           format_size(r.outcome.oom->reserved_unallocated) + "\n";
    out += "  largest free cached block at the OOM: " +
           format_size(r.outcome.oom->largest_free_block) + ", the failed request needed a " +
           format_size(r.outcome.oom->alloc_size) + " segment\n";
  }
  out += "where the reserved memory is" +
         std::string(r.outcome.oom ? " at the OOM" : " at the end") + ":\n" +
         to_text(r.outcome.oom && r.breakdown_at_oom ? *r.breakdown_at_oom : r.breakdown_end);
}

void sites_text(std::string& out, const Trace& trace, const char* when, uint64_t event_index) {
  const auto sites = sites_live_at(trace, event_index);
  if (sites.empty()) return;
  out += std::string("source lines holding the most memory ") + when + ":\n";
  for (const SiteUsage& u : sites) {
    out += "  " + format_size(u.bytes) + " in " + std::to_string(u.blocks) + " blocks: " + u.site +
           "\n";
  }
}

// The blocks still allocated at the end: their count and bytes, the five largest.
void live_blocks_text(std::string& out, const Trace& trace, const std::vector<LiveBlock>& live) {
  uint64_t live_bytes = 0;
  for (const LiveBlock& b : live) live_bytes += b.size;
  append_format(out, "blocks still allocated at the end: %zu (%s)\n", live.size(),
                format_size(live_bytes).c_str());
  std::vector<LiveBlock> largest = live;
  std::sort(largest.begin(), largest.end(), [](const LiveBlock& a, const LiveBlock& b) {
    return a.size != b.size ? a.size > b.size : a.address < b.address;
  });
  for (size_t i = 0; i < largest.size() && i < 5; ++i) {
    const std::string when = largest[i].event_index == kBeforeTrace
                                 ? "there before the trace's first event"
                                 : "allocated at event " + std::to_string(largest[i].event_index);
    append_format(out, "  %s at 0x%llx, %s%s%s\n", format_size(largest[i].size).c_str(),
                  static_cast<ull>(largest[i].address), when.c_str(),
                  largest[i].stack != kNoStack ? " by " : "",
                  site(trace, largest[i].stack).c_str());
  }
}

// Live memory at each training step's boundary, and the leak verdict.
void steps_text(std::string& out, const StepAnalysis& steps) {
  if (steps.boundaries.empty()) return;
  out += "live memory at each step boundary (after " + steps.marker + "):";
  for (const StepBoundary& b : steps.boundaries) out.append(" ").append(format_size(b.live_bytes));
  out += "\n";
  if (!steps.growing) {
    out += "  no steady growth across steps\n";
    return;
  }
  out += "  LEAK: live memory grows " +
         format_size(static_cast<uint64_t>(steps.growth_bytes_per_step)) +
         " every step; blocks that outlive their step, by allocation site:\n";
  for (size_t i = 0; i < steps.sites.size() && i < 5; ++i) {
    const LeakSite& site = steps.sites[i];
    out +=
        "    " + format_size(site.bytes) + " in " + std::to_string(site.blocks) + " blocks from " +
        std::to_string(site.steps) + " steps: " + site.site +
        (site.operation != site.site && !site.operation.empty() ? ", in " + site.operation : "") +
        "\n";
  }
}

}  // namespace

std::string replay_report_text(const Trace& trace, const ReplayResult& r) {
  std::string out;
  header_text(out, trace, r);
  if (r.outcome.oom) oom_text(out, r.outcome);
  out += memory_summary(r.stats, trace.device);
  memory_text(out, r);
  sites_text(out, trace, "at the allocated peak", r.allocated_peak_event);
  if (r.outcome.oom) sites_text(out, trace, "at the OOM", r.outcome.oom->event_index);
  live_blocks_text(out, trace, r.live_blocks);
  steps_text(out, analyze_steps(trace));
  if (const auto& h = trace.host_memory) {
    out += "Pinned host memory (apart from the device's, not replayed): " +
           format_size(h->reserved_bytes) + " reserved in " + std::to_string(h->segments) +
           " segment(s), " + format_size(h->allocated_bytes) +
           " allocated at the snapshot; peaks " + format_size(h->peak_reserved_bytes) +
           " reserved, " + format_size(h->peak_allocated_bytes) + " allocated\n";
  }
  if (trace.internal_metadata) {
    constexpr size_t kShown = 160;
    const std::string& m = *trace.internal_metadata;
    out += "internal_metadata (a PyTorch newer than 2.14; not read): " +
           (m.size() > kShown ? m.substr(0, kShown) + "..." : m) + "\n";
  }
  // (A predicted trace's addresses are no run's: nothing to differ from.)
  if (trace.addresses_recorded && r.addresses.checks && r.addresses.mismatches) {
    append_format(
        out,
        "note: %llu of %llu block addresses differ from the recorded ones (first at event %llu)\n",
        static_cast<ull>(r.addresses.mismatches), static_cast<ull>(r.addresses.checks),
        static_cast<ull>(r.addresses.first_mismatch_event));
  }
  if (trace.addresses_recorded && r.addresses.segments_placed_by_model) {
    append_format(out,
                  "note: %llu of %llu segments placed by allocsim's model of the driver, not at "
                  "a run's address (two runs of one job place theirs differently): statistics "
                  "that depend on addresses (inactive_split*, the allocated/freed byte counters; "
                  "the peaks where a cap makes the allocator release cached segments) may differ "
                  "from a real run's (--segment-addresses-of RUN takes that run's addresses)\n",
                  static_cast<ull>(r.addresses.segments_placed_by_model),
                  static_cast<ull>(r.addresses.segments_placed));
  }
  for (const std::string& w : replay_warnings(trace, r)) out += "warning: " + w + "\n";
  return out;
}

}  // namespace allocsim
