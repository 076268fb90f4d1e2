// `ferry bench`: the copy benchmark (bench/copy_bench.cc) with its options. A tool built without
// the benchmarks (FERRY_BUILD_BENCH=OFF) keeps the command but only says so.
#include <cstdio>

#include "tools/command.h"

#if defined(FERRY_HAVE_BENCH)

#include <sstream>
#include <string>

#include "bench/copy_bench.h"
#include "bench/device_copy_bench.h"
#include "ferry/core/error.h"
#include "tools/plot.h"

namespace ferry::tools {
namespace {

std::vector<int> parse_threads(const std::string& list) {
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
                "bench --threads: expected a comma-separated list of positive integers, but got \"",
                list, "\"");
    out.push_back(n);
  }
  FERRY_CHECK(!out.empty(), "bench --threads: expected at least one thread count");
  return out;
}

FERRY_REGISTER_COMMAND(
    "bench",
    "Benchmark copy_ on the CPU against memcpy (and PyTorch when built with it); under a minute "
    "(two with PyTorch)",
    [](CLI::App& sub) -> std::function<int()> {
      auto options = std::make_shared<bench::Options>();
      auto threads = std::make_shared<std::string>("1,2");
      sub.add_option("--threads", *threads, "Thread counts to run at, comma-separated")
          ->capture_default_str();
      sub.add_option("--repeat", options->repeat, "Timed runs per case (median; >= 10)")
          ->capture_default_str();
      sub.add_option("--filter", options->filter, "Only cases whose name matches this regex");
      sub.add_option("--json", options->json,
                     "Also write the results to this JSON file (\"-\": JSON on stdout, the table "
                     "on stderr)");
      auto plot = std::make_shared<Figure>(Figure{"--plot", "", "plot_bench.py"});
      sub.add_option("--plot", plot->png,
                     "Also draw the results as a PNG bar chart (x memcpy, x PyTorch) with "
                     "tools/plot_bench.py (needs python3-matplotlib)");
      sub.add_flag("--quick", options->quick, "Small sizes: a smoke test of a few seconds");
      sub.add_option("--simd", options->simd, "Force a SIMD target (AVX3, AVX2, SSE4, ...)");
      auto devices = std::make_shared<bool>(false);
      sub.add_flag("--devices", *devices,
                   "Device copies instead: host<->sim, sim<->sim (and CUDA with a GPU), against "
                   "memcpy (honours --repeat, --filter, --quick)");
      auto check = std::make_shared<bool>(false);
      sub.add_flag("--check", *check,
                   "With --devices: exit with 1 when the sim bound (dense h2d <= 1.2 x memcpy + "
                   "per-copy overhead) does not hold, 2 when it could not be measured");
      return [options, threads, devices, check, plot] {
        FERRY_CHECK(!*devices || !plot->wanted(),
                    "bench --plot: draws the copy benchmark's table; the --devices benchmark "
                    "has no JSON to plot yet");
        if (*devices) {
          return bench::run_device_copy_bench({.repeat = options->repeat,
                                               .filter = options->filter,
                                               .quick = options->quick,
                                               .check = *check});
        }
        FERRY_CHECK(!*check,
                    "bench --check: expected --devices with it (the CPU benchmark has "
                    "no pass/fail bound), but got --check alone");
        options->threads = parse_threads(*threads);
        if (!plot->wanted()) return bench::run_copy_bench(*options);
        check_figure(*plot);  // before the run, which takes a while
        std::string json;
        options->json_text = &json;
        const int status = bench::run_copy_bench(*options);
        if (status != 0) return status;
        draw_figure(*plot, json, "ferry bench: copy_", options->json == "-" ? stderr : stdout);
        return 0;
      };
    });

}  // namespace
}  // namespace ferry::tools

#else

namespace ferry::tools {
namespace {

FERRY_REGISTER_COMMAND("bench", "Benchmark copy_ (not built: configure with FERRY_BUILD_BENCH=ON)",
                       [](CLI::App& sub) -> std::function<int()> {
                         sub.allow_extras();
                         return [] {
                           std::fputs(
                               "ferry: error: this ferry was built without the benchmarks; "
                               "configure with -DFERRY_BUILD_BENCH=ON\n",
                               stderr);
                           return 1;
                         };
                       });

}  // namespace
}  // namespace ferry::tools

#endif  // FERRY_HAVE_BENCH
