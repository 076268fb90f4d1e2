// `ferry bench-ops`: the operator benchmark (bench/ops_bench.cc) with its options: matmul against
// the measured FMA peak, linear, conv2d, per-op overhead and an MLP training step against
// PyTorch; --plot draws the results (tools/plot_ops.py, checked before the run). Registered only
// when the tool is built with the benchmarks (FERRY_BUILD_BENCH=ON).
#if defined(FERRY_HAVE_BENCH)

#include <memory>
#include <sstream>
#include <string>

#include "bench/ops_bench.h"
#include "ferry/core/error.h"
#include "tools/command.h"
#include "tools/plot.h"

namespace ferry::tools {
namespace {

std::vector<int> parse_thread_list(const std::string& list) {
  std::vector<int> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    FERRY_CHECK(used == item.size() && !item.empty() && n >= 1,
                "bench-ops --threads: expected a comma-separated list of positive integers, but "
                "got \"",
                list, "\"");
    out.push_back(n);
  }
  FERRY_CHECK(!out.empty(), "bench-ops --threads: expected at least one thread count");
  return out;
}

FERRY_REGISTER_COMMAND(
    "bench-ops",
    "Benchmark matmul, linear, conv2d, per-op overhead and an MLP training step against PyTorch "
    "(when built with it) and the issue's targets; about two minutes",
    [](CLI::App& sub) -> std::function<int()> {
      auto options = std::make_shared<bench::OpsOptions>();
      auto threads = std::make_shared<std::string>("1,2");
      sub.add_option("--threads", *threads, "Thread counts to run at, comma-separated")
          ->capture_default_str();
      sub.add_option("--repeat,--repeats", options->repeat,
                     "Timed runs per case (median; >= 3; default 11, 31 with --large)");
      sub.add_option("--filter", options->filter, "Only cases whose name matches this regex");
      sub.add_option("--json", options->json,
                     "Also write the results to this JSON file (\"-\": JSON on stdout, the table "
                     "on stderr)");
      auto plot = std::make_shared<Figure>(Figure{"--plot", "", "plot_ops.py"});
      sub.add_option("--plot", plot->png,
                     "Also draw the results as a PNG bar chart (x PyTorch, x target, GFLOP/s) "
                     "with tools/plot_ops.py (needs python3-matplotlib)");
      sub.add_flag("--quick", options->quick, "Tiny sizes: a smoke test of a few seconds");
      sub.add_flag("--large", options->large, "Convolutions at batch 32, and 31 runs per case");
      return [options, threads, plot] {
        FERRY_CHECK(!(options->quick && options->large),
                    "bench-ops: expected at most one of --quick and --large, but got both");
        options->threads = parse_thread_list(*threads);
        check_figure(*plot);  // before the run, which takes a while
        std::string json;
        if (plot->wanted()) options->json_text = &json;
        const int status = bench::run_ops_bench(*options);
        if (status != 0) return status;
        draw_figure(*plot, json, "ferry bench-ops: operators against PyTorch",
                    options->json == "-" ? stderr : stdout);
        return 0;
      };
    });

}  // namespace
}  // namespace ferry::tools

#endif  // FERRY_HAVE_BENCH
