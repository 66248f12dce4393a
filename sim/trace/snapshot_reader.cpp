#include "sim/trace/snapshot_reader.hpp"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <tuple>

#include "core/size_rounding.hpp"
#include "sim/trace/event_feed.hpp"
#include "sim/trace/file_bytes.hpp"
#include "sim/trace/huge_pages.hpp"
#include "sim/trace/input_error.hpp"
#include "sim/trace/pickle_json.hpp"
#include "sim/trace/pickle_reader.hpp"
#include "sim/trace/private_pool_inference.hpp"
#include "sim/trace/recorder_marks.hpp"

namespace allocsim {

namespace {

using pickle::Kind;
using pickle::Value;

class SnapshotConverter {
 public:
  // `pickle_bytes`: the size of the pickle, to reserve room for about as many events as it holds.
  SnapshotConverter(const std::string& source, size_t pickle_bytes, EventFeed* feed)
      : source_(source), feed_(feed) {
    reserve_huge_pages(taken_, std::min<size_t>(pickle_bytes / 48, size_t{1} << 24));
  }
  // An error on the way: the reader must let go of the events before they are freed.
  ~SnapshotConverter() { abandon_feed(); }
  SnapshotConverter(const SnapshotConverter&) = delete;
  SnapshotConverter& operator=(const SnapshotConverter&) = delete;

  // The decoder's dict sink: a device-trace event is converted as soon as its dict is complete, so
  // the document need not keep its items. Anything unusual is left to the document (returns
  // false) and reported, with its position, when run() meets it.
  bool take_event(uint32_t container, std::span<const Value> kv, const pickle::Document& doc) {
    doc_ = &doc;
    if (kv.size() > 2 * kMaxEventKeys) return false;
    if (taken_.size() == taken_.capacity()) abandon_feed();  // the events are about to move
    TraceEvent& ev = taken_.emplace_back();                  // parsed in place
    if (!parse_event(kv, ev, trace_, nullptr)) {
      taken_.pop_back();
      return false;
    }
    if (container >= event_of_container_.size()) {
      event_of_container_.resize(std::max<size_t>(container + 1, 2 * event_of_container_.size()),
                                 kNotTaken);
    }
    event_of_container_[container] = static_cast<uint32_t>(taken_.size() - 1);
    if (mark_ != kNoMark) taken_marks_.emplace_back(taken_.size() - 1, mark_);
    if (ev.action == TraceAction::kAnnotate) [[unlikely]]
      taken_annotations_.emplace_back(taken_.size() - 1, annotation_text());
    if (feed_ && taken_.size() % kPublishEvery == 0) feed_->publish(taken_.data(), taken_.size());
    return true;
  }

  std::vector<Trace> run(const pickle::Document& doc) {
    doc_ = &doc;
    trace_.source = source_;
    if (doc_->root.kind == Kind::kList) return state_only();
    if (doc_->root.kind != Kind::kDict)
      fail("the top level", "a dict (a PyTorch memory snapshot)", doc_->root);
    const auto traces = doc_->get(doc_->root, "device_traces");
    if (!traces) {
      throw InputError(source_ +
                       ": not a PyTorch memory snapshot: no 'device_traces' key "
                       "(record with torch.cuda.memory._record_memory_history first)");
    }
    if (traces->kind != Kind::kList) fail("device_traces", "a list", *traces);
    const auto lists = doc_->items(*traces);
    std::vector<std::vector<TraceEvent>> events(lists.size());
    std::vector<std::vector<std::pair<uint64_t, uint32_t>>> marks(lists.size());
    std::vector<std::vector<std::pair<uint64_t, std::string>>> annotations(lists.size());
    int first_with_events = -1;
    for (size_t d = 0; d < lists.size(); ++d) {
      if (lists[d].kind != Kind::kList)
        fail("device_traces[" + std::to_string(d) + "]", "a list", lists[d]);
      if (doc_->items(lists[d]).empty()) continue;
      if (first_with_events < 0) first_with_events = static_cast<int>(d);
      events[d] = read_events(lists[d], d, marks[d], annotations[d]);
    }
    std::vector<SnapshotSegment> segments;
    std::vector<int> segment_device;
    if (const auto s = doc_->get(doc_->root, "segments")) {
      // A segment without a device is the first recording device's (a snapshot of one device).
      read_segments(*s, segments, segment_device, std::max(first_with_events, 0));
    }
    read_process_fields();
    read_recorder_ends();
    read_trace_notes();
    read_host_memory();
    read_internal_metadata();
    tell_torch_version(annotations);
    warn_of_unknown_fields();

    // Every device with events, and every device holding segments without any.
    std::vector<int> devices = segment_device;
    for (size_t d = 0; d < events.size(); ++d) {
      if (!events[d].empty()) devices.push_back(static_cast<int>(d));
    }
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    if (devices.empty()) devices.push_back(0);
    std::vector<Trace> out;
    for (const int d : devices) {
      // The last takes the process's fields, the others copy them.
      Trace t;
      if (d == devices.back()) {
        t = std::move(trace_);
      } else {
        t = trace_;
      }
      t.device = d;
      for (const auto& [device, options] : pool_options_) {
        if (device == d) t.mem_pool_options.push_back(options);
      }
      for (const auto& [device, bytes] : device_memory_) {
        if (device == d) t.device_memory = bytes;
      }
      if (static_cast<size_t>(d) < events.size()) {
        t.events = std::move(events[static_cast<size_t>(d)]);
        take_marks(t, marks[static_cast<size_t>(d)]);
        for (auto& [event, text] : annotations[static_cast<size_t>(d)])
          t.block_annotations.push_back({event, t.events[event].addr, std::move(text)});
      }
      warn_of_unknown_actions(t);
      for (size_t i = 0; i < segments.size(); ++i) {
        if (segment_device[i] == d) t.segments.push_back(segments[i]);
      }
      if (devices.size() > 1) {  // a device's annotations, and those that name none
        std::vector<Annotation> own;
        for (size_t i = 0; i < t.annotations.size(); ++i) {
          if (annotation_device_[i] == d || annotation_device_[i] == kAnyDevice)
            own.push_back(t.annotations[i]);
        }
        t.annotations = std::move(own);
      }
      out.push_back(std::move(t));
    }
    infer_settings(out);
    for (Trace& t : out) warn_of_settings_changed(t);
    for (Trace& t : out) {
      // A device without events: its segments' pools, to restore them into.
      const PrivatePoolInference pools = infer_private_pools(t);
      if (!t.events.empty() && !t.private_pools.empty())
        t.warnings.push_back(private_pool_warning(t, pools));
    }
    // The published events are the trace's only when it is the file's one trace (moved, the
    // array is the same).
    if (feed_ && events_were_taken_ && out.size() == 1) {
      feed_->finish(out.front().events.data(), out.front().events.size());
      feed_ = nullptr;
    }
    abandon_feed();
    return out;
  }

 private:
  // Events published to a feed in batches: each publication takes a lock.
  static constexpr size_t kPublishEvery = 4096;

  void abandon_feed() {
    if (feed_) feed_->abandon();
    feed_ = nullptr;
  }

  [[noreturn]] void fail(const std::string& where, const std::string& expected,
                         const Value& got) const {
    throw InputError(source_ + ": " + where + ": expected " + expected + ", found " +
                     pickle::kind_name(got.kind));
  }

  int64_t int_field(const Value& entry, const char* key, const std::string& where) const {
    const auto v = doc_->get(entry, key);
    if (!v) throw InputError(source_ + ": " + where + ": missing '" + key + "'");
    if (v->kind != Kind::kInt) fail(where + " '" + key + "'", "an int", *v);
    return v->i;
  }

