// allocsim calibrate: the device calls' times on a real GPU, as the table plan estimates the cost
// of a remedy's extra calls from (plan --call-times FILE).
#include <cstdio>
#include <memory>
#include <string>

#include "sim/cli/cli_args.hpp"
#include "sim/cli/commands.hpp"
#include "sim/plan/device_call_times.hpp"
#ifdef ALLOCSIM_HAVE_CUDA
#include "sim/gpu/device_call_calibration.hpp"
#endif

namespace allocsim::cli {
namespace {

struct CalibrateArgs {
  int device = 0;
  int repeats = 15;
  std::string out = "-";
};

int run_calibrate(const CalibrateArgs& args) {
#ifdef ALLOCSIM_HAVE_CUDA
  std::string why;
  if (cuda_device_count(&why) <= args.device) {
    std::fprintf(stderr, "allocsim: error: calibrate: no CUDA device %d (%s)\n", args.device,
                 why.empty() ? "fewer devices" : why.c_str());
    return kExitDeviceError;
  }
  try {
    const Calibration measured = calibrate_device_calls({args.device, args.repeats});
    DeviceCallTimes times;
    times.device = measured.device;
    for (const CallTiming& t : measured.timings)
      times.points[static_cast<size_t>(t.kind)].emplace_back(t.size, t.seconds);
    return write_text(args.out, device_call_times_json(times).dump(1) + "\n", "the table");
  } catch (const CudaError& e) {
    print_error(e.what());
    return kExitDeviceError;
  }
#else
  (void)args;
  return bad_input(
      "calibrate: this allocsim was built without CUDA (configure with -DALLOCSIM_CUDA=ON)");
#endif
}

}  // namespace

Command add_calibrate_command(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* calibrate = app.add_subcommand(
      "calibrate",
      "Time cudaMalloc, cudaFree and expandable segments' maps and unmaps on a GPU, by size: "
      "the table plan --call-times reads");
  calibrate->add_option("--device", args->device, "the CUDA device ordinal (default 0)")
      ->check(CLI::Range(0, 1023));
  calibrate->add_option("--repeats", args->repeats, "calls timed per size (the median is kept)")
      ->check(CLI::Range(1, 1000));
  calibrate->add_option("--out", args->out, "write the table as JSON to FILE (default: stdout)");
  return {calibrate, [args] { return run_calibrate(*args); }};
}

}  // namespace allocsim::cli
