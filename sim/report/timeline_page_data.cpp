#include "sim/report/timeline_page_data.hpp"

#include <zlib.h>

#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/format_size.hpp"
#include "sim/report/stack_site.hpp"
#include "sim/report/timeline_series.hpp"

namespace allocsim {
namespace {

// Full stacks beyond this many bytes of frame text are left out (each event keeps its site).
constexpr size_t kMaxFrameText = size_t{1} << 20;

struct Columns {
  nlohmann::json index = nlohmann::json::array();
  std::string bytes;

  void add(const std::string& name, const std::string& column) {
    index.push_back({name, bytes.size(), column.size()});
    bytes += column;
  }
};

// "t3." (trace 3's columns), "r0." (run 0's).
std::string column_prefix(char kind, size_t k) {
  std::string prefix(1, kind);
  prefix += std::to_string(k);
  prefix += '.';
  return prefix;
}

std::string pool_text(MempoolId pool) {
  return std::to_string(pool.first) + "," + std::to_string(pool.second);
}

// The trace's events as columns, and its streams, sites and stacks in the header.
nlohmann::json encode_trace(const Trace& trace, size_t k, Columns& events) {
  std::string action, size, stream, site;
  std::map<StreamId, size_t> stream_index;
  std::map<uint32_t, size_t> stack_index;  // stack -> its place in "stacks"
  nlohmann::json streams = nlohmann::json::array(), sites = nlohmann::json::array(),
                 stacks = nlohmann::json::array();
  for (const TraceEvent& e : trace.events) {
    action.push_back(static_cast<char>(e.action));
    append_leb128(size, e.size);
    auto [s, added] = stream_index.emplace(e.stream, streams.size());
    if (added) streams.push_back(std::to_string(e.stream));
    append_leb128(stream, s->second);
    size_t place = 0;  // 0: no stack
    if (e.stack != kNoStack && e.stack < trace.stacks.size()) {
      auto [it, fresh] = stack_index.emplace(e.stack, stacks.size() + 1);
      if (fresh) {
        sites.push_back(describe_site(trace, e.stack));
        stacks.push_back(e.stack);
      }
      place = it->second;
    }
    append_leb128(site, place);
  }
  // The full stacks, frames deduplicated, unless their text is too large for a light page.
  nlohmann::json frames = nlohmann::json::array(), frame_lists = nlohmann::json::array();
  std::map<uint32_t, size_t> frame_index;
  size_t text = 0;
  for (const auto& s : stacks) {
    nlohmann::json list = nlohmann::json::array();
    for (uint32_t f : trace.stacks[s.get<uint32_t>()]) {
      if (f >= trace.frames.size()) continue;
      auto [it, fresh] = frame_index.emplace(f, frames.size());
      if (fresh) {
        frames.push_back(frame_text(trace.frames[f]));
        text += frames.back().get_ref<const std::string&>().size();
      }
      list.push_back(it->second);
    }
    frame_lists.push_back(std::move(list));
  }
  const bool with_frames = text <= kMaxFrameText;
  const std::string prefix = column_prefix('t', k);
  events.add(prefix + "action", action);
  events.add(prefix + "size", size);
  events.add(prefix + "stream", stream);
  events.add(prefix + "site", site);
  nlohmann::json actions = nlohmann::json::array();
  // (annotate, the newest, named only where the trace has any)
  const bool annotated = !trace.block_annotations.empty();
  const auto last = annotated ? TraceAction::kAnnotate : TraceAction::kUnknown;
  for (int a = 0; a <= static_cast<int>(last); ++a)
    actions.push_back(to_string(static_cast<TraceAction>(a)));
  return {{"events", trace.events.size()},
          {"actions", std::move(actions)},
          {"streams", std::move(streams)},
          {"sites", std::move(sites)},
          {"frames", with_frames ? std::move(frames) : nlohmann::json::array()},
          {"stacks", with_frames ? std::move(frame_lists) : nlohmann::json::array()},
          {"frames_left_out", !with_frames}};
}

std::string deltas(const std::vector<int64_t>& values) {
  std::string out;
  int64_t last = 0;
  for (int64_t v : values) {
    append_leb128(out, zigzag(v - last));
    last = v;
  }
  return out;
}

// A segment map: [address, size, stream, small, expandable, pool, blocks], each block
// [size, state (0 free, 1 allocated, 2 freed with stream uses outstanding), requested].
nlohmann::json encode_segments(const std::vector<SnapshotSegment>& segments) {
  nlohmann::json out = nlohmann::json::array();
  for (const SnapshotSegment& seg : segments) {
    nlohmann::json blocks = nlohmann::json::array();
    for (const SnapshotBlock& b : seg.blocks) {
      const int state = b.allocated ? 1 : b.active ? 2 : 0;
      blocks.push_back({b.size, state, state ? b.requested : 0});
    }
    out.push_back({seg.address, seg.total_size, std::to_string(seg.stream), seg.small,
                   seg.expandable, pool_text(seg.pool), std::move(blocks)});
  }
  return out;
}

nlohmann::json encode_run(const TimelineRun& run, size_t k, size_t trace_k, Columns& summary,
                          Columns& events) {
  const ReplayResult& r = *run.result;
  const TimelineSeries series = timeline_series(r);
  const std::string prefix = column_prefix('r', k);
  static constexpr const char* kNames[] = {"allocated", "active", "reserved"};
  for (size_t q = 0; q < kQuantities; ++q) events.add(prefix + kNames[q], deltas(series.values[q]));
  const std::vector<TimelineLevel> levels =
      timeline_levels(series, kTimelineLevelBase, kTimelineLevelFanout);
  nlohmann::json level_info = nlohmann::json::array();
  for (size_t l = 0; l < levels.size(); ++l) {
    for (size_t q = 0; q < kQuantities; ++q) {
      const std::string name = prefix + "L" + std::to_string(l) + "." + kNames[q];
      summary.add(name + ".min", deltas(levels[l].min[q]));
      summary.add(name + ".max", deltas(levels[l].max[q]));
    }
    level_info.push_back({{"width", levels[l].width}, {"buckets", levels[l].buckets()}});
  }
  nlohmann::json moments = nlohmann::json::array();
  for (const TimelineMoment& m : run.moments) {
    for (const SegmentMapAt& map : r.recording.segment_maps) {
      if (map.event_index != m.event_index) continue;
      moments.push_back({{"event", m.event_index},
                         {"label", m.label},
                         {"segments", encode_segments(map.segments)}});
      break;
    }
  }
  nlohmann::json oom = nullptr;
  if (r.outcome.oom) {
    const ReplayOom& o = *r.outcome.oom;
    oom = {{"event", o.event_index}, {"requested", o.requested},
           {"size", o.alloc_size},   {"largest_free_block", o.largest_free_block},
           {"recorded", o.recorded}, {"message", o.message}};
  }
  return {{"title", run.title},
          {"trace", trace_k},
          {"events", r.outcome.events_total},
          {"limit", r.setup.limit_bytes},
          {"limit_text", format_size(r.setup.limit_bytes)},
          {"stopped", r.outcome.stopped_at_oom && r.outcome.oom
                          ? nlohmann::json(r.outcome.oom->event_index)
                          : nlohmann::json(nullptr)},
          {"oom", std::move(oom)},
          {"levels", std::move(level_info)},
          {"moments", std::move(moments)}};
}

}  // namespace

void append_leb128(std::string& out, uint64_t value) {
  do {
    const uint8_t byte = value & 0x7f;
    value >>= 7;
    out.push_back(static_cast<char>(byte | (value ? 0x80 : 0)));
  } while (value);
}

uint64_t zigzag(int64_t value) {
  return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}

std::string deflate_bytes(const std::string& bytes) {
  uLongf size = compressBound(bytes.size());
  std::string out(size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(out.data()), &size,
                reinterpret_cast<const Bytef*>(bytes.data()), bytes.size(), 9) != Z_OK) {
    throw std::runtime_error("zlib could not compress the timeline's data");
  }
  out.resize(size);
  return out;
}