  // The events of one device's list, in `marks` those a recorder marked (event, index into
  // mark_table_), and in `annotations` the text of its "annotate" entries.
  std::vector<TraceEvent> read_events(const Value& list, size_t device,
                                      std::vector<std::pair<uint64_t, uint32_t>>& marks,
                                      std::vector<std::pair<uint64_t, std::string>>& annotations) {
    const auto entries = doc_->items(list);
    // Usually the decoder took every event of this list, in order: then they are the trace.
    const bool all_taken_in_order =
        entries.size() == taken_.size() &&
        std::all_of(entries.begin(), entries.end(), [&, i = uint32_t{0}](const Value& e) mutable {
          return e.kind == Kind::kDict && e.ref < event_of_container_.size() &&
                 event_of_container_[e.ref] == i++;
        });
    if (all_taken_in_order) {
      events_were_taken_ = true;
      marks.assign(taken_marks_.begin(), taken_marks_.end());
      annotations.assign(taken_annotations_.begin(), taken_annotations_.end());
      return std::move(taken_);  // the same array, so a feed's reader reads on
    }
    abandon_feed();
    std::vector<TraceEvent> events;
    events.reserve(entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      const Value& e = entries[i];
      if (e.kind == Kind::kDict && e.ref < event_of_container_.size() &&
          event_of_container_[e.ref] != kNotTaken) {
        const uint32_t t = event_of_container_[e.ref];
        events.push_back(taken_[t]);
        const auto m = std::lower_bound(taken_marks_.begin(), taken_marks_.end(),
                                        std::pair<uint64_t, uint32_t>(t, 0));
        if (m != taken_marks_.end() && m->first == t)
          marks.emplace_back(events.size() - 1, m->second);
        if (events.back().action == TraceAction::kAnnotate) {
          const auto a = std::lower_bound(
              taken_annotations_.begin(), taken_annotations_.end(), t,
              [](const std::pair<uint64_t, std::string>& x, uint64_t k) { return x.first < k; });
          if (a != taken_annotations_.end() && a->first == t)
            annotations.emplace_back(events.size() - 1, a->second);
        }
        continue;
      }
      // Named only when something is wrong: building it for every event costs a heap allocation.
      const std::function<std::string(const char*)> where = [&](const char* key) {
        std::string w = "device_traces[" + std::to_string(device) + "] event " + std::to_string(i);
        if (key) w.append(" '").append(key).append("'");
        return w;
      };
      if (e.kind != Kind::kDict) fail(where(nullptr), "a dict", e);
      TraceEvent ev;
      parse_event(doc_->items(e), ev, trace_, &where);
      events.push_back(ev);
      if (mark_ != kNoMark) marks.emplace_back(events.size() - 1, mark_);
      if (ev.action == TraceAction::kAnnotate)
        annotations.emplace_back(events.size() - 1, annotation_text());
    }
    return events;
  }

  // What the snapshot says of the process rather than of a device: annotations, settings, and
  // what the reader went on past.
  void read_process_fields() {
    Trace& trace = trace_;
    if (const auto a = doc_->get(doc_->root, "external_annotations"); a && a->kind == Kind::kList) {
      for (const Value& item : doc_->items(*a)) {
        const auto name = doc_->get(item, "name");
        const auto stage = doc_->get(item, "stage");
        const auto time = doc_->get(item, "time_us");
        if (name && name->kind == Kind::kString && stage && stage->kind == Kind::kString && time &&
            time->kind == Kind::kInt) {
          const auto device = doc_->get(item, "device");
          annotation_device_.push_back(
              device && device->kind == Kind::kInt ? static_cast<int>(device->i) : kAnyDevice);
          trace.annotations.push_back({std::string(doc_->str(*name)), doc_->str(*stage) == "START",
                                       static_cast<uint64_t>(time->i)});
        }
      }
    }
    if (const auto settings = doc_->get(doc_->root, "allocator_settings")) {
      trace.settings = read_settings(*settings);
    }
    if (unknown_lines_ > 0) {
      trace.warnings.push_back(source_ + ": " + std::to_string(unknown_lines_) +
                               " stack frame line number(s) beyond 64 bits (torch.compile writes "
                               "2^64-1 for none) kept as unknown");
    }
  }

  // A key no PyTorch allocsim knows writes (a later release's?): counted, the first named.
  struct UnknownKeys {
    uint64_t count = 0;
    std::string first;
  };
  void note_unknown(UnknownKeys& keys, const Value& key) const {
    if (keys.count++ == 0)
      keys.first = key.kind == Kind::kString ? std::string(doc_->str(key)) : "(not a string)";
  }

  // Top-level keys and trace-entry keys no known PyTorch writes: left out, and said.
  void warn_of_unknown_fields() {
    static constexpr std::string_view kTopLevel[] = {
        "segments",          "device_traces", "allocator_settings", "external_annotations",
        "allocsim_recorder", "host_segments", "host_traces",        "internal_metadata",
        "allocsim_trace"};
    UnknownKeys top;
    if (doc_->root.kind == Kind::kDict) {
      const auto kv = doc_->items(doc_->root);
      for (size_t i = 0; i + 1 < kv.size(); i += 2) {
        if (kv[i].kind != Kind::kString || std::find(std::begin(kTopLevel), std::end(kTopLevel),
                                                     doc_->str(kv[i])) == std::end(kTopLevel))
          note_unknown(top, kv[i]);
      }
    }
    auto say = [this](const UnknownKeys& keys, const std::string& where) {
      if (keys.count == 0) return;
      trace_.warnings.push_back(
          source_ + ": " + where + " has " + std::to_string(keys.count) +
          " key(s) allocsim does not know (" +
          (printable(keys.first) ? "'" + keys.first + "'" : "an unprintable string") +
          " or another; a later PyTorch's?): left out");
    };
    say(top, "the top level");
    say(unknown_entry_keys_, "device_traces");
    // The allocator settings' keys of every release from 2.11 to 2.14 (the 2.14.1 wheel's
    // libtorch_python writes the same).
    static constexpr std::string_view kSettings[] = {
        "PYTORCH_CUDA_ALLOC_CONF",       "max_split_size",
        "garbage_collection_threshold",  "expandable_segments",
        "pinned_num_register_threads",   "release_lock_on_cudamalloc",
        "pinned_use_cuda_host_register", "graph_capture_record_stream_reuse",
        "roundup_power2_divisions"};
    UnknownKeys settings;
    if (const auto s = doc_->get(doc_->root, "allocator_settings"); s && s->kind == Kind::kDict) {
      const auto kv = doc_->items(*s);
      for (size_t i = 0; i + 1 < kv.size(); i += 2) {
        if (kv[i].kind != Kind::kString || std::find(std::begin(kSettings), std::end(kSettings),
                                                     doc_->str(kv[i])) == std::end(kSettings))
          note_unknown(settings, kv[i]);
      }
    }
    say(settings, "allocator_settings");
  }

  // A host_traces entry's action and size: from the event the decoder took of it (it looks like a
  // device's), else from the document.
  std::optional<std::pair<TraceAction, int64_t>> host_entry(const Value& e) const {
    if (e.kind != Kind::kDict) return std::nullopt;
    if (e.ref < event_of_container_.size() && event_of_container_[e.ref] != kNotTaken &&
        event_of_container_[e.ref] < taken_.size()) {
      const TraceEvent& t = taken_[event_of_container_[e.ref]];
      return std::pair{t.action, static_cast<int64_t>(t.size)};
    }
    const auto action = doc_->get(e, "action");
    const auto size = doc_->get(e, "size");
    if (!action || action->kind != Kind::kString || !size || size->kind != Kind::kInt)
      return std::nullopt;
    return std::pair{parse_action(doc_->str(*action)), size->i};
  }

  // Pinned host memory (host_segments, host_traces): what it held at the snapshot and its peaks
  // over the history. Read leniently: an entry it cannot use is counted and said.
  void read_host_memory() {
    const auto segments = doc_->get(doc_->root, "host_segments");
    const auto traces = doc_->get(doc_->root, "host_traces");
    if (!segments && !traces) return;
    HostMemory host;
    if (segments && segments->kind == Kind::kList) {
      for (const Value& seg : doc_->items(*segments)) {
        const auto total = seg.kind == Kind::kDict ? doc_->get(seg, "total_size") : std::nullopt;
        if (!total || total->kind != Kind::kInt || total->i < 0) continue;
        ++host.segments;
        host.reserved_bytes += static_cast<uint64_t>(total->i);
        const auto allocated = doc_->get(seg, "allocated_size");
        if (allocated && allocated->kind == Kind::kInt && allocated->i > 0)
          host.allocated_bytes += static_cast<uint64_t>(allocated->i);
      }
    }
    // A list of entries, or one per device.
    std::vector<const Value*> entries;
    if (traces && traces->kind == Kind::kList) {
      for (const Value& item : doc_->items(*traces)) {
        if (item.kind == Kind::kList) {
          for (const Value& e : doc_->items(item)) entries.push_back(&e);
        } else {
          entries.push_back(&item);
        }
      }
    }
    // Changes over the history, and their highest point: the start state is the end's less them.
    int64_t reserved = 0, allocated = 0, max_reserved = 0, max_allocated = 0;
    for (const Value* e : entries) {
      ++host.trace_entries;
      const std::optional<std::pair<TraceAction, int64_t>> entry = host_entry(*e);
      if (!entry) {
        ++host.unread_entries;
        continue;
      }
      const auto [action, size] = *entry;
      if (action == TraceAction::kAlloc) allocated += size;
      if (action == TraceAction::kFreeCompleted) allocated -= size;
      if (action == TraceAction::kSegmentAlloc) reserved += size;
      if (action == TraceAction::kSegmentFree) reserved -= size;
      max_reserved = std::max(max_reserved, reserved);
      max_allocated = std::max(max_allocated, allocated);
    }
    const auto peak = [](uint64_t at_end, int64_t change, int64_t highest) {
      const int64_t start = static_cast<int64_t>(at_end) - change;
      return static_cast<uint64_t>(std::max<int64_t>(start + highest, 0));
    };
    host.peak_reserved_bytes =
        std::max(host.reserved_bytes, peak(host.reserved_bytes, reserved, max_reserved));
    host.peak_allocated_bytes =
        std::max(host.allocated_bytes, peak(host.allocated_bytes, allocated, max_allocated));
    if (host.unread_entries > 0) {
      trace_.warnings.push_back(source_ + ": host_traces: " + std::to_string(host.unread_entries) +
                                " entr(ies) without a string 'action' and an int 'size': left "
                                "out of the pinned host memory's peaks");
    }
    trace_.host_memory = host;
  }

