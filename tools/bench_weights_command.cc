// `ferry bench-weights`: a model's weights fetched from another controller against a load from
// the local file (bench/weights_bench.h). Registered only when the tool is built with the
// benchmarks (FERRY_BUILD_BENCH=ON) and the transport (UCX found).
#if defined(FERRY_HAVE_BENCH) && defined(FERRY_WITH_TRANSPORT)

#include <memory>

#include "bench/weights_bench.h"
#include "tools/command.h"

namespace ferry::tools {
namespace {

FERRY_REGISTER_COMMAND(
    "bench-weights",
    "Benchmark fetching a model's weights from another `ferry serve` over UCX (shared memory, "
    "loopback TCP) against loading its safetensors file locally (page cache warm and evicted)",
    [](CLI::App& sub) -> std::function<int()> {
      auto o = std::make_shared<bench::WeightsBenchOptions>();
      sub.add_option("--arch", o->arch,
                     "Model-zoo architecture, e.g. resnet18, resnet50, bert-base")
          ->capture_default_str();
      sub.add_option("--tls", o->tls, "Transports: shm (shared memory), tcp (loopback TCP)")
          ->check(CLI::IsMember({"shm", "tcp"}))
          ->capture_default_str();
      sub.add_option("--repeat,--repeats", o->repeat, "Timed repeats per figure (median)")
          ->capture_default_str();
      sub.add_option("--timeout", o->timeout_s, "Seconds any one wait may take")
          ->capture_default_str();
      return [o] { return bench::run_weights_bench(*o); };
    });

}  // namespace
}  // namespace ferry::tools

#endif  // FERRY_HAVE_BENCH && FERRY_WITH_TRANSPORT
