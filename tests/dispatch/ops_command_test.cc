// `ferry ops` (run as a process through FERRY_TOOL, which ctest sets): the table names the keys
// and the fallbacks, lists registered operators with their schemas, and --json is one object.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ferry {
namespace {

std::string run(const std::string& args) {
  const char* tool = std::getenv("FERRY_TOOL");
  if (tool == nullptr) return {};
  const std::string command = std::string(tool) + " " + args + " 2>&1";
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  EXPECT_EQ(pclose(pipe), 0) << out;
  return out;
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(OpsCommand, PrintsTheDispatchTable) {
  if (std::getenv("FERRY_TOOL") == nullptr) GTEST_SKIP() << "FERRY_TOOL is not set";
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
  if (std::getenv("FERRY_TOOL") == nullptr) GTEST_SKIP() << "FERRY_TOOL is not set";
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
