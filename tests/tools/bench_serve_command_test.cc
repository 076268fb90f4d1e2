// `ferry bench-serve` as a process (FERRY_TOOL, set by ctest): the --quick run serves both setups
// without a failed request, prints the table, the seed and the per-model counts, and switches
// in the switching setup but never in the one-model-per-device baseline; bad options are refused.
// Nothing here judges speed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/support/tool.h"
#include "tests/tools/bench_json.h"

namespace ferry {
namespace {

using testing::bench_built;
using ::testing::HasSubstr;

TEST(BenchServeCommand, QuickRunServesEverySetup) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  const testing::ToolRun r =
      testing::run_ferry_tool("bench-serve --quick --requests 24 --clients 3 --seed 7");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("Zipf(1.00) with seed 7"));
  EXPECT_THAT(r.out, HasSubstr("per model (switching, in process):"));
  const std::regex switching(
      R"(\| switching, in process \| 2 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| ([0-9]+) of 24 \| 0 \|)");
  const std::regex workers(
      R"(\| switching, worker processes \| 2 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| ([0-9]+) of 24 \| 0 \|)");
  const std::regex baseline(
      R"(\| one model per device \| 4 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| 0 of 24 \| 0 \|)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, switching)) << r.out;
  EXPECT_GT(std::stoi(m[1].str()), 0) << r.out;
  ASSERT_TRUE(std::regex_search(r.out, m, workers)) << r.out;
  EXPECT_GT(std::stoi(m[1].str()), 0) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, baseline)) << r.out;
}

TEST(BenchServeCommand, BadOptionsAreRefused) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  const testing::ToolRun three = testing::run_ferry_tool("bench-serve --models a,b,c");
  EXPECT_NE(three.status, 0);
  const testing::ToolRun zipf = testing::run_ferry_tool("bench-serve --quick --zipf -1");
  EXPECT_NE(zipf.status, 0);
  EXPECT_THAT(zipf.out, HasSubstr("exponent >= 0"));
}

}  // namespace
}  // namespace ferry
