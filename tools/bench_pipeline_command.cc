// `ferry bench-pipeline`: the pipeline benchmark (bench/pipeline_bench.cc): GPipe throughput
// against the ideal m / (m + n - 1) on sim devices under the compute-time model, copy overlap,
// two stages with real compute, and a timeline (text Gantt, optional Chrome trace). Registered
// only when the tool is built with the benchmarks (FERRY_BUILD_BENCH=ON).
#if defined(FERRY_HAVE_BENCH)

#include <memory>

#include "bench/pipeline_bench.h"
#include "tools/command.h"

namespace ferry::tools {
namespace {

FERRY_REGISTER_COMMAND(
    "bench-pipeline",
    "Benchmark GPipe on sim devices under the compute-time model: throughput vs the ideal "
    "m/(m+n-1) for 4 and 8 stages, copy overlap, two real stages at once, and a timeline; "
    "about half a minute",
    [](CLI::App& sub) -> std::function<int()> {
      auto options = std::make_shared<bench::PipelineOptions>();
      sub.add_option("--compute", options->compute,
                     "Modelled FLOP/s of each sim device (FERRY_SIM_COMPUTE's format)")
          ->capture_default_str();
      sub.add_option("--bandwidth", options->bandwidth,
                     "Link bandwidth for the throughput table (FERRY_SIM_BANDWIDTH's format)")
          ->capture_default_str();
      sub.add_option("--slow-link", options->slow_link, "Link bandwidth of the copy-overlap case")
          ->capture_default_str();
      sub.add_option("--repeat,--repeats", options->repeat, "Timed steps per case (median)")
          ->capture_default_str();
      sub.add_option("--width", options->width, "Columns of the text timeline")
          ->capture_default_str();
      sub.add_option("--trace", options->trace,
                     "Also write the timeline as a Chrome trace (JSON) to this file");
      sub.add_flag("--quick", options->quick, "Fewer, smaller cases: a smoke test");
      return [options] { return bench::run_pipeline_bench(*options); };
    });

}  // namespace
}  // namespace ferry::tools

#endif  // FERRY_HAVE_BENCH
