#include "sim/snapshot_writer.hpp"

#include "sim/pickle_writer.hpp"

namespace allocsim {
namespace {

void write_frames(pickle::Writer& w, const Trace& trace, uint32_t stack) {
  w.begin_list();
  if (stack != kNoStack) {
    for (uint32_t f : trace.stacks[stack]) {
      const Frame& frame = trace.frames[f];
      w.begin_dict();
      w.string("name");
      w.string(frame.name);
      w.string("filename");
      w.string(frame.filename);
      w.string("line");
      w.integer(frame.line);
      w.end_dict();
    }
  }
  w.end_list();
}

void write_settings(pickle::Writer& w, const AllocConf& conf) {
  w.begin_dict();
  w.string("PYTORCH_CUDA_ALLOC_CONF");
  w.string(conf.to_string());
  w.string("max_split_size");
  w.integer(conf.max_split_size == kNoMaxSplitSize ? -1
                                                   : static_cast<int64_t>(conf.max_split_size));
  w.string("garbage_collection_threshold");
  w.real(conf.garbage_collection_threshold);
  w.string("expandable_segments");
  w.boolean(conf.expandable_segments);
  w.string("release_lock_on_cudamalloc");
  w.boolean(conf.release_lock_on_cudamalloc);
  w.string("roundup_power2_divisions");
  w.begin_dict();
  for (size_t i = 0; i < conf.roundup_power2_divisions.size(); ++i) {
    w.string(std::to_string(uint64_t{1} << i));
    w.integer(static_cast<int64_t>(conf.roundup_power2_divisions[i]));
  }
  w.end_dict();
  w.end_dict();
}

}  // namespace

std::string snapshot_pickle(const Trace& trace, const ReplayResult& r) {
  pickle::Writer w;
  w.begin_dict();

  w.string("segments");
  w.begin_list();
  for (const SnapshotSegment& seg : r.final_segments) {
    uint64_t allocated = 0, active = 0, requested = 0;
    for (const SnapshotBlock& b : seg.blocks) {
      if (b.allocated) allocated += b.size;
      if (b.active) {
        active += b.size;
        requested += b.requested;
      }
    }
    w.begin_dict();
    w.string("device");
    w.integer(0);
    w.string("address");
    w.integer(static_cast<int64_t>(seg.address));
    w.string("total_size");
    w.integer(static_cast<int64_t>(seg.total_size));
    w.string("allocated_size");
    w.integer(static_cast<int64_t>(allocated));
    w.string("active_size");
    w.integer(static_cast<int64_t>(active));
    w.string("requested_size");
    w.integer(static_cast<int64_t>(requested));
    w.string("stream");
    w.integer(static_cast<int64_t>(seg.stream));
    w.string("segment_type");
    w.string(seg.small ? "small" : "large");
    w.string("segment_pool_id");
    w.integer(0);
    w.integer(0);
    w.tuple2();
    w.string("is_expandable");
    w.boolean(seg.expandable);
    w.string("frames");
    w.begin_list();
    w.end_list();
    w.string("blocks");
    w.begin_list();
    for (const SnapshotBlock& b : seg.blocks) {
      w.begin_dict();
      w.string("address");
      w.integer(static_cast<int64_t>(b.address));
      w.string("size");
      w.integer(static_cast<int64_t>(b.size));
      w.string("requested_size");
      w.integer(static_cast<int64_t>(b.requested));
      w.string("state");
      w.string(b.allocated ? "active_allocated" : b.active ? "active_pending_free" : "inactive");
      w.string("frames");
      w.begin_list();
      w.end_list();
      w.end_dict();
    }
    w.end_list();
    w.end_dict();
  }
  w.end_list();

  w.string("device_traces");
  w.begin_list();
  w.begin_list();
  for (const TraceEvent& e : r.simulated_trace) {
    w.begin_dict();
    w.string("action");
    w.string(to_string(e.action));
    if (e.action == TraceAction::kOom) {
      w.string("device_free");
      w.integer(static_cast<int64_t>(e.device_free));
    } else {
      w.string("addr");
      w.integer(static_cast<int64_t>(e.addr));
    }
    w.string("size");
    w.integer(static_cast<int64_t>(e.size));
    w.string("stream");
    w.integer(static_cast<int64_t>(e.stream));
    w.string("time_us");
    w.integer(static_cast<int64_t>(e.time_us));
    w.string("frames");
    write_frames(w, trace, e.stack);
    w.end_dict();
  }
  w.end_list();
  w.end_list();

  w.string("allocator_settings");
  write_settings(w, r.conf);

  w.string("external_annotations");
  w.begin_list();
  for (const Annotation& a : trace.annotations) {
    w.begin_dict();
    w.string("stage");
    w.string(a.start ? "START" : "END");
    w.string("name");
    w.string(a.name);
    w.string("device");
    w.integer(0);
    w.string("time_us");
    w.integer(static_cast<int64_t>(a.time_us));
    w.end_dict();
  }
  w.end_list();

  w.end_dict();
  return w.finish();
}

}  // namespace allocsim
