// allocsim fleet: many snapshots at once (a directory of the OOM advisor's reports, tickets'
// attachments), each replayed and planned on all cores, put together in one report.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/format_size.hpp"
#include "sim/cli/cli_args.hpp"
#include "sim/cli/commands.hpp"
#include "sim/fleet/fleet_job.hpp"
#include "sim/fleet/fleet_report.hpp"
#include "sim/replay/replay.hpp"

namespace allocsim::cli {
namespace {

struct FleetArgs {
  std::vector<std::string> paths;
  std::string html_out;
  std::string json_out;
  uint64_t card = kDefaultCapacityBytes;
  uint64_t context = kDefaultContextBytes;
  std::vector<std::string> alloc_confs;
  std::optional<std::string> torch_version;
  unsigned jobs = 0;
  std::string cache;
  bool no_cache = false;
  bool one_job = false;
  std::string results;
  std::string scheduler;
  std::vector<std::pair<std::string, std::string>> pairs;  // A, B: B against A
  bool list = false;
};

std::string default_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/allocsim/fleet";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/allocsim/fleet";
  return "";
}

FleetOptions fleet_options(const FleetArgs& args) {
  FleetOptions o;
  o.card_bytes = args.card;
  o.context_bytes = args.context;
  o.alloc_confs = args.alloc_confs;
  if (args.torch_version) o.torch_version = TorchVersion::parse(*args.torch_version);
  o.cache_dir = args.no_cache ? "" : (args.cache.empty() ? default_cache_dir() : args.cache);
  return o;
}

// Every file on all cores (or --jobs), the results in the files' order.
std::vector<FleetJobResult> analyze_all(const std::vector<std::string>& files,
                                        const FleetOptions& options, unsigned jobs) {
  std::vector<FleetJobResult> results(files.size());
  std::atomic<size_t> next{0}, done{0};
  const bool progress = isatty(STDERR_FILENO);
  auto worker = [&] {
    for (size_t i = next++; i < files.size(); i = next++) {
      results[i] = analyze_fleet_job(files[i], options);
      const size_t n = ++done;
      if (progress) std::fprintf(stderr, "\rfleet: %zu/%zu files", n, files.size());
    }
  };
  const unsigned threads =
      std::max(1u, std::min<unsigned>(jobs ? jobs : std::thread::hardware_concurrency(),
                                      static_cast<unsigned>(files.size())));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (progress && !files.empty()) std::fputs("\n", stderr);
  return results;
}

int read_results(const std::string& path, std::vector<FleetJobResult>& out) {
  std::ifstream in(path);
  if (!in) return bad_input(path + ": cannot open the results");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json list = nlohmann::json::parse(text.str(), nullptr, false);
  if (!list.is_array()) return bad_input(path + ": expected a JSON array of fleet job results");
  for (size_t i = 0; i < list.size(); ++i) {
    try {
      out.push_back(fleet_job_from_json(list[i]));
    } catch (const std::invalid_argument& e) {
      return bad_input(path + ": result " + std::to_string(i) + ": " + e.what() +
                       " (each result is what allocsim fleet --job prints)");
    }
  }
  return kExitOk;
}

int run_fleet(const FleetArgs& args) {
  const FleetOptions options = fleet_options(args);
  for (const std::string& text : args.alloc_confs) {
    const int rc = settings_known_to(text, options.torch_version.value_or(kNewestTorchVersion),
                                     "--torch-version names that release");
    if (rc != kExitOk) return rc;
  }
  if (!args.scheduler.empty()) {
    // Dask's client is Python: the command pip installs drives the cluster itself, and each
    // worker runs this binary once per file (`fleet --job`).
    return bad_input(
        "fleet --scheduler: a Dask cluster is driven from Python: run the allocsim that pip "
        "installs, or python3 -m allocsim fleet PATHS --scheduler " +
        args.scheduler);
  }
  if (args.one_job) {
    if (args.paths.size() != 1) return bad_input("fleet --job: one file");
    return write_text("-",
                      fleet_job_json(analyze_fleet_job(args.paths.front(), options)).dump() + "\n",
                      "the result");
  }
  std::vector<FleetJobResult> results;
  if (!args.results.empty()) {
    if (const int rc = read_results(args.results, results); rc != kExitOk) return rc;
  } else if (!args.paths.empty() || args.list) {
    const std::vector<std::string> files = find_fleet_files(args.paths);
    if (args.list) {
      std::string text;
      for (const std::string& f : files) text += f + "\n";
      return write_text("-", text, "the list");
    }
    if (files.empty())
      return bad_input("fleet: no snapshot files (*.pickle, *.pickle.gz, *.atrace) found");
    results = analyze_all(files, options, args.jobs);
  }
  std::vector<FleetPairResult> pairs;
  for (const auto& [a, b] : args.pairs) pairs.push_back(analyze_fleet_pair(a, b, options));
  const nlohmann::json report = fleet_report_json(results, args.card, pairs);
  if (!args.json_out.empty()) {
    const int rc = write_text(args.json_out, report.dump(1) + "\n", "the JSON report");
    if (rc != kExitOk) return rc;
  }
  if (!args.html_out.empty()) {
    const int rc = write_text(args.html_out, fleet_report_html(report), "the HTML report");
    if (rc != kExitOk) return rc;
  }
  if (args.json_out != "-") std::fputs(fleet_report_text(report).c_str(), stdout);
  return kExitOk;
}

}  // namespace

