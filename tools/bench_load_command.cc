// `ferry bench-load`: the loading benchmark (bench/load_bench.cc, bench/module_bench.cc): a
// safetensors file into pinned memory and onto sim:0, cold-cache reads, and Module::to(sim:0) of
// ResNet-152- and BERT-base-shaped modules; --json writes the load table, --plot draws it
// (tools/plot_load.py, checked before the run). Registered only when the tool is built with the
// benchmarks (FERRY_BUILD_BENCH=ON, the default).
#if defined(FERRY_HAVE_BENCH)

#include <cstdio>
#include <memory>
#include <string>

#include "bench/load_bench.h"
#include "tools/command.h"
#include "tools/plot.h"

namespace ferry::tools {
namespace {

FERRY_REGISTER_COMMAND(
    "bench-load",
    "Benchmark safetensors loads (pinned, sim:0 at 25 GB/s) and Module::to(sim:0) against "
    "memcpy, the modelled link and one contiguous copy",
    [](CLI::App& sub) -> std::function<int()> {
      auto options = std::make_shared<bench::LoadBenchOptions>();
      sub.add_option("--repeat", options->repeat, "Timed runs per case (median; >= 1)")
          ->capture_default_str();
      sub.add_flag("--quick", options->quick, "A 64 MiB file and 3 runs: a smoke test");
      sub.add_option("--dir", options->dir,
                     "Directory for the test file (default $TMPDIR or /tmp)");
      sub.add_option("--size-mib", options->file_mib, "The test file's size in MiB")
          ->capture_default_str();
      auto no_cold = std::make_shared<bool>(false);
      sub.add_flag("--no-cold", *no_cold, "Skip the cold-cache loads (they drop the file's pages)");
      auto no_modules = std::make_shared<bool>(false);
      sub.add_flag("--no-modules", *no_modules, "Skip the Module::to(sim:0) and CPU module tables");
      sub.add_option("--json", options->json,
                     "Also write the load table and the cold-cache figures to this JSON file");
      auto plot = std::make_shared<Figure>(Figure{"--plot", "", "plot_load.py"});
      sub.add_option("--plot", plot->png,
                     "Also draw the load table as a PNG bar chart (x baseline) with "
                     "tools/plot_load.py (needs python3-matplotlib)");
      return [options, no_cold, no_modules, plot] {
        options->cold = !*no_cold;
        options->modules = !*no_modules;
        check_figure(*plot);  // before the run, which takes a while
        std::string json;
        if (plot->wanted()) options->json_text = &json;
        const int status = bench::run_load_bench(*options);
        if (status != 0) return status;
        draw_figure(*plot, json, "ferry bench-load: loads against their baselines", stdout);
        return 0;
      };
    });

}  // namespace
}  // namespace ferry::tools

#endif  // FERRY_HAVE_BENCH
