// The model-switching benchmark behind `ferry bench-switch` (docs/switch.md): one process, sim:0
// (and sim:1 for the parallel column), whose link is PCIe-3.0-like (bandwidth and latency options)
// and whose kernels take the time a V100-like rate gives (FERRY_SIM_COMPUTE's model, timing-only:
// outputs are not computed, as the schedule is what is measured). For each model it times, with the
// same code:
//   ready          the weights already on the device
//   load, then run one group (everything copied, then computed)
//   per layer      one group per layer, a host synchronize and a message per group
//   PipeSwitch     PipeSwitch's grouping search, a host synchronize and a message per group
//   ferry          the optimal grouping, device-side waits
//   ferry + direct ferry with direct host access: the layers the planner picks (where it wins)
//                  read their weights in place from the mapped pinned image, the rest is
//                  grouped optimally around them (ferry/switch/direct_plan.h)
//   ferry, parallel  parallel transmission (parallel_grouping.h): group_parallel's plan, some
//                  groups through sim:1's host link and the peer link (`peer_bandwidth`), when
//                  there is a sim:1
//   stop-and-start a new process (`ferry switch-cold-start`) builds the model, loads its weights
//                  from a safetensors file into the device and runs (bench/cold_start.h)
// as medians of `repeat` switches (stop_and_start_repeat processes), with the overhead over ready,
// the planner's prediction, and the two targets: ferry's overhead at most max(0, transfer -
// compute) + its largest group's transfer + 1 ms, and at most half of PipeSwitch's. Not measured
// here yet: switches between worker processes, and real compute with a link scaled down to match.
#pragma once

#include <string>
#include <vector>

#include "ferry/backends/sim/sim.h"

namespace ferry::bench {

struct SwitchBenchOptions {
  std::vector<std::string> models = {"resnet152", "resnet50", "bert-base"};
  std::string compute = "15T";    // modelled FLOP/s (FERRY_SIM_COMPUTE's format)
  std::string bandwidth = "12G";  // host-to-device link (FERRY_SIM_BANDWIDTH's format)
  std::string latency = "10us";   // per copy (FERRY_SIM_LATENCY's format), also on the peer link
  std::string peer_bandwidth = "50G";  // sim:1 -> sim:0, for the parallel column
  long long batch = 8;
  int repeat = 20;                    // switches per case (median), after one warm-up
  int stop_and_start_repeat = 3;      // new processes per model (median; 1 with --quick)
  std::string trace;                  // Chrome trace of one ferry switch of the first model
  std::string json;                   // the results as JSON too ("-": on stdout, tables on stderr)
  bool quick = false;                 // bert-tiny and resnet18, 3 repeats: a smoke test
  std::string* json_text = nullptr;   // when set, also receives the JSON text (for --plot)
  std::string* trace_text = nullptr;  // when set, receives the Chrome trace (for --timeline)
};

// `base` with the switch benches' modelled hardware: the host-to-device link's bandwidth and
// per-copy latency, and a timing-only compute rate ("0": real compute). Each string is in its
// FERRY_SIM_* variable's format; a bad one raises ferry::Error naming the option.
sim::SimConfig switch_bench_sim_config(sim::SimConfig base, const std::string& compute,
                                       const std::string& bandwidth, const std::string& latency);

// `base` with the peer link's bandwidth and per-copy latency (for the parallel column).
sim::SimConfig switch_bench_peer_config(sim::SimConfig base, const std::string& peer_bandwidth,
                                        const std::string& latency);

// Runs the benchmark and prints the table; returns the process exit code (1 when a target is
// missed, never with --quick).
int run_switch_bench(const SwitchBenchOptions& options);

}  // namespace ferry::bench
