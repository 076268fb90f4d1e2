// `ferry bench-ops` as a process (FERRY_TOOL, set by ctest): the --quick smoke run succeeds,
// prints its table and the FMA peak it measured, and --json writes one record per case and
// thread count with positive timings; bad options are refused. Nothing here judges speed.
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

TEST(BenchOpsCommand, QuickRunWritesEveryCaseToJson) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  const testing::BenchJsonRun b = testing::run_bench_with_json(
      "bench-ops --quick --threads 1,2 --filter '^(matmul_f32|add_1elem$|conv3x3.*nhwc|mlp)'");
  ASSERT_EQ(b.run.status, 0) << b.run.out;
  EXPECT_THAT(b.run.out, HasSubstr("FMA peak"));
  EXPECT_THAT(b.run.out, HasSubstr("met?"));
  ASSERT_FALSE(b.json.empty()) << "no JSON file written\n" << b.run.out;
  const std::vector<std::string>& rows = b.records;
  ASSERT_EQ(rows.size(), 8u) << b.json;  // 4 cases x 2 thread counts
  for (const std::string& row : rows) {
    EXPECT_TRUE(json_field(row, "threads") == 1 || json_field(row, "threads") == 2) << row;
    const bool per_call = row.find("add_1elem") != std::string::npos;
    const std::string unit = per_call ? "ns_per_call" : "ms";
    EXPECT_GT(json_field(row, unit), 0) << row;
    EXPECT_LE(json_field(row, unit + "_min"), json_field(row, unit)) << row;
    EXPECT_GE(json_field(row, unit + "_max"), json_field(row, unit)) << row;
    if (row.find("matmul") != std::string::npos) {
      EXPECT_GT(json_field(row, "peak_gflops"), 0) << row;
      EXPECT_GT(json_field(row, "peak_fraction"), 0) << row;
    }
  }
}

TEST(BenchOpsCommand, BadOptionsAreRefusedWithAMessage) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  const Result few = run_ferry_tool("bench-ops --quick --repeat 2");
  EXPECT_NE(few.status, 0);
  EXPECT_THAT(few.out, HasSubstr("expected --repeat of at least 3, but got 2"));
  const Result threads = run_ferry_tool("bench-ops --quick --threads 0");
  EXPECT_NE(threads.status, 0);
  EXPECT_THAT(threads.out, HasSubstr("positive integers, but got \"0\""));
  const Result both = run_ferry_tool("bench-ops --quick --large");
  EXPECT_NE(both.status, 0);
  EXPECT_THAT(both.out, HasSubstr("at most one of --quick and --large"));
  const Result json = run_ferry_tool("bench-ops --quick --json /nonexistent-ferry-dir/out.json");
  EXPECT_NE(json.status, 0);
  EXPECT_THAT(json.out, HasSubstr("cannot write --json file"));
}

}  // namespace
}  // namespace ferry
