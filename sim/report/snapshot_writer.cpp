#include "sim/report/snapshot_writer.hpp"

#include <algorithm>
#include <unordered_map>

#include "sim/trace/pickle_writer.hpp"

namespace allocsim {
namespace {

// One dict entry: a string key and its value.
void put(pickle::Writer& w, std::string_view key, int64_t value) {
  w.string(key);
  w.integer(value);
}
void put_string(pickle::Writer& w, std::string_view key, std::string_view value) {
  w.string(key);
  w.string(value);
}
void put_bool(pickle::Writer& w, std::string_view key, bool value) {
  w.string(key);
  w.boolean(value);
}

void write_frames(pickle::Writer& w, const Trace& trace, uint32_t stack) {
  w.begin_list();
  if (stack != kNoStack) {
    for (uint32_t f : trace.stacks[stack]) {
      const Frame& frame = trace.frames[f];
      w.begin_dict();
      put_string(w, "name", frame.name);
      put_string(w, "filename", frame.filename);
      put(w, "line", frame.line);
      w.end_dict();
    }
  }
  w.end_list();
}

void write_settings(pickle::Writer& w, const AllocConf& conf) {
  w.begin_dict();
  put_string(w, "PYTORCH_CUDA_ALLOC_CONF", conf.to_string());
  put(w, "max_split_size",
      conf.max_split_size == kNoMaxSplitSize ? -1 : static_cast<int64_t>(conf.max_split_size));
  w.string("garbage_collection_threshold");
  w.real(conf.garbage_collection_threshold);
  put_bool(w, "expandable_segments", conf.expandable_segments);
  put_bool(w, "release_lock_on_cudamalloc", conf.release_lock_on_cudamalloc);
  w.string("roundup_power2_divisions");
  w.begin_dict();
  for (size_t i = 0; i < conf.roundup_power2_divisions.size(); ++i) {
    w.string(std::to_string(uint64_t{1} << i));
    w.integer(static_cast<int64_t>(conf.roundup_power2_divisions[i]));
  }
  w.end_dict();
  w.end_dict();
}

// A device's segments at the end of its replay.
void write_segments(pickle::Writer& w, int device, const ReplayResult& r) {
  for (const SnapshotSegment& seg : r.recording.final_segments) {
    uint64_t allocated = 0, active = 0, requested = 0;
    for (const SnapshotBlock& b : seg.blocks) {
      if (b.allocated) allocated += b.size;
      if (b.active) {
        active += b.size;
        requested += b.requested;
      }
    }
    w.begin_dict();
    put(w, "device", device);
    put(w, "address", static_cast<int64_t>(seg.address));
    put(w, "total_size", static_cast<int64_t>(seg.total_size));
    put(w, "allocated_size", static_cast<int64_t>(allocated));
    put(w, "active_size", static_cast<int64_t>(active));
    put(w, "requested_size", static_cast<int64_t>(requested));
    put(w, "stream", static_cast<int64_t>(seg.stream));
    put_string(w, "segment_type", seg.small ? "small" : "large");
    w.string("segment_pool_id");
    w.integer(static_cast<int64_t>(seg.pool.first));
    w.integer(static_cast<int64_t>(seg.pool.second));
    w.tuple2();  // (0, 0): the ordinary pools
    put_bool(w, "is_expandable", seg.expandable);
    w.string("frames");
    w.begin_list();
    w.end_list();
    w.string("blocks");
    w.begin_list();
    for (const SnapshotBlock& b : seg.blocks) {
      w.begin_dict();
      put(w, "address", static_cast<int64_t>(b.address));
      put(w, "size", static_cast<int64_t>(b.size));
      put(w, "requested_size", static_cast<int64_t>(b.requested));
      put_string(w, "state",
                 b.allocated ? "active_allocated"
                 : b.active  ? "active_pending_free"
                             : "inactive");
      w.string("frames");
      w.begin_list();
      w.end_list();
      w.end_dict();
    }
    w.end_list();
    w.end_dict();
  }
}

// An "annotate" entry of the replayed run: the text attached to the block where the replay put
// it, after the entries of the events before the annotation's.
struct ReplayedAnnotation {
  size_t before_entry;  // of the run's entries
  uint64_t address;
  const Trace::BlockAnnotation* annotation;
};

// The trace's annotations, each on the replayed block of the alloc it annotates (the latest alloc
// at its address before it); one whose block the replay did not serve is left out.
std::vector<ReplayedAnnotation> replayed_annotations(const Trace& trace, const ReplayResult& r) {
  std::vector<ReplayedAnnotation> out;
  if (trace.block_annotations.empty()) return out;
  const std::vector<uint64_t>& origins = r.recording.trace_origins;
  std::unordered_map<uint64_t, uint64_t> last_alloc;  // address -> its latest alloc event so far
  uint64_t scanned = 0;
  for (const Trace::BlockAnnotation& a : trace.block_annotations) {  // in event order
    for (; scanned < a.event; ++scanned) {
      if (trace.events[scanned].action == TraceAction::kAlloc)
        last_alloc[trace.events[scanned].addr] = scanned;
    }
    const auto alloc = last_alloc.find(a.address);
    if (alloc == last_alloc.end()) continue;
    // The replay's alloc entry of that event (an OOM there: no block to annotate).
    auto entry = std::lower_bound(origins.begin(), origins.end(), alloc->second);
    while (entry != origins.end() && *entry == alloc->second &&
           r.recording.trace[static_cast<size_t>(entry - origins.begin())].action !=
               TraceAction::kAlloc)
      ++entry;
    if (entry == origins.end() || *entry != alloc->second) continue;
    const auto after = std::upper_bound(origins.begin(), origins.end(), a.event);
    out.push_back({static_cast<size_t>(after - origins.begin()),
                   r.recording.trace[static_cast<size_t>(entry - origins.begin())].addr, &a});
  }
  return out;
}

void write_entry(pickle::Writer& w, const Trace& trace, const TraceEvent& e) {
  w.begin_dict();
  put_string(w, "action", to_string(e.action));
  if (e.action == TraceAction::kOom) {
    put(w, "device_free", static_cast<int64_t>(e.device_free));
  } else {
    put(w, "addr", static_cast<int64_t>(e.addr));
  }
  put(w, "size", static_cast<int64_t>(e.size));
  put(w, "stream", static_cast<int64_t>(e.stream));
  put(w, "time_us", static_cast<int64_t>(e.time_us));
  w.string("frames");
  write_frames(w, trace, e.stack);
  w.end_dict();
}

// A device's list of trace entries: its replay as PyTorch would have recorded it, with the trace's
// annotate entries on the replayed blocks.
void write_events(pickle::Writer& w, const Trace& trace, const ReplayResult& r) {
  const std::vector<ReplayedAnnotation> annotations = replayed_annotations(trace, r);
  size_t next = 0;
  const auto write_annotations_before = [&](size_t entry) {
    for (; next < annotations.size() && annotations[next].before_entry <= entry; ++next) {
      const Trace::BlockAnnotation& a = *annotations[next].annotation;
      w.begin_dict();
      put_string(w, "action", "annotate");
      put(w, "addr", static_cast<int64_t>(annotations[next].address));
      put(w, "size", 0);
      put(w, "stream", static_cast<int64_t>(trace.events[a.event].stream));
      put(w, "time_us", static_cast<int64_t>(trace.events[a.event].time_us));
      put_string(w, "user_metadata", a.text);
      w.string("frames");
      write_frames(w, trace, trace.events[a.event].stack);
      w.end_dict();
    }
  };
  w.begin_list();
  for (size_t i = 0; i < r.recording.trace.size(); ++i) {
    write_annotations_before(i);
    write_entry(w, trace, r.recording.trace[i]);
  }
  write_annotations_before(r.recording.trace.size());
  w.end_list();
}

}  // namespace

std::string snapshot_pickle(const Trace& trace, const ReplayResult& result) {
  const DeviceReplay one{trace, result};
  return snapshot_pickle(std::span<const DeviceReplay>(&one, 1));
}

std::string snapshot_pickle(std::span<const DeviceReplay> devices) {
  pickle::Writer w;
  w.begin_dict();

  w.string("segments");
  w.begin_list();
  for (const DeviceReplay& d : devices) write_segments(w, d.trace.device, d.result);
  w.end_list();

  // One list per device up to the last replayed, as PyTorch writes one per device it knows.
  w.string("device_traces");
  w.begin_list();
  int next = 0;
  for (const DeviceReplay& d : devices) {
    for (; next < d.trace.device; ++next) {
      w.begin_list();
      w.end_list();
    }
    write_events(w, d.trace, d.result);
    next = d.trace.device + 1;
  }
  w.end_list();

  // The process's: the same in every device's trace.
  w.string("allocator_settings");
  write_settings(w, devices.front().result.setup.conf);

  w.string("external_annotations");
  w.begin_list();
  for (const DeviceReplay& d : devices) {
    for (const Annotation& a : d.trace.annotations) {
      w.begin_dict();
      put_string(w, "stage", a.start ? "START" : "END");
      put_string(w, "name", a.name);
      put(w, "device", d.trace.device);
      put(w, "time_us", static_cast<int64_t>(a.time_us));
      w.end_dict();
    }
  }
  w.end_list();

  w.end_dict();
  return w.finish();
}

std::string requests_snapshot_pickle(const Trace& requests) {
  uint64_t bound = uint64_t{1} << 30;
  for (const TraceEvent& e : requests.events) {
    if (e.action == TraceAction::kAlloc)
      bound += std::max<uint64_t>(e.size, uint64_t{20} << 20) * 2;
  }
  ReplayOptions options;
  options.capacity = std::max<uint64_t>(bound, kDefaultCapacityBytes);
  options.record_trace = true;
  options.on_oom = OnOom::kContinue;
  return snapshot_pickle(requests, replay(requests, options));
}

}  // namespace allocsim
