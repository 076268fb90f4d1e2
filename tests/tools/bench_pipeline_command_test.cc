// `ferry bench-pipeline` as a process (FERRY_TOOL, set by ctest): the --quick smoke run succeeds,
// prints the throughput table and a timeline with one lane per device and stream, and --trace
// writes a Chrome trace whose events name forwards, backwards and copies; bad options are
// refused. Nothing here judges speed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/tool.h"
#include "tests/tools/bench_json.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using testing::run_ferry_tool;
using Result = testing::ToolRun;
using testing::bench_built;

TEST(BenchPipelineCommand, QuickRunPrintsTheTableTheTimelineAndAChromeTrace) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  const std::filesystem::path trace = std::filesystem::temp_directory_path() /
                                      ("ferry_bench_pipeline_test_" + std::to_string(getpid()));
  const Result r = run_ferry_tool("bench-pipeline --quick --trace " + trace.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("ideal m/(m+n-1)"));
  EXPECT_THAT(r.out, HasSubstr("sim:3 compute"));
  EXPECT_THAT(r.out, HasSubstr("sim:0 copy"));
  std::ifstream in(trace);
  ASSERT_TRUE(in.good()) << "no trace at " << trace << "\n" << r.out;
  const nlohmann::json events = nlohmann::json::parse(in);
  std::filesystem::remove(trace);
  std::set<std::string> kinds;
  for (const auto& e : events) {
    if (e.at("ph") == "X") {
      kinds.insert(e.at("cat").get<std::string>());
      EXPECT_GE(e.at("dur").get<double>(), 0) << e.dump();
    }
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"backward", "copy", "forward", "recompute"}));
}

TEST(BenchPipelineCommand, BadOptionsAreRefusedWithAMessage) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  const Result repeat = run_ferry_tool("bench-pipeline --quick --repeat 0");
  EXPECT_NE(repeat.status, 0);
  EXPECT_THAT(repeat.out, HasSubstr("expected --repeat >= 1, but got 0"));
  const Result trace =
      run_ferry_tool("bench-pipeline --quick --trace /nonexistent-ferry-dir/t.json");
  EXPECT_NE(trace.status, 0);
  EXPECT_THAT(trace.out, HasSubstr("expected a writable file, but cannot open"));
}

}  // namespace
}  // namespace ferry
