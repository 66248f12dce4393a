// allocsim: the command line. Exit status 0 ran clean, 3 hit an OOM, 2 bad usage or input,
// 4 a GPU replay (--backend cuda) differed from the simulation, 1 the GPU failed or this machine
// ran out of memory, 5 the allocator's invariants broke (a bug in allocsim).
#include <CLI/CLI.hpp>

#include <exception>
#include <new>
#include <string>

#include "core/caching_allocator.hpp"
#include "sim/cli/cli_args.hpp"
#include "sim/cli/commands.hpp"

namespace {

int run(int argc, char** argv) {
  using namespace allocsim::cli;
  CLI::App app{"allocsim: replays PyTorch CUDA caching-allocator traces on a simulated device"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "allocsim " ALLOCSIM_VERSION);
  const Command commands[] = {add_replay_command(app),    add_plan_command(app),
                              add_convert_command(app),   add_predict_command(app),
                              add_calibrate_command(app), add_fleet_command(app),
                              add_diff_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return bad_input(e.what());
  }
  try {
    for (const Command& command : commands) {
      if (command.app->parsed()) return command.run();
    }
    return kExitBadInput;  // require_subcommand(1) leaves no other case
  } catch (const std::bad_alloc&) {
    // A trace too large for this machine: one line, not an abort with a core dump.
    print_error(
        "out of memory: the trace, or what the run keeps of it, does not fit in this machine's "
        "memory");
    return kExitOutOfHostMemory;
  } catch (const allocsim::InvariantViolation& e) {
    // --check-invariants found the allocator inconsistent: a bug in allocsim, not in the input.
    print_error(std::string("internal error: the allocator's invariants broke (") + e.what() +
                "); please report it with the trace and the command");
    return kExitInternalError;
  }
}

}  // namespace

// Whatever else a command throws is allocsim's bug: one line and a status, not an abort.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    allocsim::cli::print_error(std::string("internal error: ") + e.what() +
                               "; please report it with the trace and the command");
  } catch (...) {
    allocsim::cli::print_error("internal error; please report it with the trace and the command");
  }
  return allocsim::cli::kExitInternalError;
}
