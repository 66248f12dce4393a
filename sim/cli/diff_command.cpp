// allocsim diff: two runs side by side, where the memory of one went in the other.
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/format_size.hpp"
#include "sim/cli/cli_args.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/trace_input.hpp"
#include "sim/diff/diff_report.hpp"
#include "sim/diff/run_diff.hpp"
#include "sim/report/timeline_html.hpp"
#include "sim/report/timeline_moments.hpp"
#include "sim/report/timeline_svg.hpp"

namespace allocsim::cli {
namespace {

struct DiffArgs {
  std::string a, b;
  std::string json_out;
  std::string timeline_out;
  std::optional<int> device;
  std::optional<int> device_b;
  uint64_t capacity = kDefaultCapacityBytes;
  bool capacity_given = false;
  std::optional<uint64_t> context;
  size_t listed = 12;
  bool quiet = false;
};

std::string base_name(const std::string& path) {
  return path.substr(path.find_last_of('/') + 1);
}

// Both runs on one scale, B under A's allocator below them where that is another; each page panel
// shows the segments where its reserved memory parts from the other run's, and at its peaks.
std::string timeline(const DiffArgs& args, const Trace& a, const Trace& b, const RunDiff& d,
                     const ReplayOptions& options) {
  const bool html = html_name(args.timeline_out);
  struct Panel {
    std::string title;
    const Trace* trace;
    ReplayOptions options;
    std::vector<uint64_t> at;
  };
  std::vector<Panel> panels;
  const auto setting = [](const ReplaySetup& s) {
    const std::string c = s.conf.to_string();
    return std::string("PYTORCH_CUDA_ALLOC_CONF=") + (c.empty() ? std::string("(defaults)") : c) +
           " on " + format_size(s.capacity);
  };
  std::vector<uint64_t> at_a, at_b;
  if (d.reserved_parting) {
    at_a.push_back(d.reserved_parting->a_event);
    at_b.push_back(d.reserved_parting->b_event);
  }
  panels.push_back({"A: " + base_name(args.a) + ", " + setting(d.a.setup), &a, options, at_a});
  panels.push_back({"B: " + base_name(args.b) + ", " + setting(d.b.setup), &b, options, at_b});
  if (!d.same_allocator) {
    panels.push_back({"B's requests under A's allocator: " + setting(d.a.setup), &b,
                      options_of(d.a.setup, options), at_b});
  }
  std::vector<ReplayResult> results;
  results.reserve(panels.size() * 2);  // the runs point into it
  std::vector<TimelineRun> runs;
  for (Panel& p : panels) {
    p.options.record_timeline = true;
    results.push_back(replay(*p.trace, p.options));
    std::vector<TimelineMoment> moments;
    if (html) {
      moments = timeline_moments(results.back(), 4, p.at);
      for (TimelineMoment& m : moments) {
        if (!p.at.empty() && m.event_index == p.at.front())
          m.label += std::string(m.label.empty() ? "" : ", ") + "reserved parts from the other run";
      }
      ReplayOptions o = p.options;
      o.segment_maps_at = moment_events(moments);
      results.push_back(replay(*p.trace, o));
    }
    runs.push_back({p.title, &results.back(), p.trace, std::move(moments)});
  }
  return html ? timeline_html(runs) : timeline_svg(runs);
}

int run_diff(const DiffArgs& args) {
  ReplayOptions options;
  options.capacity = args.capacity;
  options.capacity_from_layout = !args.capacity_given;
  options.context_bytes = args.context;  // else the default, or what a recorded OOM shows
  DiffOptions diff_options;
  diff_options.replay = options;
  // Each file read and replayed beside the other; the warnings, with the diff's own, printed in
  // order after.
  struct Run {
    std::vector<Trace> traces;
    DiffSide side;
  };
  const auto prepare = [&](const std::string& path, int device, const std::string& option) {
    Run run;
    run.traces = pick_device(read_traces(path, std::nullopt, nullptr, options,
                                         /*print_warnings=*/false),
                             device, path, option);
    run.side = prepare_diff_side(run.traces.front(), diff_options);
    return run;
  };
  const int device_a = args.device.value_or(0);
  auto preparing_b =
      std::async(std::launch::async, prepare, std::cref(args.b), args.device_b.value_or(device_a),
                 std::string(args.device_b ? "--device-b" : "--device"));
  Run a;
  try {
    a = prepare(args.a, device_a, "--device");
  } catch (...) {
    preparing_b.wait();
    throw;
  }
  const Run b = preparing_b.get();
  const RunDiff d = diff_runs(a.traces.front(), a.side, b.traces.front(), b.side, diff_options);
  for (const std::string& w : d.warnings) print_warning(w);
  if (!args.json_out.empty()) {
    const int rc = write_text(args.json_out, diff_json(d).dump(1) + "\n", "the JSON report");
    if (rc != kExitOk) return rc;
  }
  if (!args.timeline_out.empty()) {
    const int rc =
        write_text(args.timeline_out,
                   timeline(args, a.traces.front(), b.traces.front(), d, options), "the timeline");
    if (rc != kExitOk) return rc;
  }
  if (!args.quiet && args.json_out != "-") std::fputs(diff_text(d, args.listed).c_str(), stdout);
  return kExitOk;
}

}  // namespace

Command add_diff_command(CLI::App& app) {
  auto args = std::make_shared<DiffArgs>();
  CLI::App* diff = app.add_subcommand(
      "diff",
      "Two runs side by side: their requests paired, the source lines (or steps) that hold the "
      "difference at the peaks, where their reserved memory parts, and how much of the difference "
      "the program made and how much the allocator made");
  diff->add_option("a", args->a, "run A: a snapshot (.pickle[.gz]), RMM log or .atrace")
      ->required();
  diff->add_option("b", args->b, "run B")->required();
  diff->add_option("--json", args->json_out, "write the report as JSON to FILE, or - for stdout");
  diff->add_option("--out", args->timeline_out,
                   "write both runs' timelines on one scale: FILE.html (a page) or FILE.svg");
  diff->add_option("--device", args->device, "the device of a snapshot of several (both runs)")
      ->check(CLI::NonNegativeNumber);
  diff->add_option("--device-b", args->device_b, "run B's device, where it is another")
      ->check(CLI::NonNegativeNumber);
  CLI::Option* capacity =
      diff->add_option("--capacity", args->capacity,
                       "the card both runs are replayed on (default: each run's, as its "
                       "expandable segments show, else 80 GiB)")
          ->transform(ByteSize("24GiB", /*nonzero=*/true));
  diff->add_option("--context", args->context,
                   "memory each process holds outside PyTorch (default " +
                       format_size(kDefaultContextBytes) + ", or what a recorded OOM shows)")
      ->transform(ByteSize("750MiB"));
  diff->add_option("--groups", args->listed, "groups listed in the text (default 12)");
  diff->add_flag("-q,--quiet", args->quiet, "print nothing but errors");
  return {diff, [args, capacity] {
            args->capacity_given = capacity->count() > 0;
            const std::string& path = args->a;
            return reporting_input_errors(path, [&] { return run_diff(*args); });
          }};
}

}  // namespace allocsim::cli
