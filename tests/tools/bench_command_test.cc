// `ferry bench` as a process (FERRY_TOOL, set by ctest): the --quick smoke runs of the copy and
// device benchmarks succeed, print their table, and --json writes one record per case and thread
// count with positive timings. Nothing here judges speed: timing belongs to `ferry bench` itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/tool.h"
#include "tests/tools/bench_json.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

using testing::run_ferry_tool;
using Result = testing::ToolRun;
using testing::bench_built;
using testing::json_field;
using testing::json_records;

TEST(BenchCommand, QuickCopyBenchWritesEveryCaseToJson) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  const testing::BenchJsonRun b = testing::run_bench_with_json(
      "bench --quick --repeat 10 --threads 1,2 --filter "
      "'^(contig_f32|transpose2d_f32_1024|copy_1_f32)$'");
  ASSERT_EQ(b.run.status, 0) << b.run.out;
  EXPECT_THAT(b.run.out, HasSubstr("xmemcpy"));
  ASSERT_FALSE(b.json.empty()) << "no JSON file written\n" << b.run.out;
  const std::vector<std::string>& rows = b.records;
  ASSERT_EQ(rows.size(), 6u) << b.json;  // 3 cases x 2 thread counts
  for (const std::string& row : rows) {
    EXPECT_TRUE(json_field(row, "threads") == 1 || json_field(row, "threads") == 2) << row;
    if (row.find("copy_1_f32") != std::string::npos) {
      EXPECT_GT(json_field(row, "ns_per_call"), 0) << row;
      EXPECT_LE(json_field(row, "ns_per_call_min"), json_field(row, "ns_per_call")) << row;
    } else {
      EXPECT_GT(json_field(row, "ms"), 0) << row;
      EXPECT_GT(json_field(row, "memcpy_ms"), 0) << row;
      EXPECT_GT(json_field(row, "ratio_memcpy"), 0) << row;
      EXPECT_LE(json_field(row, "ms_min"), json_field(row, "ms")) << row;
      EXPECT_GE(json_field(row, "ms_max"), json_field(row, "ms")) << row;
    }
  }
}

TEST(BenchCommand, BadOptionsAreRefusedWithAMessage) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  const Result few = run_ferry_tool("bench --quick --repeat 3");
  EXPECT_NE(few.status, 0);
  EXPECT_THAT(few.out, HasSubstr("expected --repeat of at least 10, but got 3"));
  const Result threads = run_ferry_tool("bench --quick --threads 0");
  EXPECT_NE(threads.status, 0);
  EXPECT_THAT(threads.out, HasSubstr("positive integers, but got \"0\""));
  const Result regex = run_ferry_tool("bench --quick --filter '('");
  EXPECT_NE(regex.status, 0);
  EXPECT_THAT(regex.out, HasSubstr("expected a regular expression"));
}

// A --json path that cannot be written is refused before the benchmark runs, not after it.
TEST(BenchCommand, UnwritableJsonPathFailsBeforeRunning) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  const Result r = run_ferry_tool("bench --quick --json /nonexistent-ferry-dir/out.json");
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("cannot write --json file \"/nonexistent-ferry-dir/out.json\""));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("contig_f32"))) << "the benchmark ran first";
  const Result plot = run_ferry_tool("bench --devices --quick --plot /tmp/x.png");
  EXPECT_NE(plot.status, 0);
  EXPECT_THAT(plot.out, HasSubstr("--devices benchmark has no JSON to plot"));
}

// `--json -` writes the JSON, and only the JSON, on stdout (the table goes to stderr), so that
// `ferry bench --json - | jq` works.
TEST(BenchCommand, JsonToStdoutIsTheOnlyThingOnStdout) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  // run_ferry_tool appends 2>&1 to the command; the pipe through cat keeps the streams apart.
  const Result r = run_ferry_tool(
      "bench --quick --repeat 10 --threads 1 --filter '^contig_f32$' --json - 2>/dev/null | cat");
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.front(), '{') << r.out;
  EXPECT_EQ(json_records(r.out).size(), 1u) << r.out;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("xmemcpy")));
  const Result table = run_ferry_tool(
      "bench --quick --repeat 10 --threads 1 --filter '^contig_f32$' --json - 2>&1 >/dev/null | "
      "cat");
  EXPECT_THAT(table.out, HasSubstr("xmemcpy"));
}

TEST(BenchCommand, QuickDeviceBenchRuns) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  const Result r = run_ferry_tool("bench --devices --quick --repeat 10 --filter 'h2d'");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("h2d_dense_pinned_nonblocking"));
  EXPECT_THAT(r.out, HasSubstr("bound: dense h2d"));
}

TEST(BenchCommand, WithoutBenchmarksTheCommandSaysSo) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (bench_built()) GTEST_SKIP() << "this build has the benchmarks";
  const Result r = run_ferry_tool("bench --quick");
  EXPECT_NE(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr("built without the benchmarks"));
}

}  // namespace
}  // namespace ferry
