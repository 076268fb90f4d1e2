// The throughput benchmark behind `ferry bench-serve` (docs/switch.md): a Zipf-distributed
// request stream over four models served by `ferry serve`'s handlers, over a real Unix socket,
// on sim devices with a PCIe-like link and V100-like modelled compute (timing-only: outputs
// undefined, the schedule is what is measured). Three setups, the same request sequence (one
// printed seed):
//   switching, in process        2 devices, room for about one model each (SwitchingHandler)
//   switching, worker processes  the same with WorkerPoolHandler: 2 workers per device, the
//                                workers given this process's sim settings
//   one model per device         4 devices, every model resident on its own: never switches
// The baseline is the "one model per device, no switching"; serving four models that way
// takes four devices, so it uses twice the hardware. Reports p50/p99 latency, requests/s and how
// many requests switched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ferry::bench {

struct ServeBenchOptions {
  std::vector<std::string> models = {"resnet50", "resnet101", "resnet152", "bert-base"};
  std::string compute = "15T";
  std::string bandwidth = "12G";
  std::string latency = "10us";
  long long batch = 8;
  long long requests = 400;
  int clients = 4;
  double zipf = 1.0;
  uint64_t seed = 1;
  bool quick = false;  // four bert-tiny models, batch 1, sequence 16, 40 requests
};

// Runs both setups and prints the table; returns the exit code (1 when a request failed).
int run_serve_bench(const ServeBenchOptions& options);

}  // namespace ferry::bench