  // The oldest PyTorch release that writes what the snapshot holds: its policy replays it, unless
  // the user names another (--torch-version).
  // Shown in the report as it is; one too large to show is left out, and said.
  void read_internal_metadata() {
    const std::optional<pickle::Value> m = doc_->get(doc_->root, "internal_metadata");
    if (!m) return;
    constexpr size_t kMaxBytes = size_t{64} << 10;
    trace_.internal_metadata = pickle_json(*doc_, *m, kMaxBytes);
    if (!trace_.internal_metadata)
      trace_.warnings.push_back(source_ +
                                ": internal_metadata, more than 64 KiB as JSON (or nested past 64 "
                                "levels), is not shown");
  }

  void tell_torch_version(
      const std::vector<std::vector<std::pair<uint64_t, std::string>>>& annotations) {
    auto at_least = [this](TorchVersion v, const char* what) {
      if (!trace_.torch_version || *trace_.torch_version < v) {
        trace_.torch_version = v;
        trace_.torch_version_evidence = what;
      }
    };
    if (saw_pool_id_) at_least({2, 12}, "its trace entries name their pool (pool_id)");
    if (std::any_of(annotations.begin(), annotations.end(),
                    [](const auto& device) { return !device.empty(); }))
      at_least({2, 14}, "it has annotate entries");
    if (trace_.host_memory) at_least({2, 14}, "it records pinned host memory (host_segments)");
    if (doc_->get(doc_->root, "internal_metadata")) {
      at_least(kNewestTorchVersion,
               "it has internal_metadata (a PyTorch newer than 2.14, replayed as 2.14)");
    }
  }

  // What allocsim.trace could not know of the program it traced on a CPU
  // ({"allocsim_trace": {"warnings": [...]}}: causes not modelled and where the trace's upper
  // bound is): said again wherever the trace is read, so that no answer of it is silent.
  void read_trace_notes() {
    const auto notes = doc_->get(doc_->root, "allocsim_trace");
    if (!notes || notes->kind != Kind::kDict) return;
    const auto list = doc_->get(*notes, "warnings");
    if (!list || (list->kind != Kind::kList && list->kind != Kind::kTuple)) return;
    for (const Value& v : doc_->items(*list)) {
      if (v.kind != Kind::kString) continue;
      const std::string_view note = doc_->str(v);
      // One line of text, UTF-8 paths in it included (a longer one, or one with control
      // characters, is no note of allocsim's)
      if (note.size() <= 2000 && std::all_of(note.begin(), note.end(), [](char c) {
            return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
          }))
        trace_.warnings.push_back(source_ + ": traced on a CPU: " + std::string(note));
    }
  }

  // allocsim's recorder's marks where the history started and at the snapshot's end
  // (allocsim.torch.snapshot(): {"allocsim_recorder": {"start", "end", "max_entries"}}): the calls
  // made before the first trace entry and after the last.
  void read_recorder_ends() {
    const auto recorder = doc_->get(doc_->root, "allocsim_recorder");
    if (!recorder || recorder->kind != Kind::kDict) return;
    auto read = [&](const char* key, std::optional<RecorderMark>& mark) {
      const auto v = doc_->get(*recorder, key);
      if (!v || v->kind != Kind::kString) return;
      mark = parse_recorder_mark(doc_->str(*v));
      if (!mark || !mark->marks_every_call) {
        mark.reset();
        trace_.warnings.push_back(source_ + ": 'allocsim_recorder' '" + key +
                                  "' is not the recorder's mark: left out");
      }
    };
    read("start", start_mark_);
    read("end", end_mark_);
    // The MemPools deleted while it recorded, in order (RecordedCall::kFreeMemPool's pools):
    // each pool's id and, from recorders that write it, the device it was made on.
    if (const auto freed = doc_->get(*recorder, "freed_pools")) {
      bool ok = freed->kind == Kind::kList || freed->kind == Kind::kTuple;
      for (const Value& v : ok ? doc_->items(*freed) : std::span<const Value>{}) {
        const bool list = v.kind == Kind::kList || v.kind == Kind::kTuple;
        const std::span<const Value> ids = list ? doc_->items(v) : std::span<const Value>{};
        ok = (ids.size() == 2 || ids.size() == 3) &&
             std::all_of(ids.begin(), ids.end(),
                         [](const Value& i) { return i.kind == Kind::kInt; });
        if (!ok) break;
        FreedPool pool{MempoolId{static_cast<uint64_t>(ids[0].i), static_cast<uint64_t>(ids[1].i)},
                       std::nullopt};
        if (ids.size() == 3) pool.device = static_cast<int>(ids[2].i);
        freed_pools_.push_back(pool);
      }
      if (!ok) {
        freed_pools_.clear();
        trace_.warnings.push_back(source_ +
                                  ": 'allocsim_recorder' 'freed_pools' is not a list of pool ids "
                                  "(two ints, then the device, each): left out");
      }
    }
    // The allocator settings where the history started, and the strings the run set after.
    if (const auto start = doc_->get(*recorder, "start_settings");
        start && start->kind == Kind::kDict)
      start_settings_ = read_settings(*start);
    if (const auto set = doc_->get(*recorder, "settings")) {
      bool ok = set->kind == Kind::kList || set->kind == Kind::kTuple;
      for (const Value& v : ok ? doc_->items(*set) : std::span<const Value>{}) {
        ok = v.kind == Kind::kString;
        if (!ok) break;
        settings_strings_.emplace_back(doc_->str(v));
      }
      if (!ok) {
        settings_strings_.clear();
        trace_.warnings.push_back(source_ +
                                  ": 'allocsim_recorder' 'settings' is not a list of settings "
                                  "strings: left out");
      }
    }
    // The MemPools made with use_on_oom or no_split: [id0, id1, device, use_on_oom, no_split].
    if (const auto made = doc_->get(*recorder, "pool_options")) {
      counts_calls_in_pools_ = true;
      bool ok = made->kind == Kind::kList || made->kind == Kind::kTuple;
      for (const Value& v : ok ? doc_->items(*made) : std::span<const Value>{}) {
        const bool list = v.kind == Kind::kList || v.kind == Kind::kTuple;
        const std::span<const Value> f = list ? doc_->items(v) : std::span<const Value>{};
        auto is = [&](size_t k, Kind kind) { return f[k].kind == kind; };
        ok = f.size() == 5 && is(0, Kind::kInt) && is(1, Kind::kInt) && is(2, Kind::kInt) &&
             is(3, Kind::kBool) && is(4, Kind::kBool);
        if (!ok) break;
        pool_options_.push_back(
            {static_cast<int>(f[2].i),
             {MempoolId{static_cast<uint64_t>(f[0].i), static_cast<uint64_t>(f[1].i)}, f[3].i != 0,
              f[4].i != 0}});
      }
      if (!ok) {
        pool_options_.clear();
        trace_.warnings.push_back(source_ +
                                  ": 'allocsim_recorder' 'pool_options' is not a list of "
                                  "[id, id, device, use_on_oom, no_split]: left out, so the "
                                  "replay takes those MemPools as made without options");
      }
    }
    read_device_memory(*recorder);
    const auto bound = doc_->get(*recorder, "max_entries");
    if (bound && bound->kind == Kind::kInt && bound->i > 0)
      history_bound_ = static_cast<uint64_t>(bound->i);
  }

