// The timeline's parts: the byte axis at every scale, the per-event series and their summary
// levels, the moments kept, and the page's encoded data read back.
#include <gtest/gtest.h>
#include <zlib.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/replay/replay.hpp"
#include "sim/report/axis_ticks.hpp"
#include "sim/report/timeline_html.hpp"
#include "sim/report/timeline_moments.hpp"
#include "sim/report/timeline_page_data.hpp"
#include "sim/report/timeline_run.hpp"
#include "sim/report/timeline_series.hpp"
#include "sim/report/timeline_svg.hpp"
#include "sim/trace/snapshot_reader.hpp"

namespace allocsim {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30, kMiB = uint64_t{1} << 20;

void expect_readable(const ByteAxis& axis, uint64_t largest) {
  SCOPED_TRACE("largest " + std::to_string(largest));
  if (largest >= 8) {
    EXPECT_GE(axis.ticks.size(), 5u);
  }
  EXPECT_LE(axis.ticks.size(), 7u);
  EXPECT_GE(axis.top, largest);
  EXPECT_LT(axis.top - largest, axis.step);  // no empty interval at the top
  ASSERT_EQ(axis.ticks.size(), axis.labels.size());
  EXPECT_EQ(axis.ticks.front(), 0u);
  EXPECT_EQ(axis.ticks.back(), axis.top);
  for (size_t i = 1; i < axis.ticks.size(); ++i)
    EXPECT_EQ(axis.ticks[i] - axis.ticks[i - 1], axis.step);
  EXPECT_EQ(std::set<std::string>(axis.labels.begin(), axis.labels.end()).size(),
            axis.labels.size());
  for (const std::string& label : axis.labels) EXPECT_LE(label.size(), 10u) << label;
}

TEST(ByteAxis, RoundTicksAtEveryScale) {
  EXPECT_EQ(byte_axis(1825361100).labels,  // 1.7 GiB
            (std::vector<std::string>{"0", "0.5 GiB", "1 GiB", "1.5 GiB", "2 GiB"}));
  EXPECT_EQ(byte_axis(10500000000).labels,  // 9.78 GiB
            (std::vector<std::string>{"0", "2 GiB", "4 GiB", "6 GiB", "8 GiB", "10 GiB"}));
  EXPECT_EQ(byte_axis(80 * kGiB).labels,
            (std::vector<std::string>{"0", "20 GiB", "40 GiB", "60 GiB", "80 GiB"}));
  EXPECT_EQ(
      byte_axis(3 * kMiB).labels,
      (std::vector<std::string>{"0", "0.5 MiB", "1 MiB", "1.5 MiB", "2 MiB", "2.5 MiB", "3 MiB"}));
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const uint64_t largest = std::max<uint64_t>(1, rng() >> (12 + rng() % 52));  // to 4 PiB
    expect_readable(byte_axis(largest), largest);
  }
  for (uint64_t largest : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{1023}, uint64_t{1024},
                           kGiB - 1, kGiB, kGiB + 1, uint64_t{1} << 50}) {
    expect_readable(byte_axis(largest), std::max<uint64_t>(largest, 1));
  }
}

// A run with the given timeline points (event, allocated, active, reserved) and limit.
ReplayResult run_with(uint64_t events, std::vector<TimelinePoint> points, uint64_t limit) {
  ReplayResult r;
  r.outcome.events_total = events;
  r.setup.limit_bytes = limit;
  r.recording.timeline = std::move(points);
  return r;
}

std::vector<TimelineRun> one_run(const char* title, const ReplayResult& r) {
  TimelineRun run;
  run.title = title;
  run.result = &r;
  return {run};
}

TEST(TimelineScale, TheLimitIsInViewOnlyNearTheData) {
  const ReplayResult far = run_with(10, {{3, kGiB, kGiB, 2 * kGiB}}, 79 * kGiB);
  const ReplayResult near = run_with(10, {{3, 8 * kGiB, 8 * kGiB, 9 * kGiB}}, 10 * kGiB);
  const ReplayResult at = run_with(10, {{3, 9 * kGiB, 9 * kGiB, 10 * kGiB}}, 10 * kGiB);
  const TimelineScale below = timeline_scale(one_run("far", far));
  EXPECT_EQ(below.axis.top, 2 * kGiB);
  EXPECT_FALSE(limit_in_view(below, far.setup.limit_bytes));
  const TimelineScale close = timeline_scale(one_run("near", near));
  EXPECT_EQ(close.axis.top, 10 * kGiB);
  EXPECT_TRUE(limit_in_view(close, near.setup.limit_bytes));
  EXPECT_TRUE(limit_in_view(timeline_scale(one_run("at", at)), at.setup.limit_bytes));
  // The SVG: an arrow for the far limit, a line for the near one; ticks from the axis.
  const std::string svg_far = timeline_svg(one_run("far", far));
  EXPECT_NE(svg_far.find("limit-above"), std::string::npos);
  EXPECT_NE(svg_far.find(">2 GiB</text>"), std::string::npos);
  EXPECT_EQ(svg_far.find(">80 GiB</text>"), std::string::npos);
  const std::string svg_near = timeline_svg(one_run("near", near));
  EXPECT_EQ(svg_near.find("limit-above"), std::string::npos);
  EXPECT_NE(svg_near.find("limit 10.00 GiB"), std::string::npos);
}

