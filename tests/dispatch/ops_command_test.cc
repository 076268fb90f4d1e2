// `ferry ops` (run as a process through FERRY_TOOL, which ctest sets): the table names the keys
// and the fallbacks, lists registered operators with their schemas, and --json is one object.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/support/tool.h"

namespace ferry {
namespace {

std::string run(const std::string& args) {
  testing::ToolRun run = testing::run_ferry_tool(args);
  EXPECT_EQ(run.status, 0) << run.out;
  return std::move(run.out);
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(OpsCommand, PrintsTheDispatchTable) {
  FERRY_SKIP_WITHOUT_TOOL();
  const std::string out = run("ops");
  EXPECT_CONTAINS(out, "ferry ops: ");
  EXPECT_CONTAINS(out, "Tracing");
  EXPECT_CONTAINS(out, "AutogradCPU");
  EXPECT_CONTAINS(out, "fallback:tracing");
  EXPECT_CONTAINS(out, "(fallbacks)");
  // Tracing is the first column: the highest priority comes first.
  EXPECT_LT(out.find("Tracing"), out.find("AutogradCUDA"));
  EXPECT_LT(out.find("AutogradCUDA"), out.find(" CPU"));
}

TEST(OpsCommand, JsonAndFilter) {
  FERRY_SKIP_WITHOUT_TOOL();
  const std::string json = run("ops --json");
  EXPECT_EQ(json.front(), '{');
  EXPECT_CONTAINS(json, "\"keys\": [\"Tracing\", ");
  EXPECT_CONTAINS(json, "\"Tracing\": {\"kind\": \"fallback\", \"name\": \"tracing\"}");
  EXPECT_CONTAINS(json, "\"operators\": [");
  const std::string none = run("ops --json --op no-operator-has-this-name");
  EXPECT_CONTAINS(none, "\"operators\": []");
}

}  // namespace
}  // namespace ferry
