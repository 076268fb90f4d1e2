// The stop-and-start baseline of `ferry bench-switch`: serving a model that is not on the device
// by starting a new process, which builds the model, loads its weights from a safetensors file
// into the device and runs it once. run_cold_start is that process's work (`ferry
// switch-cold-start`); time_cold_start starts it from the benchmark and times it from the spawn
// to the process's exit, with the benchmark's sim settings passed in the environment.
#pragma once

#include <cstdint>
#include <string>

#include "ferry/backends/sim/sim.h"

namespace ferry::bench {

struct ColdStartOptions {
  std::string arch;     // a zoo architecture (switch_::zoo_architectures)
  std::string weights;  // a safetensors file with the model's state_dict
  std::string device = "sim:0";
  int64_t batch = 8;
};

// Builds `arch`, loads `weights` straight into the device, runs the example input once and
// waits for it; prints one JSON line with the phases' milliseconds (build, load, run). Returns
// the exit code.
int run_cold_start(const ColdStartOptions& options);

// Starts `ferry switch-cold-start` (this executable) with `options` and the sim settings of
// `sim_config` in its environment, waits for it and returns the milliseconds from the spawn to
// its exit. Raises ferry::Error with the child's exit status when it fails.
double time_cold_start(const ColdStartOptions& options, const sim::SimConfig& sim_config);

}  // namespace ferry::bench
