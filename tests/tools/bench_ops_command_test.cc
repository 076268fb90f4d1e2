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

namespace ferry {
namespace {

using ::testing::HasSubstr;
using testing::run_ferry_tool;
using Result = testing::ToolRun;

bool bench_built() {
#if defined(FERRY_TEST_BENCH_BUILT)
  return true;
#else
  return false;
#endif
}

double field(const std::string& record, const std::string& key) {
  const std::string needle = "\"" + key + "\": ";
  const size_t at = record.find(needle);
  if (at == std::string::npos) return -1;
  return std::strtod(record.c_str() + at + needle.size(), nullptr);
}

std::vector<std::string> records(const std::string& json) {
  std::vector<std::string> out;
  std::istringstream in(json);
  for (std::string line; std::getline(in, line);) {
    if (line.find("{\"case\": ") != std::string::npos) out.push_back(line);
  }
  return out;
}

TEST(BenchOpsCommand, QuickRunWritesEveryCaseToJson) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  const std::filesystem::path json =
      std::filesystem::temp_directory_path() / ("ferry_bench_ops_test_" + std::to_string(getpid()));
  const Result r = run_ferry_tool(
      "bench-ops --quick --threads 1,2 --filter '^(matmul|add_1elem$|conv3x3.*nhwc|mlp)' --json " +
      json.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("FMA peak"));
  EXPECT_THAT(r.out, HasSubstr("met?"));
  std::ifstream in(json);
  ASSERT_TRUE(in.good()) << "no JSON file at " << json << "\n" << r.out;
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(json);
  const std::vector<std::string> rows = records(text.str());
  ASSERT_EQ(rows.size(), 8u) << text.str();  // 4 cases x 2 thread counts
  for (const std::string& row : rows) {
    EXPECT_TRUE(field(row, "threads") == 1 || field(row, "threads") == 2) << row;
    const bool per_call = row.find("add_1elem") != std::string::npos;
    const std::string unit = per_call ? "ns_per_call" : "ms";
    EXPECT_GT(field(row, unit), 0) << row;
    EXPECT_LE(field(row, unit + "_min"), field(row, unit)) << row;
    EXPECT_GE(field(row, unit + "_max"), field(row, unit)) << row;
    if (row.find("matmul") != std::string::npos) {
      EXPECT_GT(field(row, "peak_gflops"), 0) << row;
      EXPECT_GT(field(row, "peak_fraction"), 0) << row;
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
