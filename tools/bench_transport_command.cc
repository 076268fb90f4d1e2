// `ferry bench-transport`: the transport benchmark (bench/transport_bench.h): latency and
// bandwidth between two processes through ferry::transport::Endpoint against UCX's ucx_perftest
// on the same transports, one table per transport. The hidden --peer-of option makes this
// process the benchmark's peer (the benchmark starts it; not for users). Registered only when the
// tool is built with the benchmarks (FERRY_BUILD_BENCH=ON) and the transport (UCX found).
#if defined(FERRY_HAVE_BENCH) && defined(FERRY_WITH_TRANSPORT)

#include <memory>
#include <string>

#include "bench/transport_bench.h"
#include "tools/command.h"

namespace ferry::tools {
namespace {

struct BenchTransportCommand {
  bench::TransportBenchOptions options;
  std::string peer_of;
};

FERRY_REGISTER_COMMAND(
    "bench-transport",
    "Benchmark ferry's transport between two processes against ucx_perftest on the same UCX "
    "transports: 8-byte ping-pong latency and bandwidth from 4 KiB to 1 GiB, over shared memory "
    "and loopback TCP; a few minutes",
    [](CLI::App& sub) -> std::function<int()> {
      auto c = std::make_shared<BenchTransportCommand>();
      sub.add_option("--tls", c->options.tls,
                     "Transports, one table each: shm (shared memory for the data) and tcp "
                     "(loopback TCP)")
          ->check(CLI::IsMember({"shm", "tcp"}))
          ->capture_default_str();
      sub.add_option("--cases", c->options.cases, "Which cases: latency, bandwidth")
          ->check(CLI::IsMember({"latency", "bandwidth"}))
          ->capture_default_str();
      sub.add_option("--sizes", c->options.sizes,
                     "Bandwidth sizes to run (default: all): 4K 64K 1M 16M 256M 1G")
          ->check(CLI::IsMember({"4K", "64K", "1M", "16M", "256M", "1G"}));
      sub.add_option("--ucx", c->options.ucx,
                     "More UCX settings for both pairs, UCX_NAME=VALUE (repeatable; e.g. "
                     "UCX_RNDV_THRESH=64K)");
      sub.add_option("--perftest-args", c->options.perftest_args,
                     "More ucx_perftest options for its server and client, e.g. \"-e\" (endpoints "
                     "with error handling, as ferry's)");
      sub.add_option("--repeat,--repeats", c->options.repeat, "Timed repeats per case (median)")
          ->capture_default_str();
      sub.add_option("--timeout", c->options.timeout_s,
                     "Seconds any one wait may take (a child that overruns is killed)")
          ->capture_default_str();
      sub.add_option("--perftest", c->options.perftest, "The ucx_perftest executable")
          ->capture_default_str();
      sub.add_flag("--quick", c->options.quick,
                   "Sizes up to 16 MiB, few iterations: a smoke test (targets not judged)");
      sub.add_option("--recv-buffers", c->options.recv_buffers,
                     "Distinct tensors the bandwidth receiver cycles through, at most one per "
                     "receive in flight (1: one, as ucx_perftest's receiver)")
          ->check(CLI::Range(1, 16))
          ->capture_default_str();
      sub.add_flag("--poll", c->options.poll,
                   "Diagnosis: wait for ferry's transfers by polling Future::ready() in a busy "
                   "loop before Future::wait(), in both processes");
      sub.add_option("--peer-of", c->peer_of, "Internal: run as the benchmark's peer")->group("");
      return [c] {
        if (!c->peer_of.empty()) {
          return bench::run_transport_bench_peer(c->peer_of, c->options);
        }
        return bench::run_transport_bench(c->options);
      };
    });

}  // namespace
}  // namespace ferry::tools

#endif  // FERRY_HAVE_BENCH && FERRY_WITH_TRANSPORT
