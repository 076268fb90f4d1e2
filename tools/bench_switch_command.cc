// `ferry bench-switch`: the model-switching benchmark (bench/switch_bench.cc): ready, load then
// run, per-layer and PipeSwitch-style pipelining with a host synchronize per group, and ferry's
// optimal grouping with device-side waits, on a sim device with a PCIe-like link and V100-like
// modelled compute; optionally one ferry switch's timeline as a Chrome trace and a PNG.
// Registered only when the tool is built with the benchmarks (FERRY_BUILD_BENCH=ON).
#if defined(FERRY_HAVE_BENCH)

#include <memory>

#include "bench/switch_bench.h"
#include "tools/command.h"
#include "tools/plot.h"

namespace ferry::tools {
namespace {

FERRY_REGISTER_COMMAND(
    "bench-switch",
    "Benchmark model switching on a sim device (PCIe-like link, V100-like modelled compute): "
    "ready, load then run, per layer and PipeSwitch-style with host syncs, ferry's optimal "
    "groups with device waits, and parallel transmission through sim:1; ResNet-152, ResNet-50 and "
    "BERT-base by default",
    [](CLI::App& sub) -> std::function<int()> {
      auto options = std::make_shared<bench::SwitchBenchOptions>();
      sub.add_option("--models", options->models,
                     "Architectures (resnet18/34/50/101/152, bert-base, bert-tiny)")
          ->capture_default_str();
      sub.add_option(
             "--compute", options->compute,
             "Modelled FLOP/s of the device (FERRY_SIM_COMPUTE's format, timing-only); 0: real "
             "compute (the CPU kernels' own time, outputs computed)")
          ->capture_default_str();
      sub.add_option("--bandwidth", options->bandwidth, "Host-to-device link bandwidth")
          ->capture_default_str();
      sub.add_option("--latency", options->latency, "Host-to-device (and peer) cost per copy")
          ->capture_default_str();
      sub.add_option("--peer-bandwidth", options->peer_bandwidth,
                     "Peer link bandwidth (sim:1 to sim:0), for the parallel column")
          ->capture_default_str();
      sub.add_option("--batch", options->batch, "Batch of each request")->capture_default_str();
      sub.add_option("--repeat,--repeats", options->repeat, "Switches per case (median)")
          ->capture_default_str();
      sub.add_option("--trace", options->trace,
                     "Also write one ferry switch of the first model as a Chrome trace (JSON)");
      sub.add_option("--json", options->json,
                     "Also write the results to this JSON file (\"-\": JSON on stdout, the tables "
                     "on stderr)");
      auto timeline = std::make_shared<Figure>(Figure{"--timeline", "", "plot_timeline.py"});
      sub.add_option("--timeline", timeline->png,
                     "Also draw one ferry switch's timeline (copy stream groups, compute layers) "
                     "as a PNG with tools/plot_timeline.py (needs python3-matplotlib)");
      sub.add_flag("--quick", options->quick, "bert-tiny and resnet18, 3 switches: a smoke test");
      return [options, timeline] {
        check_figure(*timeline);
        std::string trace;
        if (timeline->wanted()) options->trace_text = &trace;
        const int status = bench::run_switch_bench(*options);
        draw_figure(*timeline, trace, "ferry bench-switch: one switch's timeline",
                    options->json == "-" ? stderr : stdout);
        return status;
      };
    });

}  // namespace
}  // namespace ferry::tools

#endif  // FERRY_HAVE_BENCH
