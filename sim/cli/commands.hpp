// The subcommands of allocsim, each in its own file: each adds itself to the command line and
// returns what runs it once the line is parsed.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace allocsim::cli {

struct Command {
  CLI::App* app;             // the subcommand, to ask whether it was given
  std::function<int()> run;  // its exit status
};

Command add_replay_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
Command add_convert_command(CLI::App& app);
Command add_predict_command(CLI::App& app);
Command add_calibrate_command(CLI::App& app);
Command add_fleet_command(CLI::App& app);
Command add_diff_command(CLI::App& app);

}  // namespace allocsim::cli