  // Each device's memory as the recorder read it: [[device, bytes], ...].
  void read_device_memory(const Value& recorder) {
    const auto made = doc_->get(recorder, "device_memory");
    if (!made) return;
    bool ok = made->kind == Kind::kList || made->kind == Kind::kTuple;
    for (const Value& v : ok ? doc_->items(*made) : std::span<const Value>{}) {
      const bool list = v.kind == Kind::kList || v.kind == Kind::kTuple;
      const std::span<const Value> f = list ? doc_->items(v) : std::span<const Value>{};
      ok = f.size() == 2 && f[0].kind == Kind::kInt && f[1].kind == Kind::kInt && f[0].i >= 0 &&
           f[1].i > 0;
      if (!ok) break;
      device_memory_.emplace_back(static_cast<int>(f[0].i), static_cast<uint64_t>(f[1].i));
    }
    if (!ok) {
      device_memory_.clear();
      trace_.warnings.push_back(source_ +
                                ": 'allocsim_recorder' 'device_memory' is not a list of "
                                "[device, bytes]: left out, so the device's size is not known");
    }
  }

  // A snapshot without allocator_settings (PyTorch before 2.5) still shows expandable segments:
  // segments marked is_expandable, segment_map events. The process's setting, so the evidence of
  // any device sets it for all; said in a warning, as the other settings are taken as defaults.
  void infer_settings(std::vector<Trace>& traces) const {
    if (doc_->get(doc_->root, "allocator_settings")) return;
    bool expandable = false;
    for (const Trace& t : traces) {
      for (const SnapshotSegment& s : t.segments) expandable = expandable || s.expandable;
      for (const TraceEvent& e : t.events) {
        expandable = expandable || e.action == TraceAction::kSegmentMap ||
                     e.action == TraceAction::kSegmentUnmap;
      }
    }
    if (!expandable) return;
    for (Trace& t : traces) {
      t.settings = AllocConf{};
      t.settings->expandable_segments = true;
      t.warnings.push_back(source_ +
                           ": no allocator_settings (PyTorch before 2.5): expandable_segments:True "
                           "inferred from the recorded segments (is_expandable, segment_map); "
                           "the other settings taken as the defaults");
    }
  }

  // A PyTorch trace whose segments contradict its final allocator_settings: expandable segments
  // (segment_map entries, is_expandable segments) under expandable_segments:False, or ordinary
  // segments that are not expandable under True. The settings were changed while it ran
  // (_set_allocator_settings); the trace does not say where, which allocsim's recorder does.
  void warn_of_settings_changed(Trace& t) const {
    if (!t.settings || start_settings_) return;
    uint64_t expandable = 0, ordinary = 0;
    for (const SnapshotSegment& s : t.segments) {
      if (s.expandable) {
        ++expandable;
      } else if (s.pool.ordinary()) {
        ++ordinary;
      }
    }
    for (const TraceEvent& e : t.events) {
      if (e.action == TraceAction::kSegmentMap || e.action == TraceAction::kSegmentUnmap)
        ++expandable;
    }
    const bool on = t.settings->expandable_segments;
    const uint64_t against = on ? ordinary : expandable;
    if (against == 0) return;
    t.warnings.push_back(
        source_ + ": device_traces[" + std::to_string(t.device) +
        "]: the allocator settings "
        "changed during the run: the snapshot's allocator_settings say expandable_segments:" +
        (on ? "True, yet " + std::to_string(against) +
                  " segment(s) of the ordinary pools are not "
                  "expandable"
            : "False, yet " + std::to_string(against) +
                  " expandable segment(s) or segment_map/segment_unmap entries are there") +
        "; a PyTorch trace does not say where they changed, so the replay runs the final "
        "settings from the start (recording through allocsim.torch.record_memory_history makes "
        "each change where it was made)");
  }

  // Short, and of printable ASCII: fit to quote in a one-line message.
  static bool printable(std::string_view s) {
    return s.size() <= 40 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= ' ' && c <= '~'; });
  }

  // Events whose action no PyTorch writes: one warning line, with the count and the first.
  void warn_of_unknown_actions(Trace& t) const {
    if (!unknown_action_met_) return;  // none met: no need to look
    uint64_t count = 0, first = 0;
    for (uint64_t i = 0; i < t.events.size(); ++i) {
      if (t.events[i].action != TraceAction::kUnknown) continue;
      if (count++ == 0) first = i;
    }
    if (count == 0) return;
    t.warnings.push_back(
        source_ + ": device_traces[" + std::to_string(t.device) + "]: " + std::to_string(count) +
        " event(s) with an action no PyTorch writes (" +
        (printable(first_unknown_action_) ? "'" + first_unknown_action_ + "'"
                                          : "an unprintable string") +
        " or another), the first at event " + std::to_string(first) + ": not replayed");
  }

  // What torch.cuda.memory_snapshot() returns: the segments alone, no history, each naming its
  // device. The state is reported, device by device; there is nothing to replay.
  std::vector<Trace> state_only() {
    std::vector<SnapshotSegment> segments;
    std::vector<int> segment_device;
    read_segments(doc_->root, segments, segment_device, 0,
                  "the top-level list (torch.cuda.memory_snapshot()'s segments)");
    trace_.warnings.push_back(source_ +
                              ": a list of segments (torch.cuda.memory_snapshot()) without a "
                              "history: the state it holds is reported, nothing is replayed");
    std::vector<int> devices = segment_device;
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    if (devices.empty()) devices.push_back(0);
    std::vector<Trace> out;
    for (const int d : devices) {
      Trace t = trace_;
      t.device = d;
      for (size_t i = 0; i < segments.size(); ++i) {
        if (segment_device[i] == d) t.segments.push_back(segments[i]);
      }
      infer_private_pools(t);  // no requests: the segments' pools, to restore them into
      out.push_back(std::move(t));
    }
    abandon_feed();
    return out;
  }

  // The keys of an event dict. Pickle memoizes repeated strings, so each distinct key string is
  // classified once (by its string index) rather than compared on every event.
  enum class Key : uint8_t {
    kUnseen,
    kAction,
    kAddr,
    kSize,
    kStream,
    kTimeUs,
    kFrames,
    kDeviceFree,
    kUserMetadata,
    kPoolId,   // PyTorch 2.12 on: the pool the entry's memory belongs to
    kIgnored,  // an event key allocsim does not use
    kForeign,  // not an event key: the dict is not an event
  };
  static constexpr size_t kKeyKinds = static_cast<size_t>(Key::kForeign) + 1;
  // The keys whose values an event reads, in the order they are read.
  static constexpr Key kFieldKeys[] = {Key::kAction, Key::kAddr,         Key::kSize,
                                       Key::kStream, Key::kTimeUs,       Key::kDeviceFree,
                                       Key::kFrames, Key::kUserMetadata, Key::kPoolId};
  static constexpr size_t kMaxEventKeys = 11;

  Key key_of(const Value& key) {
    if (key.kind != Kind::kString) return Key::kForeign;
    if (key.ref >= key_by_string_.size()) {
      key_by_string_.resize(std::max<size_t>(key.ref + 1, 2 * key_by_string_.size()), Key::kUnseen);
    }
    Key& k = key_by_string_[key.ref];
    if (k == Key::kUnseen) {
      static const std::pair<std::string_view, Key> kKeys[] = {
          {"action", Key::kAction},
          {"addr", Key::kAddr},
          {"size", Key::kSize},
          {"stream", Key::kStream},
          {"time_us", Key::kTimeUs},
          {"frames", Key::kFrames},
          {"device_free", Key::kDeviceFree},
          {"compile_context", Key::kIgnored},
          {"user_metadata", Key::kUserMetadata},
          {"pool_id", Key::kPoolId},
          {"forward_frames", Key::kIgnored}};
      k = Key::kForeign;
      for (const auto& [name, id] : kKeys) {
        if (doc_->str(key) == name) k = id;
      }
    }
    return k;
  }

  // An event dict's keys, classified. A snapshot's events share their key strings, in the same
  // order (pickle memoizes them): while they match the last event's, its layout is reused.
  struct KeyLayout {
    std::vector<uint32_t> refs;  // string index of each key (UINT32_MAX: not a string)
    std::vector<Key> keys;
    // Where each field's value is in the items (-1: absent), when every key is an event key and
    // none repeats; then the fields are read straight from there.
    bool direct = false;
    std::array<int32_t, kKeyKinds> value_at{};
  };

  const KeyLayout& layout_of(std::span<const Value> kv) {
    KeyLayout& l = layout_;
    const size_t n = kv.size() / 2;
    bool same = n == l.refs.size();
    for (size_t k = 0; same && k < n; ++k) {
      same = kv[2 * k].kind == Kind::kString && kv[2 * k].ref == l.refs[k];
    }
    if (same) return l;
    l.refs.resize(n);
    l.keys.resize(n);
    l.value_at.fill(-1);
    l.direct = true;
    for (size_t k = 0; k < n; ++k) {
      // A key that is not a string never matches (no string has this index).
      l.refs[k] = kv[2 * k].kind == Kind::kString ? kv[2 * k].ref : UINT32_MAX;
      const Key key = l.keys[k] = key_of(kv[2 * k]);
      int32_t& at = l.value_at[static_cast<size_t>(key)];
      if (key == Key::kForeign || (at >= 0 && key != Key::kIgnored && key != Key::kUnseen))
        l.direct = false;  // read in order: a repeated key's last value wins, as in Python
      at = static_cast<int32_t>(2 * k + 1);
    }
    return l;
  }

