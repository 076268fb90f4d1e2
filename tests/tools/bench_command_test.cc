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

namespace ferry {
namespace {

using ::testing::HasSubstr;

using testing::run_ferry_tool;
using Result = testing::ToolRun;

// The tool is built without the benchmarks in the sanitizer configurations (FERRY_BUILD_BENCH
// is OFF there to save build time); CMake tells this test which configuration it belongs to.
bool bench_built() {
#if defined(FERRY_TEST_BENCH_BUILT)
  return true;
#else
  return false;
#endif
}

// The numeric value of `"key": <number>` in one JSON record, or -1 when absent.
double field(const std::string& record, const std::string& key) {
  const std::string needle = "\"" + key + "\": ";
  const size_t at = record.find(needle);
  if (at == std::string::npos) return -1;
  return std::strtod(record.c_str() + at + needle.size(), nullptr);
}

// Every line of the JSON file that holds one case record.
std::vector<std::string> records(const std::string& json) {
  std::vector<std::string> out;
  std::istringstream in(json);
  for (std::string line; std::getline(in, line);) {
    if (line.find("{\"case\": ") != std::string::npos) out.push_back(line);
  }
  return out;
}

TEST(BenchCommand, QuickCopyBenchWritesEveryCaseToJson) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  const std::filesystem::path json =
      std::filesystem::temp_directory_path() / ("ferry_bench_test_" + std::to_string(getpid()));
  const Result r = run_ferry_tool(
      "bench --quick --repeat 10 --threads 1,2 --filter "
      "'^(contig_f32|transpose2d_f32_1024|copy_1_f32)$' --json " +
      json.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("xmemcpy"));
  std::ifstream in(json);
  ASSERT_TRUE(in.good()) << "no JSON file at " << json << "\n" << r.out;
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(json);
  const std::vector<std::string> rows = records(text.str());
  ASSERT_EQ(rows.size(), 6u) << text.str();  // 3 cases x 2 thread counts
  for (const std::string& row : rows) {
    EXPECT_TRUE(field(row, "threads") == 1 || field(row, "threads") == 2) << row;
    if (row.find("copy_1_f32") != std::string::npos) {
      EXPECT_GT(field(row, "ns_per_call"), 0) << row;
      EXPECT_LE(field(row, "ns_per_call_min"), field(row, "ns_per_call")) << row;
    } else {
      EXPECT_GT(field(row, "ms"), 0) << row;
      EXPECT_GT(field(row, "memcpy_ms"), 0) << row;
      EXPECT_GT(field(row, "ratio_memcpy"), 0) << row;
      EXPECT_LE(field(row, "ms_min"), field(row, "ms")) << row;
      EXPECT_GE(field(row, "ms_max"), field(row, "ms")) << row;
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
  EXPECT_EQ(records(r.out).size(), 1u) << r.out;
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