TEST(TimelineSeries, EveryEventCarriesTheValueAfterTheLastRequestUpToIt) {
  const ReplayResult r =
      run_with(6, {{1, 10, 11, 20}, {2, 30, 31, 40}, {2, 5, 6, 40}, {4, 0, 0, 40}}, 0);
  const TimelineSeries s = timeline_series(r);
  EXPECT_EQ(s.values[kAllocated], (std::vector<int64_t>{0, 10, 5, 5, 0, 0}));
  EXPECT_EQ(s.values[kActive], (std::vector<int64_t>{0, 11, 6, 6, 0, 0}));
  EXPECT_EQ(s.values[kReserved], (std::vector<int64_t>{0, 20, 40, 40, 40, 40}));
}

TEST(TimelineLevels, EachBucketHoldsTheMinimumAndMaximumOfItsEvents) {
  std::mt19937_64 rng(3);
  for (uint64_t events :
       {uint64_t{1}, uint64_t{64}, uint64_t{65}, uint64_t{1000}, uint64_t{40000}}) {
    TimelineSeries s;
    for (auto& v : s.values) {
      for (uint64_t i = 0; i < events; ++i) v.push_back(static_cast<int64_t>(rng() % 1000));
    }
    const std::vector<TimelineLevel> levels = timeline_levels(s, 64, 8);
    if (events <= 64) {
      EXPECT_TRUE(levels.empty());
      continue;
    }
    ASSERT_FALSE(levels.empty());
    EXPECT_EQ(levels.back().buckets(), 1u);
    for (size_t l = 0; l < levels.size(); ++l) {
      const TimelineLevel& level = levels[l];
      EXPECT_EQ(level.width, 64 * static_cast<uint64_t>(std::pow(8, l)));
      EXPECT_EQ(level.buckets(), (events + level.width - 1) / level.width);
      for (size_t q = 0; q < kQuantities; ++q) {
        for (size_t b = 0; b < level.buckets(); ++b) {
          int64_t lo = INT64_MAX, hi = INT64_MIN;
          for (uint64_t i = b * level.width; i < std::min(events, (b + 1) * level.width); ++i) {
            lo = std::min(lo, s.values[q][i]);
            hi = std::max(hi, s.values[q][i]);
          }
          ASSERT_EQ(level.min[q][b], lo) << "level " << l << " bucket " << b;
          ASSERT_EQ(level.max[q][b], hi) << "level " << l << " bucket " << b;
        }
      }
    }
  }
}

TEST(TimelineMoments, PeaksOomAndEvenlySpacedEventsUpToWhereTheReplayStopped) {
  ReplayResult r = run_with(100, {{10, 5, 5, 8}, {20, 9, 9, 9}, {30, 1, 1, 12}}, 0);
  std::vector<TimelineMoment> m = timeline_moments(r, 4, std::vector<uint64_t>{42});
  std::vector<uint64_t> events = moment_events(m);
  EXPECT_EQ(events, (std::vector<uint64_t>{20, 24, 30, 42, 49, 74, 99}));
  EXPECT_EQ(m[0].label, "peak allocated");
  EXPECT_EQ(m[2].label, "peak reserved");
  EXPECT_EQ(m[3].label, "asked");
  EXPECT_EQ(m[6].label, "");
  // Stopped at an OOM at event 50: nothing after it, and the OOM labelled.
  r.outcome.stopped_at_oom = true;
  ReplayOom oom{};
  oom.event_index = 50;
  r.outcome.oom = oom;
  m = timeline_moments(r, 2, std::vector<uint64_t>{60});
  events = moment_events(m);
  EXPECT_EQ(events, (std::vector<uint64_t>{20, 24, 30, 50}));
  EXPECT_EQ(m.back().label, "OOM");
}

TEST(TimelinePageData, EncodingHelpers) {
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
  std::string leb;
  append_leb128(leb, 300);
  EXPECT_EQ(leb, std::string("\xac\x02"));
  EXPECT_EQ(zigzag(0), 0u);
  EXPECT_EQ(zigzag(-1), 1u);
  EXPECT_EQ(zigzag(1), 2u);
  EXPECT_EQ(zigzag(INT64_MIN), UINT64_MAX);
  const std::string text(100000, 'x');
  const std::string packed = deflate_bytes(text);
  std::string back(text.size(), '\0');
  uLongf size = back.size();
  ASSERT_EQ(uncompress(reinterpret_cast<Bytef*>(back.data()), &size,
                       reinterpret_cast<const Bytef*>(packed.data()), packed.size()),
            Z_OK);
  EXPECT_EQ(back, text);
}