  // The mark a user_metadata string makes (kNoMark for any other string): parsed once per string.
  uint32_t mark_of(const Value& v) {
    if (v.ref >= mark_by_string_.size()) {
      mark_by_string_.resize(std::max<size_t>(v.ref + 1, 2 * mark_by_string_.size()), kMarkUnseen);
    }
    uint32_t& m = mark_by_string_[v.ref];
    if (m == kMarkUnseen) {
      m = kNoMark;
      if (std::optional<RecorderMark> mark = parse_recorder_mark(doc_->str(v))) {
        mark_table_.push_back(std::move(*mark));
        m = static_cast<uint32_t>(mark_table_.size() - 1);
      }
    }
    return m;
  }

  // The text an "annotate" entry attaches (its user_metadata).
  std::string annotation_text() const {
    return metadata_ ? std::string(doc_->str(*metadata_)) : std::string();
  }

  // The mark of an entry whose pool_id (PyTorch 2.12 on) names a private pool: the pool PyTorch
  // says, whatever the recorder's metadata says, with the rest of that metadata's mark.
  uint32_t mark_with_pool(uint32_t mark, MempoolId pool) {
    const auto key = std::tuple{mark, pool.first, pool.second};
    if (const auto it = mark_with_pool_.find(key); it != mark_with_pool_.end()) return it->second;
    RecorderMark m = mark == kNoMark ? RecorderMark{} : mark_table_[mark];
    m.capture_pool = pool;
    mark_table_.push_back(std::move(m));
    const auto index = static_cast<uint32_t>(mark_table_.size() - 1);
    mark_with_pool_.emplace(key, index);
    return index;
  }

  // The calls from `first` on, made between the entries of marks `before` and `now`, in the order
  // the recorder's recent kinds say, where they name them all; else the one it made last goes
  // last. Returns whether their order is unknown where it matters: a stats reset beside a call of
  // another kind, before the last one.
  static bool order_new_calls(std::vector<RecordedCall>& calls, size_t first, int device,
                              const RecorderMark& before, const RecorderMark& now) {
    if (before.calls && now.calls && *now.calls >= *before.calls &&
        *now.calls - *before.calls <= now.recent.size()) {
      const std::span<const RecorderMark::RecentCall> recent(now.recent);
      order_calls(calls, first, device, recent.last(*now.calls - *before.calls));
      return false;
    }
    const auto begin = calls.begin() + static_cast<std::ptrdiff_t>(first);
    if (now.last_call) {
      std::stable_partition(begin, calls.end(),
                            [&](const RecordedCall& c) { return c.kind != *now.last_call; });
    }
    const auto end = calls.end() - (now.last_call && begin != calls.end() ? 1 : 0);
    auto is_reset = [](const RecordedCall& c) {
      return c.kind == RecordedCall::kResetPeakStats ||
             c.kind == RecordedCall::kResetAccumulatedStats;
    };
    return begin < end && std::any_of(begin, end, is_reset) &&
           std::any_of(begin, end, [&](const RecordedCall& c) { return c.kind != begin->kind; });
  }

  // The calls from `first` on (those between two entries, of `device`'s trace) in the order of
  // `kinds` (RecorderMark::recent; another device's calls left out), each at its own event or,
  // where one before it in that order came later, at that one's (a reset made after an
  // empty_cache() is made after its releases). Calls the kinds do not name (a fraction set again
  // to its value makes none) keep their order, after those it names.
  static void order_calls(std::vector<RecordedCall>& calls, size_t first, int device,
                          std::span<const RecorderMark::RecentCall> kinds) {
    std::vector<RecordedCall> fresh(calls.begin() + static_cast<std::ptrdiff_t>(first),
                                    calls.end());
    calls.resize(first);
    std::vector<bool> taken(fresh.size(), false);
    uint64_t at = 0;
    auto take = [&](size_t i) {
      taken[i] = true;
      at = std::max(at, fresh[i].event);
      calls.push_back(fresh[i]);
      calls.back().event = at;
    };
    for (const RecorderMark::RecentCall& call : kinds) {
      if (call.device && *call.device != device) continue;
      for (size_t i = 0; i < fresh.size(); ++i) {
        if (!taken[i] && fresh[i].kind == call.kind) {
          take(i);
          break;
        }
      }
    }
    for (size_t i = 0; i < fresh.size(); ++i) {
      if (!taken[i]) take(i);
    }
  }

  // The private pool a mark routes `device`'s requests to, if any: a use_mem_pool block of
  // another device leaves them the route after it.
  static std::optional<MempoolId> route_of(const RecorderMark& mark, int device) {
    const bool other_device = mark.mem_pool_device && *mark.mem_pool_device != device;
    return other_device ? mark.other_devices_pool : mark.capture_pool;
  }

  // What take_marks carries from one marked event to the next, and counts for its warnings.
  struct MarkWalk {
    const RecorderMark* last = nullptr;  // the last marked event's mark taken, if any
    DeviceCallCounts before;             // its counts for the trace's device
    uint64_t settings_base = 0;          // the settings changes made before the history's start
    uint64_t pools_freed_unknown = 0, calls_order_unknown = 0, settings_unknown = 0;
  };

  // The string of the recorder's n-th settings change (counted from the run's start), if the
  // snapshot holds it.
  const std::string* settings_string(MarkWalk& w, uint64_t n) const {
    if (n < w.settings_base || n - w.settings_base >= settings_strings_.size()) {
      ++w.settings_unknown;
      return nullptr;
    }
    return &settings_strings_[n - w.settings_base];
  }

  // empty_cache() first completes the frees still waiting for other streams, then gives the
  // cached segments back: where it gave any, the call is made at that run of releases (the
  // replay's own empty_cache() completes the waiting frees too).
  static uint64_t empty_cache_at(const Trace& t, uint64_t e) {
    uint64_t at = e;
    while (at < t.events.size() && t.events[at].action == TraceAction::kFreeCompleted) ++at;
    const bool releases =
        at < t.events.size() && (t.events[at].action == TraceAction::kSegmentFree ||
                                 t.events[at].action == TraceAction::kSegmentUnmap);
    return releases ? at : e;
  }

  // The trace's start, where the recorder marked it: the settings it began with, and where the
  // history kept all it recorded (fewer entries than its bound), the counts at its start and the
  // cap the run began with.
  void take_start_mark(Trace& t, MarkWalk& w, bool marked) const {
    w.settings_base = start_mark_ ? start_mark_->settings : 0;
    if (marked && start_settings_) {
      t.settings = *start_settings_;
      t.settings_changes = settings_strings_;
    }
    if (marked && start_mark_ && history_bound_ && t.events.size() < *history_bound_) {
      w.last = &*start_mark_;
      w.before = start_mark_->of_device(t.device);
      t.calls_marked_from = 0;
      if (w.before.memory_fraction) {
        RecordedCall cap{0, RecordedCall::kSetMemoryFraction, *w.before.memory_fraction};
        cap.starting_cap = true;
        t.recorded_calls.push_back(cap);
      }
    }
  }

  // The first marked event of a history that starts mid-run: the counts so far are the baseline,
  // and the settings strings set before it change the settings the history starts with.
  void take_first_mark(Trace& t, MarkWalk& w, const RecorderMark& mark, uint64_t event) const {
    t.calls_marked_from = event;
    for (uint64_t n = w.settings_base; start_settings_ && n < mark.settings; ++n) {
      if (const std::string* text = settings_string(w, n)) {
        try {
          t.settings = change_alloc_conf(*t.settings, *text, kNewestTorchVersion);
        } catch (const AllocConfError&) {
          // PyTorch refused it too: the run's settings stayed as they were
        }
      }
    }
  }

