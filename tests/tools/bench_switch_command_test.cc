// `ferry bench-switch` as a process (FERRY_TOOL, set by ctest): the --quick smoke run succeeds,
// prints every case for both models, writes one JSON record per case and model, and its trace
// holds the copy-stream groups and compute-stream layers of one switch; bad options are refused
// before anything runs. Nothing here judges speed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/tool.h"
#include "tests/tools/bench_json.h"

namespace ferry {
namespace {

using testing::bench_built;
using ::testing::HasSubstr;

TEST(BenchSwitchCommand, QuickRunPrintsEveryCaseWritesJsonAndATrace) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  const std::filesystem::path trace = std::filesystem::temp_directory_path() /
                                      ("ferry_bench_switch_test_" + std::to_string(getpid()));
  const testing::BenchJsonRun r =
      testing::run_bench_with_json("bench-switch --quick --trace " + trace.string());
  ASSERT_EQ(r.run.status, 0) << r.run.out;
  for (const char* part : {"bert-tiny:", "resnet18:", "load, then run", "per layer, host sync",
                           "PipeSwitch, host sync", "ferry", "ferry + direct", "ferry, parallel",
                           "reads in place:", "stop-and-start", "target:"}) {
    EXPECT_THAT(r.run.out, HasSubstr(part));
  }
  // Ready, six switch variants (ferry + direct and ferry, parallel among them: the sim has two
  // devices) and stop-and-start (a new process that built the model, loaded the file and ran:
  // slower than ready), for each of the two models.
  ASSERT_EQ(r.records.size(), 16u) << r.json;
  for (const std::string& record : r.records) {
    if (record.find("\"stop-and-start\"") == std::string::npos) continue;
    EXPECT_GT(testing::json_field(record, "ms"), testing::json_field(record, "ready_ms")) << record;
  }
  for (const std::string& record : r.records) {
    EXPECT_GT(testing::json_field(record, "ms"), 0) << record;
    EXPECT_GT(testing::json_field(record, "ready_ms"), 0) << record;
  }
  std::ifstream in(trace);
  ASSERT_TRUE(in.good()) << "no trace at " << trace;
  const nlohmann::json events = nlohmann::json::parse(in);
  std::filesystem::remove(trace);
  int copies = 0, layers = 0;
  for (const auto& e : events) {
    if (e.value("ph", "") != "X") continue;
    (e.value("cat", "") == "copy" ? copies : layers) += 1;
    EXPECT_GE(e.value("dur", -1.0), 0.0) << e.dump();
  }
  EXPECT_GE(copies, 1);
  EXPECT_EQ(layers, 4) << "bert-tiny has 4 switch layers";
}

TEST(BenchSwitchCommand, BadOptionsAreRefusedBeforeTheRun) {
  FERRY_SKIP_WITHOUT_TOOL();
  if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)";
  const testing::ToolRun unwritable =
      testing::run_ferry_tool("bench-switch --quick --json /nonexistent/dir/out.json");
  EXPECT_NE(unwritable.status, 0);
  EXPECT_THAT(unwritable.out, HasSubstr("cannot write /nonexistent/dir/out.json"));
  EXPECT_THAT(unwritable.out, ::testing::Not(HasSubstr("bert-tiny:")));
  const testing::ToolRun bad_model = testing::run_ferry_tool("bench-switch --models vgg16");
  EXPECT_NE(bad_model.status, 0);
  EXPECT_THAT(bad_model.out, HasSubstr("resnet152"));
}

}  // namespace
}  // namespace ferry
