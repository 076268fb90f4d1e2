// `ferry bench-pipeline`: the pipeline benchmark (bench/pipeline_bench.cc): GPipe throughput
// against the ideal m / (m + n - 1) on sim devices under the compute-time model, copy overlap,
// two stages with real compute, and a timeline (text Gantt, optional Chrome trace), with its
// figures: --plot draws the throughput table (tools/plot_pipeline.py), --timeline the timeline
// (tools/plot_timeline.py), both checked before the run. Registered only when the tool is built
// with the benchmarks (FERRY_BUILD_BENCH=ON).
#if defined(FERRY_HAVE_BENCH)

#include <cstdio>
#include <memory>
#include <string>

#include "bench/pipeline_bench.h"
#include "tools/command.h"
#include "tools/plot.h"

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
      sub.add_option("--json", options->json,
                     "Also write the results to this JSON file (\"-\": JSON on stdout, the tables "
                     "on stderr)");
      sub.add_option("--timeline-checkpoint", options->timeline_checkpoint,
                     "Checkpoint mode of the timeline's run (always, except_last, never)")
          ->check(CLI::IsMember({"always", "except_last", "never"}))
          ->capture_default_str();
      sub.add_option("--timeline-stages", options->timeline_stages,
                     "Stages of the timeline's run (one sim device each)")
          ->check(CLI::Range(2, 8))
          ->capture_default_str();
      auto plot = std::make_shared<Figure>(Figure{"--plot", "", "plot_pipeline.py"});
      sub.add_option("--plot", plot->png,
                     "Also draw the throughput table as a PNG bar chart (utilization vs the ideal "
                     "schedule) with tools/plot_pipeline.py (needs python3-matplotlib)");
      auto timeline = std::make_shared<Figure>(Figure{"--timeline", "", "plot_timeline.py"});
      sub.add_option("--timeline", timeline->png,
                     "Also draw the timeline as a PNG (one row per device and stream) with "
                     "tools/plot_timeline.py (needs python3-matplotlib)");
      sub.add_flag("--quick", options->quick, "Fewer, smaller cases: a smoke test");
      return [options, plot, timeline] {
        check_figure(*plot);  // both before the run, which takes a while
        check_figure(*timeline);
        std::string json, trace;
        if (plot->wanted()) options->json_text = &json;
        if (timeline->wanted()) options->trace_text = &trace;
        const int status = bench::run_pipeline_bench(*options);
        std::FILE* log = options->json == "-" ? stderr : stdout;
        // A missed target (status 1) still drew its tables: draw its figures as well.
        draw_figure(*plot, json, "ferry bench-pipeline: GPipe utilization vs the ideal", log);
        draw_figure(*timeline, trace, "ferry bench-pipeline: one step's timeline", log);
        return status;
      };
    });

}  // namespace
}  // namespace ferry::tools

#endif  // FERRY_HAVE_BENCH