  // The calls the recorder counted between the last marked event and this one (at `event`).
  void take_calls_between(Trace& t, MarkWalk& w, const RecorderMark& mark,
                          const DeviceCallCounts& now, uint64_t event, bool routed) const {
    const RecorderMark& last = *w.last;
    const DeviceCallCounts& before = w.before;
    auto since = [](uint64_t now_count, uint64_t then) {
      return now_count > then ? now_count - then : 0;
    };
    // Between two entries a private pool took, the call came while it did (PyTorch's
    // captures_underway not empty): no synchronisation, no release of the ordinary pools.
    // Where the recorder counted those made inside a pool's block, the last of them were
    // (a block that ends right after its call leaves no marked entry after it).
    // A recorder that writes its MemPools' options counts every call made inside a block
    // (empty_cache_in_pool): the count alone tells, where a capture or block can end and another
    // begin between two routed entries, with calls outside both.
    const bool during_capture = !counts_calls_in_pools_ && routed && route_of(last, t.device);
    const uint64_t in_pool = since(now.empty_cache_in_pool, before.empty_cache_in_pool);
    for (uint64_t k = since(mark.empty_cache, last.empty_cache); k > 0; --k)
      t.recorded_calls.push_back({empty_cache_at(t, event),
                                  RecordedCall::kEmptyCache,
                                  0,
                                  {},
                                  during_capture || k <= in_pool});
    for (uint64_t n = last.pools_freed; n < mark.pools_freed; ++n) {
      // freed_pools lists the deletions from the history's start on.
      const uint64_t base = start_mark_ ? start_mark_->pools_freed : 0;
      if (n < base || n - base >= freed_pools_.size()) {
        ++w.pools_freed_unknown;
        continue;
      }
      // Its destructor releases it on the device it was made on; the others have no such
      // pool (where the recorder did not write the device, every device is asked).
      const FreedPool& freed = freed_pools_[n - base];
      if (freed.device && *freed.device != t.device) continue;
      t.recorded_calls.push_back(
          {empty_cache_at(t, event), RecordedCall::kFreeMemPool, 0, freed.id});
    }
    for (uint64_t n = last.settings; n < mark.settings; ++n) {
      if (!settings_string(w, n)) continue;
      RecordedCall call{event, RecordedCall::kSetAllocatorSettings};
      call.settings = static_cast<uint32_t>(n - w.settings_base);
      t.recorded_calls.push_back(call);
    }
    auto add = [&](RecordedCall::Kind kind, uint64_t times) {
      for (uint64_t k = 0; k < times; ++k) t.recorded_calls.push_back({event, kind, 0});
    };
    add(RecordedCall::kResetAccumulatedStats,
        since(now.reset_accumulated, before.reset_accumulated));
    add(RecordedCall::kResetPeakStats, since(now.reset_peak, before.reset_peak));
  }

  // The warnings for what the walk over the marks could not make as recorded.
  void warn_marks(Trace& t, const MarkWalk& w) const {
    if (w.calls_order_unknown > 0) {
      t.warnings.push_back(
          source_ + ": " + std::to_string(w.calls_order_unknown) +
          " time(s) a stats reset and a call of another kind came between two trace entries in "
          "an order the recorder did not write (a recorder before 'calls'/'recent'): made in a "
          "fixed order, so the reset statistics may differ");
    }
    if (w.settings_unknown > 0) {
      t.warnings.push_back(source_ + ": " + std::to_string(w.settings_unknown) +
                           " allocator settings change(s) counted by the recorder name no string "
                           "(the snapshot has no 'allocsim_recorder' 'settings' for them): not "
                           "made, so the replay keeps the settings in force before them");
    }
    if (w.pools_freed_unknown > 0) {
      t.warnings.push_back(source_ + ": " + std::to_string(w.pools_freed_unknown) +
                           " torch.cuda.MemPool deletion(s) counted by the recorder name no pool "
                           "(the snapshot has no 'allocsim_recorder' 'freed_pools' for them): "
                           "not made, so those pools keep their segments");
    }
  }

  // A device's marked events (event, index into mark_table_) into its trace: the capture marks,
  // and the calls the recorder counted between one marked event and the next (where several
  // came between two entries, in this order: the fraction, empty_cache, the resets).
  void take_marks(Trace& t, const std::vector<std::pair<uint64_t, uint32_t>>& marks) const {
    MarkWalk w;
    // The snapshot's own marks, where the recorder marked the trace: its start, before every
    // event (where the history kept all it recorded: fewer entries than its bound), and its end,
    // after every event.
    const bool marked = std::any_of(marks.begin(), marks.end(), [&](const auto& m) {
      return mark_table_[m.second].marks_every_call;
    });
    take_start_mark(t, w, marked);
    const bool with_end = marked && end_mark_;
    for (size_t k = 0; k < marks.size() + (with_end ? 1 : 0); ++k) {
      const uint64_t event = k < marks.size() ? marks[k].first : t.events.size();
      const RecorderMark& mark = k < marks.size() ? mark_table_[marks[k].second] : *end_mark_;
      // A use_mem_pool block of another device: its requests take the route after it, if any.
      const std::optional<MempoolId> pool = route_of(mark, t.device);
      const bool other_device = mark.mem_pool_device && *mark.mem_pool_device != t.device;
      if (pool) t.capture_marks.emplace_back(event, *pool);
      if (mark.mem_pool && !other_device &&
          std::find(t.mem_pools.begin(), t.mem_pools.end(), *pool) == t.mem_pools.end()) {
        t.mem_pools.push_back(*pool);
      }
      if (!mark.marks_every_call) continue;
      const DeviceCallCounts now = mark.of_device(t.device);
      const size_t first_new = t.recorded_calls.size();
      if (now.memory_fraction && (!w.last || now.memory_fraction != w.before.memory_fraction)) {
        t.recorded_calls.push_back({event, RecordedCall::kSetMemoryFraction, *now.memory_fraction});
        t.recorded_calls.back().starting_cap = !w.last;
      }
      if (!w.last) {
        take_first_mark(t, w, mark, event);
      } else {
        take_calls_between(t, w, mark, now, event, pool.has_value());
        if (order_new_calls(t.recorded_calls, first_new, t.device, *w.last, mark))
          ++w.calls_order_unknown;
      }
      w.last = &mark;
      w.before = now;
    }
    warn_marks(t, w);
    std::stable_sort(
        t.recorded_calls.begin(), t.recorded_calls.end(),
        [](const RecordedCall& a, const RecordedCall& b) { return a.event < b.event; });
  }

  // An action string's action: looked up by string index, parsed the first time it is met.
  TraceAction action_of(const Value& v) {
    if (v.ref < action_by_string_.size()) [[likely]] {
      if (const std::optional<TraceAction> a = action_by_string_[v.ref]) return *a;
    }
    return first_action_of(v);
  }

  __attribute__((noinline)) TraceAction first_action_of(const Value& v) {
    if (v.ref >= action_by_string_.size()) {
      action_by_string_.resize(std::max<size_t>(v.ref + 1, 2 * action_by_string_.size()),
                               std::nullopt);
    }
    auto& a = action_by_string_[v.ref];
    if (!a) {
      a = parse_action(doc_->str(v));
      if (*a == TraceAction::kUnknown && !unknown_action_met_) {
        unknown_action_met_ = true;
        first_unknown_action_ = doc_->str(v);
      }
    }
    return *a;
  }

  // One field of an event. A bad value throws InputError with `where`, and is false without it.
  // Inlined into both loops: in the direct one, over the constant kFieldKeys, each call's switch
  // folds away.
  __attribute__((always_inline)) bool read_field(
      Key key, const Value& v, TraceEvent& ev, bool& has_action, Trace& trace,
      const std::function<std::string(const char*)>* where) {
    auto bad = [&](const char* name, const char* expected) {
      if (where) fail((*where)(name), expected, v);
      return false;
    };
    switch (key) {
      case Key::kAction:
        if (v.kind != Kind::kString) return bad("action", "a str");
        ev.action = action_of(v);
        has_action = true;
        break;
      case Key::kAddr:
        if (v.kind == Kind::kInt)
          ev.addr = static_cast<uint64_t>(v.i);
        else if (v.kind != Kind::kNone)
          return bad("addr", "an int");
        break;
      case Key::kSize:
        if (v.kind != Kind::kInt || v.i < 0) return bad("size", "a non-negative int");
        ev.size = static_cast<uint64_t>(v.i);
        break;
      case Key::kStream:
        if (v.kind != Kind::kInt) return bad("stream", "an int");
        ev.stream = static_cast<StreamId>(v.i);
        break;
      case Key::kTimeUs:
        if (v.kind == Kind::kInt && v.i > 0) ev.time_us = static_cast<uint64_t>(v.i);
        break;
      case Key::kDeviceFree:
        if (v.kind == Kind::kInt) ev.device_free = static_cast<uint64_t>(v.i);
        break;
      case Key::kUserMetadata:
        if (v.kind == Kind::kString) {
          mark_ = mark_of(v);
          metadata_ = &v;
        }
        break;
      case Key::kPoolId: {
        saw_pool_id_ = true;
        if (v.kind != Kind::kTuple && v.kind != Kind::kList) return bad("pool_id", "a tuple");
        const auto ids = doc_->items(v);
        if (ids.size() != 2 || ids[0].kind != Kind::kInt || ids[1].kind != Kind::kInt)
          return bad("pool_id", "a tuple of two ints");
        const MempoolId id{static_cast<uint64_t>(ids[0].i), static_cast<uint64_t>(ids[1].i)};
        if (!id.ordinary()) pool_ = id;
        break;
      }
      case Key::kFrames: {
        const auto stack = read_stack(v, where, trace);
        if (!stack) return false;
        ev.stack = *stack;
        break;
      }
      case Key::kForeign:
        return where != nullptr;  // without where, the document keeps the dict for run()
      case Key::kIgnored:
      case Key::kUnseen:
        break;
    }
    return true;
  }

