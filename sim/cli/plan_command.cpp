// allocsim plan: the smallest memory limit a trace runs in, per allocator setting, and whether a
// card fits it.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/alloc_conf.hpp"
#include "sim/cli/cli_args.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/trace_input.hpp"
#include "sim/plan/plan.hpp"

namespace allocsim::cli {
namespace {

struct PlanArgs {
  std::string trace;
  std::vector<std::string> alloc_confs;
  uint64_t card = uint64_t{80} << 30;
  uint64_t context = kDefaultContextBytes;
  std::optional<uint64_t> limit;
  std::string json_out;
  std::optional<int> device;
};

int run_plan(const PlanArgs& args) {
  PlanOptions options;
  for (const std::string& text : args.alloc_confs)
    options.settings.push_back(parse_alloc_conf(text));
  options.card_bytes = args.card;
  options.context_bytes = args.context;
  options.limit_bytes = args.limit;
  if (isatty(STDERR_FILENO)) {
    options.progress = [](size_t done, size_t total) {
      std::fprintf(stderr, "\rplanning: %zu/%zu settings searched%s", done, total,
                   done == total ? "\n" : "");
      std::fflush(stderr);
    };
  }
  const std::vector<Trace> traces = read_traces(args.trace, args.device);
  if (!args.alloc_confs.empty()) {
    // The recorded setting always comes first, as the baseline.
    options.settings.insert(options.settings.begin(),
                            traces.front().settings.value_or(AllocConf{}));
  }
  // Each device is planned for on its own (a card each, as the process had them).
  nlohmann::json json = nlohmann::json::array();
  std::string text;
  for (const Trace& trace : traces) {
    const PlanResult result = plan(trace, options);
    if (traces.size() == 1) {
      json = plan_json(result);
    } else {
      nlohmann::json one = plan_json(result);
      one["device"] = trace.device;
      json.push_back(std::move(one));
      text += "== device " + std::to_string(trace.device) + " ==\n";
    }
    text += plan_text(result);
  }
  if (traces.size() > 1) json = {{"trace", args.trace}, {"devices", std::move(json)}};
  if (!args.json_out.empty()) {
    const int rc = write_text(args.json_out, json.dump(1) + "\n", "the JSON report");
    if (rc != kExitOk || args.json_out == "-") return rc;
  }
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* plan = app.add_subcommand("plan",
                                      "The smallest memory limit a trace runs in, for each "
                                      "allocator setting, and whether a card fits it");
  plan->add_option("trace", args->trace, "snapshot from torch.cuda.memory._dump_snapshot")
      ->required();
  plan->add_option("--alloc-conf", args->alloc_confs,
                   "a PYTORCH_CUDA_ALLOC_CONF to plan for (repeatable; default: a useful set)")
      ->check(AllocConfText());
  CLI::Option* card_option = plan->add_option("--card", args->card, "the card to answer for")
                                 ->transform(ByteSize("24GiB", /*nonzero=*/true))
                                 ->default_str("80GiB");
  CLI::Option* context =
      plan->add_option("--context", args->context, "memory the process holds outside PyTorch")
          ->transform(ByteSize("750MiB"))
          ->default_str("750MiB");
  plan->add_option("--limit", args->limit,
                   "a cap on reserved memory to answer for instead of a card (as "
                   "set_per_process_memory_fraction x device sets it)")
      ->transform(ByteSize("10GiB", /*nonzero=*/true))
      ->excludes(card_option)
      ->excludes(context);
  plan->add_option("--json", args->json_out, "write the plans as JSON to FILE, or - for stdout");
  plan->add_option("--device", args->device,
                   "plan only for this device of a file that recorded several (default: each)")
      ->check(CLI::Range(0, 1023));
  return {plan,
          [args] { return reporting_input_errors(args->trace, [&] { return run_plan(*args); }); }};
}

}  // namespace allocsim::cli
