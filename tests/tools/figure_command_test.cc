// The bench commands' figures as processes (FERRY_TOOL, set by ctest): `bench --plot`,
// `bench-ops --plot`, `bench-pipeline --plot` and `--timeline`, `bench-load --plot` each write a
// valid PNG from a small run; an unwritable path, or no python3 to draw with, fails before the run
// with a message naming the option and the path. Skipped without matplotlib. Nothing here looks at
// the pictures.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/support/tool.h"
#include "tests/tools/bench_json.h"
#include "tests/tools/figure.h"

namespace ferry {
namespace {

using testing::bench_built;
using ::testing::HasSubstr;
using testing::is_png;
using ::testing::Not;
using testing::run_ferry_tool;
using testing::temp_png;
using Result = testing::ToolRun;

#define FERRY_SKIP_WITHOUT_BENCH()                                                              \
  do {                                                                                          \
    FERRY_SKIP_WITHOUT_TOOL();                                                                  \
    if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)"; \
  } while (0)

TEST(FigureCommand, BenchPlotWritesAPng) {
  FERRY_SKIP_WITHOUT_BENCH();
  FERRY_SKIP_WITHOUT_MATPLOTLIB();
  const auto png = temp_png("bench_plot");
  const Result r = run_ferry_tool(
      "bench --quick --repeat 10 --threads 1 --filter '^contig_f32$' "
      "--plot " +
      png.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("wrote " + png.string()));
  EXPECT_TRUE(is_png(png)) << png;
  std::filesystem::remove(png);
}

TEST(FigureCommand, BenchOpsPlotWritesAPng) {
  FERRY_SKIP_WITHOUT_BENCH();
  FERRY_SKIP_WITHOUT_MATPLOTLIB();
  const auto png = temp_png("bench_ops_plot");
  const Result r = run_ferry_tool(
      "bench-ops --quick --threads 1 --filter '^(matmul|add_1elem$|linear_bert_f32)' --plot " +
      png.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("wrote " + png.string()));
  EXPECT_TRUE(is_png(png)) << png;
  std::filesystem::remove(png);
}

// One quick run draws both of bench-pipeline's figures, and still writes its JSON.
TEST(FigureCommand, BenchPipelinePlotAndTimelineWritePngs) {
  FERRY_SKIP_WITHOUT_BENCH();
  FERRY_SKIP_WITHOUT_MATPLOTLIB();
  const auto plot = temp_png("bench_pipeline_plot");
  const auto timeline = temp_png("bench_pipeline_timeline");
  const testing::BenchJsonRun b = testing::run_bench_with_json(
      "bench-pipeline --quick --plot " + plot.string() + " --timeline " + timeline.string());
  ASSERT_EQ(b.run.status, 0) << b.run.out;
  EXPECT_THAT(b.run.out, HasSubstr("wrote " + plot.string()));
  EXPECT_THAT(b.run.out, HasSubstr("wrote " + timeline.string()));
  EXPECT_TRUE(is_png(plot)) << plot;
  EXPECT_TRUE(is_png(timeline)) << timeline;
  ASSERT_EQ(b.records.size(), 1u) << b.json;  // --quick: 4 stages x 4 chunks
  EXPECT_EQ(testing::json_field(b.records[0], "stages"), 4) << b.records[0];
  EXPECT_GT(testing::json_field(b.records[0], "utilization"), 0) << b.records[0];
  EXPECT_THAT(b.json, HasSubstr("\"timeline\": {"));
  std::filesystem::remove(plot);
  std::filesystem::remove(timeline);
}

TEST(FigureCommand, BenchLoadPlotWritesAPng) {
  FERRY_SKIP_WITHOUT_BENCH();
  FERRY_SKIP_WITHOUT_MATPLOTLIB();
  const auto png = temp_png("bench_load_plot");
  const testing::BenchJsonRun b = testing::run_bench_with_json(
      "bench-load --quick --size-mib 8 --repeat 1 --no-cold --no-modules --plot " + png.string());
  ASSERT_EQ(b.run.status, 0) << b.run.out;
  EXPECT_THAT(b.run.out, HasSubstr("wrote " + png.string()));
  EXPECT_TRUE(is_png(png)) << png;
  ASSERT_GE(b.records.size(), 3u) << b.json;
  for (const std::string& row : b.records) EXPECT_GT(testing::json_field(row, "ms"), 0) << row;
  std::filesystem::remove(png);
}

// Every figure option refuses a path it cannot write before its benchmark starts (the run's
// first line never appears).
TEST(FigureCommand, UnwritablePathsFailBeforeTheRun) {
  FERRY_SKIP_WITHOUT_BENCH();
  const std::string bad = "/nonexistent-ferry-dir/out.png";
  struct Case {
    std::string args, option, first_line;
  };
  for (const Case& c :
       {Case{"bench --quick --plot", "--plot", "contig_f32"},
        Case{"bench-ops --quick --plot", "--plot", "ferry bench-ops:"},
        Case{"bench-pipeline --quick --plot", "--plot", "ferry bench-pipeline:"},
        Case{"bench-pipeline --quick --timeline", "--timeline", "ferry bench-pipeline:"}}) {
    const Result r = run_ferry_tool(c.args + " " + bad);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_THAT(r.out, HasSubstr(c.option + ": cannot write \"" + bad + "\"")) << c.args;
    EXPECT_THAT(r.out, Not(HasSubstr(c.first_line))) << c.args << ": the benchmark ran first";
  }
  const Result json = run_ferry_tool("bench-pipeline --quick --json /nonexistent-ferry-dir/o.json");
  EXPECT_NE(json.status, 0);
  EXPECT_THAT(json.out, HasSubstr("--json: expected a writable file"));
  EXPECT_THAT(json.out, Not(HasSubstr("ferry bench-pipeline:")));
}

// Without an interpreter, or with one that lacks matplotlib, the figure is refused up front
// with what to install.
TEST(FigureCommand, MissingPythonOrMatplotlibFailsBeforeTheRun) {
  FERRY_SKIP_WITHOUT_BENCH();
  const auto png = temp_png("no_python");
  const Result none = run_ferry_tool("bench-ops --quick --plot " + png.string(),
                                     "FERRY_PYTHON=/nonexistent-ferry-dir/python3");
  EXPECT_NE(none.status, 0);
  EXPECT_THAT(none.out, HasSubstr("--plot: cannot run /nonexistent-ferry-dir/python3"));
  EXPECT_THAT(none.out, Not(HasSubstr("ferry bench-ops:")));
  const Result bare = run_ferry_tool("bench-pipeline --quick --timeline " + png.string(),
                                     "FERRY_PYTHON=/bin/false");
  EXPECT_NE(bare.status, 0);
  EXPECT_THAT(bare.out, HasSubstr("--timeline: /bin/false cannot import matplotlib"));
  EXPECT_THAT(bare.out, HasSubstr("python3-matplotlib"));
  EXPECT_THAT(bare.out, Not(HasSubstr("ferry bench-pipeline:")));
  EXPECT_FALSE(std::filesystem::exists(png));
}

}  // namespace
}  // namespace ferry