  // One event dict's fields. With `where` (naming the event) a bad field throws InputError;
  // without it, parse_event says false instead (and for a dict with keys no event has).
  bool parse_event(std::span<const Value> kv, TraceEvent& ev, Trace& trace,
                   const std::function<std::string(const char*)>* where) {
    ev = TraceEvent{};
    mark_ = kNoMark;
    metadata_ = nullptr;
    pool_.reset();
    bool has_action = false;
    const KeyLayout& layout = layout_of(kv);
    if (layout.direct && !where) {  // with where, in dict order: the first bad field is named
#pragma GCC unroll 8
      for (const Key key : kFieldKeys) {
        const int32_t at = layout.value_at[static_cast<size_t>(key)];
        if (at >= 0 && !read_field(key, kv[static_cast<size_t>(at)], ev, has_action, trace, where))
          return false;
      }
    } else {
      for (size_t k = 0; k < layout.keys.size(); ++k) {
        if (layout.keys[k] == Key::kForeign && where) [[unlikely]]
          note_unknown(unknown_entry_keys_, kv[2 * k]);
        if (!read_field(layout.keys[k], kv[2 * k + 1], ev, has_action, trace, where)) return false;
      }
    }
    if (!has_action) {
      if (where) throw InputError(source_ + ": " + (*where)(nullptr) + ": missing 'action'");
      return false;
    }
    if (pool_) mark_ = mark_with_pool(mark_, *pool_);
    if (ev.action == TraceAction::kOom && ev.addr != 0 && ev.device_free == 0) {
      ev.device_free = ev.addr;  // older snapshots keep device_free in the addr slot
    }
    if (ev.action == TraceAction::kOom) ev.addr = 0;
    return true;
  }

  // Each segment with its device (its 'device', else `default_device`).
  void read_segments(const Value& list, std::vector<SnapshotSegment>& out,
                     std::vector<int>& device_of, int default_device,
                     const std::string& name = "segments") {
    if (list.kind != Kind::kList) fail("segments", "a list", list);
    const auto& segments = doc_->items(list);
    for (size_t i = 0; i < segments.size(); ++i) {
      const std::string where = name + "[" + std::to_string(i) + "]";
      const Value& s = segments[i];
      if (s.kind != Kind::kDict) fail(where, "a dict", s);
      SnapshotSegment seg{static_cast<uint64_t>(int_field(s, "address", where)),
                          static_cast<uint64_t>(int_field(s, "total_size", where)),
                          static_cast<StreamId>(int_field(s, "stream", where)),
                          false,
                          false,
                          {}};
      if (const auto type = doc_->get(s, "segment_type"); type && type->kind == Kind::kString) {
        seg.small = doc_->str(*type) == "small";
      }
      if (const auto e = doc_->get(s, "is_expandable"); e && e->kind == Kind::kBool)
        seg.expandable = e->i != 0;
      if (const auto pool = doc_->get(s, "segment_pool_id");
          pool && (pool->kind == Kind::kTuple || pool->kind == Kind::kList)) {
        const auto ids = doc_->items(*pool);
        if (ids.size() == 2 && ids[0].kind == Kind::kInt && ids[1].kind == Kind::kInt) {
          seg.pool = MempoolId{static_cast<uint64_t>(ids[0].i), static_cast<uint64_t>(ids[1].i)};
        }
      }
      const auto blocks = doc_->get(s, "blocks");
      if (!blocks || blocks->kind != Kind::kList)
        throw InputError(source_ + ": " + where + ": missing 'blocks' list");
      const auto& items = doc_->items(*blocks);
      uint64_t offset = 0;  // the blocks tile the segment in address order
      for (size_t j = 0; j < items.size(); ++j) {
        const std::string bw = where + " block " + std::to_string(j);
        const Value& b = items[j];
        if (b.kind != Kind::kDict) fail(bw, "a dict", b);
        const auto state = doc_->get(b, "state");
        if (!state || state->kind != Kind::kString)
          throw InputError(source_ + ": " + bw + ": missing 'state'");
        const std::string_view st = doc_->str(*state);
        const bool active = st == "active_allocated" || st == "active_pending_free";
        const auto size = static_cast<uint64_t>(int_field(b, "size", bw));
        // PyTorch 2.0 wrote neither a block's address (the segment's plus the sizes before it)
        // nor its requested size (its history's last real_size).
        const uint64_t address = doc_->get(b, "address")
                                     ? static_cast<uint64_t>(int_field(b, "address", bw))
                                     : seg.address + offset;
        const uint64_t requested = doc_->get(b, "requested_size")
                                       ? static_cast<uint64_t>(int_field(b, "requested_size", bw))
                                       : requested_from_history(b, active ? size : 0);
        seg.blocks.push_back({address, size, requested, active, st == "active_allocated"});
        offset += size;
      }
      int device = default_device;
      if (const auto d = doc_->get(s, "device"); d && d->kind == Kind::kInt) {
        if (d->i < 0 || d->i > 1023) fail(where + " 'device'", "a device index (0 to 1023)", *d);
        device = static_cast<int>(d->i);
      }
      out.push_back(std::move(seg));
      device_of.push_back(device);
    }
  }

  // A PyTorch 2.0 block's requested size: the real_size of the last entry of its history, which
  // the allocator kept for active blocks; `otherwise` where there is none.
  uint64_t requested_from_history(const Value& block, uint64_t otherwise) const {
    const auto history = doc_->get(block, "history");
    if (!history || history->kind != Kind::kList || doc_->items(*history).empty()) return otherwise;
    const auto real = doc_->get(doc_->items(*history).back(), "real_size");
    return real && real->kind == Kind::kInt && real->i >= 0 ? static_cast<uint64_t>(real->i)
                                                            : otherwise;
  }

  static TraceAction parse_action(std::string_view a) {
    if (a == "alloc") return TraceAction::kAlloc;
    if (a == "free_requested") return TraceAction::kFreeRequested;
    if (a == "free_completed") return TraceAction::kFreeCompleted;
    if (a == "segment_alloc") return TraceAction::kSegmentAlloc;
    if (a == "segment_free") return TraceAction::kSegmentFree;
    if (a == "segment_map") return TraceAction::kSegmentMap;
    if (a == "segment_unmap") return TraceAction::kSegmentUnmap;
    if (a == "oom") return TraceAction::kOom;
    if (a == "snapshot" || a == "user_defined") return TraceAction::kOther;
    if (a == "annotate") return TraceAction::kAnnotate;
    return TraceAction::kUnknown;
  }

  // The stack of an event's frames (kNoStack for none); nullopt for bad frames when `where` is
  // null (otherwise they throw).
  std::optional<uint32_t> read_stack(const Value& frames,
                                     const std::function<std::string(const char*)>* where,
                                     Trace& trace) {
    if (frames.kind == Kind::kNone) return kNoStack;
    if (frames.kind != Kind::kList) {
      if (where) fail((*where)("frames"), "a list", frames);
      return std::nullopt;
    }
    const auto list = doc_->items(frames);
    if (list.empty()) return kNoStack;
    std::vector<uint32_t> ids;
    ids.reserve(list.size());
    for (const Value& f : list) {
      if (f.kind != Kind::kDict) {
        if (where) fail((*where)(nullptr) + " frame", "a dict", f);
        return std::nullopt;
      }
      // Pickle memoizes a frame dict met before: the same dict, the same frame, looked up once.
      if (f.ref >= frame_of_dict_.size()) {
        frame_of_dict_.resize(std::max<size_t>(f.ref + 1, 2 * frame_of_dict_.size()), kNoFrame);
      }
      uint32_t& known = frame_of_dict_[f.ref];
      if (known == kNoFrame) known = frame_id(f, trace);
      ids.push_back(known);
    }
    auto [it, inserted] = stack_ids_.try_emplace(ids, static_cast<uint32_t>(trace.stacks.size()));
    if (inserted) trace.stacks.push_back(ids);
    return it->second;
  }