// Reads what timeline_page_bytes wrote, as the page's script does.
struct PageBytes {
  nlohmann::json header;
  std::string columns;

  explicit PageBytes(const std::string& bytes) {
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) length |= uint32_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
    header = nlohmann::json::parse(bytes.substr(4, length));
    columns = bytes.substr(4 + length);
  }
  std::vector<int64_t> column(const std::string& name, size_t n, bool deltas) const {
    for (const auto& c : header["columns"]) {
      if (c[0] != name) continue;
      std::vector<int64_t> out;
      size_t pos = c[1].get<size_t>();
      int64_t acc = 0;
      for (size_t i = 0; i < n; ++i) {
        uint64_t v = 0;
        int shift = 0;
        uint8_t b;
        do {
          b = static_cast<uint8_t>(columns[pos++]);
          v |= uint64_t{b & 0x7fu} << shift;
          shift += 7;
        } while (b & 0x80);
        if (deltas) {
          acc += static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
          out.push_back(acc);
        } else {
          out.push_back(static_cast<int64_t>(v));
        }
      }
      EXPECT_EQ(pos, c[1].get<size_t>() + c[2].get<size_t>()) << name;
      return out;
    }
    ADD_FAILURE() << "no column " << name;
    return {};
  }
};

TEST(TimelinePageData, ThePageReadsBackEveryEventSeriesLevelAndSegmentMap) {
  const Trace trace =
      read_snapshot_file(std::string(ALLOCSIM_WORKLOADS_DIR) + "/multistream_default.pickle.gz");
  ReplayOptions options;
  options.record_timeline = true;
  const ReplayResult first = replay(trace, options);
  const std::vector<TimelineMoment> moments = timeline_moments(first, 5, {});
  options.segment_maps_at = moment_events(moments);
  const ReplayResult r = replay(trace, options);
  const std::vector<TimelineRun> runs = {{"multistream", &r, &trace, moments}};
  const TimelinePageData bytes = timeline_page_bytes(runs);
  EXPECT_EQ(bytes.summary, timeline_page_bytes(runs).summary);  // deterministic
  EXPECT_EQ(bytes.events, timeline_page_bytes(runs).events);
  const PageBytes page(bytes.summary), events_part(bytes.events);
  const uint64_t events = trace.events.size();
  EXPECT_EQ(page.header["events"], events);
  // The trace's events.
  const auto sizes = events_part.column("t0.size", events, false);
  const auto streams = events_part.column("t0.stream", events, false);
  for (uint64_t i = 0; i < events; ++i) {
    ASSERT_EQ(static_cast<uint64_t>(sizes[i]), trace.events[i].size) << i;
    ASSERT_EQ(page.header["traces"][0]["streams"][streams[i]].get<std::string>(),
              std::to_string(trace.events[i].stream));
  }
  // The series, and each level's buckets, as the replay had them.
  const TimelineSeries series = timeline_series(r);
  const char* names[] = {"allocated", "active", "reserved"};
  for (size_t q = 0; q < kQuantities; ++q)
    EXPECT_EQ(events_part.column(std::string("r0.") + names[q], events, true), series.values[q]);
  const auto levels = timeline_levels(series, kTimelineLevelBase, kTimelineLevelFanout);
  ASSERT_EQ(page.header["runs"][0]["levels"].size(), levels.size());
  for (size_t l = 0; l < levels.size(); ++l) {
    const std::string prefix = "r0.L" + std::to_string(l) + ".reserved";
    EXPECT_EQ(page.column(prefix + ".max", levels[l].buckets(), true), levels[l].max[kReserved]);
    EXPECT_EQ(page.column(prefix + ".min", levels[l].buckets(), true), levels[l].min[kReserved]);
  }
  // The moments' segment maps: the last one is the replay's end.
  const auto& page_moments = page.header["runs"][0]["moments"];
  ASSERT_EQ(page_moments.size(), moments.size());
  uint64_t reserved = 0, allocated = 0;
  for (const auto& seg : page_moments.back()["segments"]) {
    reserved += seg[1].get<uint64_t>();
    for (const auto& b : seg[6]) allocated += b[1] == 1 ? b[0].get<uint64_t>() : 0;
  }
  EXPECT_EQ(page_moments.back()["event"], events - 1);
  EXPECT_EQ(reserved, static_cast<uint64_t>(r.stats.reserved_bytes[kAggregate].current));
  EXPECT_EQ(allocated, static_cast<uint64_t>(r.stats.allocated_bytes[kAggregate].current));
  // The page embeds it, and its script.
  const std::string html = timeline_html(runs);
  EXPECT_NE(html.find(timeline_page_data(runs).summary), std::string::npos);
  EXPECT_NE(html.find(timeline_page_data(runs).events), std::string::npos);
  EXPECT_NE(html.find("DecompressionStream('deflate')"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));  // no network
}

}  // namespace
}  // namespace allocsim