std::string base64(const std::string& bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t v = 0;
    for (size_t j = 0; j < 3; ++j) v = (v << 8) | (j < n ? static_cast<uint8_t>(bytes[i + j]) : 0u);
    for (size_t j = 0; j < 4; ++j)
      out.push_back(j <= n ? kAlphabet[(v >> (18 - 6 * j)) & 63] : '=');
  }
  return out;
}

namespace {

// The header's length as 4 bytes little-endian, the header, the columns it names.
std::string container(nlohmann::json header, Columns& columns) {
  header["columns"] = std::move(columns.index);
  const std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  const uint32_t length = static_cast<uint32_t>(text.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  out += text;
  out += columns.bytes;
  return out;
}

}  // namespace

TimelinePageData timeline_page_bytes(const std::vector<TimelineRun>& runs) {
  Columns summary, events;
  nlohmann::json traces = nlohmann::json::array(), encoded_runs = nlohmann::json::array();
  std::map<const Trace*, size_t> trace_index;
  for (const TimelineRun& run : runs) {
    auto [it, fresh] = trace_index.emplace(run.trace, traces.size());
    if (fresh) traces.push_back(encode_trace(*run.trace, it->second, events));
    encoded_runs.push_back(encode_run(run, encoded_runs.size(), it->second, summary, events));
  }
  const TimelineScale scale = timeline_scale(runs);
  const nlohmann::json header = {{"format", 1},
                                 {"events", timeline_events(runs)},
                                 {"data_max", scale.data_max},
                                 {"level_base", kTimelineLevelBase},
                                 {"level_fanout", kTimelineLevelFanout},
                                 {"traces", std::move(traces)},
                                 {"runs", std::move(encoded_runs)}};
  return {container(header, summary), container(nlohmann::json::object(), events)};
}

TimelinePageData timeline_page_data(const std::vector<TimelineRun>& runs) {
  TimelinePageData data = timeline_page_bytes(runs);
  data.summary = base64(deflate_bytes(data.summary));
  data.events = base64(deflate_bytes(data.events));
  return data;
}

}  // namespace allocsim