  uint32_t frame_id(const Value& f, Trace& trace) {
    const auto name = doc_->get(f, "name");
    const auto file = doc_->get(f, "filename");
    const auto line = doc_->get(f, "line");
    // torch.compile records 2^64-1 for a frame without a line: kept as unknown, and said.
    if (line && line->kind == Kind::kBigInt) ++unknown_lines_;
    Frame frame{name && name->kind == Kind::kString ? std::string(doc_->str(*name)) : "?",
                file && file->kind == Kind::kString ? std::string(doc_->str(*file)) : "?",
                line && line->kind == Kind::kInt ? line->i : kUnknownLine};
    auto key = std::make_tuple(frame.name, frame.filename, frame.line);
    auto [it, inserted] = frame_ids_.try_emplace(key, static_cast<uint32_t>(trace.frames.size()));
    if (inserted) trace.frames.push_back(std::move(frame));
    return it->second;
  }

  AllocConf read_settings(const Value& s) {
    if (s.kind != Kind::kDict) fail("allocator_settings", "a dict", s);
    AllocConf conf;
    // The string is what the user set; the dict is what the allocator ran with. Prefer the dict.
    if (const auto text = doc_->get(s, "PYTORCH_CUDA_ALLOC_CONF");
        text && text->kind == Kind::kString) {
      conf.source = std::string(doc_->str(*text));
      try {
        // Its PyTorch accepted it: read with every key a known release accepts.
        conf = parse_alloc_conf(conf.source, kNewestTorchVersion);
      } catch (const AllocConfError& e) {
        // The dict below still says what the allocator did, as far as allocsim reads it; what
        // the string set beyond that (a later PyTorch's key) is not modelled, and said.
        std::string why = e.pytorch_message();
        if (!why.empty() && why.back() == '.') why.pop_back();
        trace_.warnings.push_back(source_ + ": allocator_settings 'PYTORCH_CUDA_ALLOC_CONF' '" +
                                  conf.source + "' has what no release up to " +
                                  kNewestTorchVersion.to_string() + " accepts (" + why +
                                  "; a later PyTorch's setting?): replayed with the settings its "
                                  "allocator_settings name, without it");
        conf = AllocConf{};
        conf.source = std::string(doc_->str(*text));
      }
    }
    if (const auto v = doc_->get(s, "max_split_size"); v && v->kind == Kind::kInt) {
      // PyTorch refuses max_split_size_mb below 20: the allocator relies on it (a block that large
      // is never split off, so releasing one releases a whole segment).
      if (v->i >= 0 && static_cast<uint64_t>(v->i) < kLargeBuffer) {
        throw InputError(source_ +
                         ": allocator_settings 'max_split_size': expected -1 or at least " +
                         std::to_string(kLargeBuffer) + " (max_split_size_mb >= 20), found " +
                         std::to_string(v->i));
      }
      conf.max_split_size = v->i < 0 ? kNoMaxSplitSize : static_cast<uint64_t>(v->i);
    }
    if (const auto v = doc_->get(s, "garbage_collection_threshold")) {
      if (v->kind == Kind::kFloat) conf.garbage_collection_threshold = v->f;
      if (v->kind == Kind::kInt) conf.garbage_collection_threshold = static_cast<double>(v->i);
    }
    if (const auto v = doc_->get(s, "expandable_segments"); v && v->kind == Kind::kBool) {
      conf.expandable_segments = v->i != 0;
    }
    if (const auto v = doc_->get(s, "release_lock_on_cudamalloc"); v && v->kind == Kind::kBool) {
      conf.release_lock_on_cudamalloc = v->i != 0;
    }
    if (const auto v = doc_->get(s, "roundup_power2_divisions"); v && v->kind == Kind::kDict) {
      const auto& kv = doc_->items(*v);
      for (size_t k = 0; k + 1 < kv.size(); k += 2) {
        if (kv[k].kind != Kind::kString || kv[k + 1].kind != Kind::kInt) continue;
        const std::string key(doc_->str(kv[k]));
        char* end = nullptr;
        const unsigned long long mb = std::strtoull(key.c_str(), &end, 10);
        if (end == key.c_str() || mb == 0) continue;
        size_t index = 63 - static_cast<size_t>(__builtin_clzll(mb));
        if (index < conf.roundup_power2_divisions.size()) {
          conf.roundup_power2_divisions[index] = static_cast<uint64_t>(kv[k + 1].i);
        }
      }
    }
    return conf;
  }

  const pickle::Document* doc_ = nullptr;
  const std::string& source_;
  EventFeed* feed_;                 // where taken_ is published while it is decoded, if anywhere
  bool events_were_taken_ = false;  // the trace's events are taken_, moved
  Trace trace_;                     // frames and stacks grow while the decoder hands events over
  uint64_t unknown_lines_ = 0;      // frame lines beyond 64 bits
  bool unknown_action_met_ = false;
  std::string first_unknown_action_;  // the first action string no PyTorch writes
  static constexpr int kAnyDevice = -1;
  std::vector<int> annotation_device_;  // of each of trace_.annotations, or kAnyDevice
  bool saw_pool_id_ = false;            // a trace entry with pool_id (PyTorch 2.12 on)
  UnknownKeys unknown_entry_keys_;      // in the events read from the document
  static constexpr uint32_t kNotTaken = UINT32_MAX;
  std::vector<uint32_t> event_of_container_;  // taken_ index of each event dict, by container
  std::vector<TraceEvent> taken_;
  // Recorder marks (sim/trace/recorder_marks.hpp): of the event parse_event read last, of the
  // taken events (taken_ index, mark), and each distinct mark string's.
  static constexpr uint32_t kNoMark = UINT32_MAX;
  static constexpr uint32_t kMarkUnseen = UINT32_MAX - 1;
  uint32_t mark_ = kNoMark;
  std::vector<std::pair<uint64_t, uint32_t>> taken_marks_;
  std::vector<RecorderMark> mark_table_;
  std::vector<uint32_t> mark_by_string_;  // by string index: into mark_table_, or kNoMark
  std::optional<MempoolId> pool_;         // the private pool of the event parse_event read last
  std::map<std::tuple<uint32_t, uint64_t, uint64_t>, uint32_t> mark_with_pool_;
  const Value* metadata_ = nullptr;  // the user_metadata of the event parse_event read last
  std::vector<std::pair<uint64_t, std::string>> taken_annotations_;  // (taken_ index, text)
  // The snapshot's own marks (read_recorder_ends) and the bound of its history.
  std::optional<RecorderMark> start_mark_, end_mark_;
  struct FreedPool {
    MempoolId id;
    std::optional<int> device;  // the device it was made on, where the recorder wrote it
  };
  std::vector<FreedPool> freed_pools_;                        // the recorder's 'freed_pools'
  std::vector<std::pair<int, MemPoolOptions>> pool_options_;  // 'pool_options', by device
  std::vector<std::pair<int, uint64_t>> device_memory_;       // 'device_memory', by device
  // A recorder that writes 'pool_options' (and so counts empty_cache_in_pool) wrote it.
  bool counts_calls_in_pools_ = false;
  std::optional<AllocConf> start_settings_;    // the recorder's 'start_settings'
  std::vector<std::string> settings_strings_;  // the recorder's 'settings'
  std::optional<uint64_t> history_bound_;
  std::vector<Key> key_by_string_;                            // by string index
  KeyLayout layout_;                                          // the last event's keys
  std::vector<std::optional<TraceAction>> action_by_string_;  // by string index
  std::map<std::tuple<std::string, std::string, int64_t>, uint32_t> frame_ids_;
  std::map<std::vector<uint32_t>, uint32_t> stack_ids_;
  static constexpr uint32_t kNoFrame = UINT32_MAX;
  std::vector<uint32_t> frame_of_dict_;  // frame id of each frame dict (by container), once read
};

}  // namespace

std::vector<Trace> read_snapshot_devices(std::string_view pickle_bytes, const std::string& source,
                                         EventFeed* feed) {
  SnapshotConverter converter(source, pickle_bytes.size(), feed);
  pickle::Document doc;
  try {
    doc = pickle::decode(
        pickle_bytes,
        [&converter](uint32_t container, std::span<const Value> items, const pickle::Document& d) {
          return converter.take_event(container, items, d);
        });
  } catch (const pickle::PickleError& e) {
    throw InputError(source + ": " + e.what());
  }
  return converter.run(doc);
}

Trace read_snapshot_bytes(std::string_view pickle_bytes, const std::string& source,
                          EventFeed* feed) {
  std::vector<Trace> devices = read_snapshot_devices(pickle_bytes, source, feed);
  return std::move(devices.front());
}

Trace read_snapshot_file(const std::string& path) {
  const FileBytes bytes = read_file_bytes(path);
  return read_snapshot_bytes(bytes, path);
}

}  // namespace allocsim
