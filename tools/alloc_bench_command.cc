// `ferry bench-alloc`: the allocation benchmark (bench/alloc_bench.cc): cached allocate+free
// pairs against the sim backend's raw malloc/free and std::malloc. Registered only when the tool
// is built with the benchmarks (FERRY_BUILD_BENCH=ON, the default).
#if defined(FERRY_HAVE_BENCH)

#include <memory>

#include "tools/command.h"

namespace ferry::bench {
// Defined in bench/alloc_bench.cc; returns the process exit code.
int run_alloc_bench(int repeat, bool quick);
}  // namespace ferry::bench

namespace ferry::tools {
namespace {

struct AllocBenchOptions {
  int repeat = 11;
  bool quick = false;
};

FERRY_REGISTER_COMMAND(
    "bench-alloc",
    "Benchmark the caching device allocator (ns per allocate+free) against sim malloc and malloc",
    [](CLI::App& sub) -> std::function<int()> {
      auto options = std::make_shared<AllocBenchOptions>();
      sub.add_option("--repeat", options->repeat, "Timed runs per case (median; >= 3)")
          ->capture_default_str();
      sub.add_flag("--quick", options->quick, "Fewer pairs per run: a smoke test");
      return [options] { return bench::run_alloc_bench(options->repeat, options->quick); };
    });

}  // namespace
}  // namespace ferry::tools

#endif  // FERRY_HAVE_BENCH
