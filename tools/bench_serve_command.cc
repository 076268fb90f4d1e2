// `ferry bench-serve`: throughput under a Zipf workload over four models, switching on two sim
// devices versus one model per device (bench/serve_bench.cc). Registered only when the tool is
// built with the benchmarks (FERRY_BUILD_BENCH=ON).
#if defined(FERRY_HAVE_BENCH)

#include <memory>

#include "bench/serve_bench.h"
#include "tools/command.h"

namespace ferry::tools {
namespace {

FERRY_REGISTER_COMMAND(
    "bench-serve",
    "Benchmark serving four models under a Zipf workload: switching on 2 sim devices versus one "
    "model per device (4 devices, no switching); p50/p99 latency, requests/s, switches",
    [](CLI::App& sub) -> std::function<int()> {
      auto o = std::make_shared<bench::ServeBenchOptions>();
      sub.add_option("--models", o->models, "Four architectures, most requested first")
          ->capture_default_str();
      sub.add_option("--compute", o->compute, "Modelled FLOP/s (FERRY_SIM_COMPUTE's format)")
          ->capture_default_str();
      sub.add_option("--bandwidth", o->bandwidth, "Host-to-device link bandwidth")
          ->capture_default_str();
      sub.add_option("--latency", o->latency, "Host-to-device cost per copy")
          ->capture_default_str();
      sub.add_option("--batch", o->batch, "Batch of each request")->capture_default_str();
      sub.add_option("--requests", o->requests, "Requests in all")->capture_default_str();
      sub.add_option("--clients", o->clients, "Concurrent connections")->capture_default_str();
      sub.add_option("--zipf", o->zipf, "Zipf exponent of the model draws")->capture_default_str();
      sub.add_option("--seed", o->seed, "Seed of the model draws")->capture_default_str();
      sub.add_flag("--quick", o->quick,
                   "Four bert-tiny models, batch 1, sequence 16, 40 requests: a smoke test");
      return [o] { return bench::run_serve_bench(*o); };
    });

}  // namespace
}  // namespace ferry::tools

#endif  // FERRY_HAVE_BENCH