Command add_fleet_command(CLI::App& app) {
  auto args = std::make_shared<FleetArgs>();
  CLI::App* fleet = app.add_subcommand(
      "fleet",
      "Many snapshots at once (directories searched recursively): each replayed and planned on "
      "all cores, one report of them all");
  fleet->add_option("paths", args->paths, "snapshot files and directories");
  fleet->add_option("--out", args->html_out, "write the report as one HTML page to FILE");
  fleet->add_option("--json", args->json_out, "write the report as JSON to FILE, or - for stdout");
  CLI::Option* card = fleet->add_option("--card", args->card, "the card each job is planned for")
                          ->transform(ByteSize("24GiB", /*nonzero=*/true))
                          ->default_str(format_size(kDefaultCapacityBytes));
  fleet->add_option("--context", args->context, "memory each process holds outside PyTorch")
      ->transform(ByteSize("750MiB"))
      ->default_str(format_size(kDefaultContextBytes));
  (void)card;
  fleet
      ->add_option("--alloc-conf", args->alloc_confs,
                   "a PYTORCH_CUDA_ALLOC_CONF to plan for (repeatable; default: a useful set)")
      ->check(AllocConfText());
  fleet
      ->add_option("--torch-version", args->torch_version,
                   "the PyTorch release whose allocator every job's replays follow, 2.11 to 2.14 "
                   "(default: each job's, told by its snapshot's fields, else 2.11)")
      ->check(TorchVersionText());
  fleet->add_option("--jobs", args->jobs, "files analysed at once (default: all cores)")
      ->check(CLI::Range(1u, 4096u));
  fleet->add_option("--cache", args->cache,
                    "keep each file's result here by content hash, and reuse it while the file and "
                    "the options are unchanged (default: ~/.cache/allocsim/fleet)");
  fleet->add_flag("--no-cache", args->no_cache, "analyse every file again, keep nothing");
  fleet->add_option("--scheduler", args->scheduler,
                    "run on a Dask cluster (tcp://HOST:PORT): through the allocsim that pip "
                    "installs, or python3 -m allocsim");
  fleet->add_flag("--job", args->one_job, "analyse the one file given; its result as JSON");
  fleet->add_option("--results", args->results,
                    "put together a JSON array of --job results instead of analysing files");
  fleet->add_flag("--list", args->list, "print the snapshot files found, and nothing else");
  fleet->add_option("--pair", args->pairs,
                    "A B: one job's two runs (yesterday's and today's), B against A as allocsim "
                    "diff compares them (repeatable)");
  return {fleet, [args] {
            if (args->paths.empty() && args->results.empty() && args->pairs.empty())
              return bad_input(
                  "fleet: give snapshot files or directories (or --results FILE, or --pair A B)");
            return run_fleet(*args);
          }};
}

}  // namespace allocsim::cli
