// The table of subtools: each registers its CLI11 subcommand and sets the action to run.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace bneck {

using Action = std::function<int()>;
struct Subtool {
  const char* name;
  const char* help;
  void (*add)(CLI::App& sub, Action& action);
};

void add_info(CLI::App& sub, Action& action);
void add_ops(CLI::App& sub, Action& action);
void add_replay(CLI::App& sub, Action& action);
void add_hw(CLI::App& sub, Action& action);
void add_roofline(CLI::App& sub, Action& action);
void add_occupancy(CLI::App& sub, Action& action);
void add_coalesce(CLI::App& sub, Action& action);
void add_tile(CLI::App& sub, Action& action);
void add_amdahl(CLI::App& sub, Action& action);
void add_collective(CLI::App& sub, Action& action);
void add_whatif(CLI::App& sub, Action& action);
void add_sweep(CLI::App& sub, Action& action);
void add_serve(CLI::App& sub, Action& action);
void add_pipeline(CLI::App& sub, Action& action);
void add_structure(CLI::App& sub, Action& action);
void add_advise(CLI::App& sub, Action& action);
void add_report(CLI::App& sub, Action& action);
void add_calibrate(CLI::App& sub, Action& action);
void add_validate_report(CLI::App& sub, Action& action);

const std::vector<Subtool>& subtools();

}  // namespace bneck
