// run_ferry_tool and run_this_test_in_new_process: popen on a command line ending in `2>&1`,
// reading everything it prints.
#include "tests/support/tool.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>

namespace ferry::testing {
namespace {

ToolRun run_command(const std::string& command) {
  ToolRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    run.out.append(buffer.data(), n);
  const int rc = ::pclose(pipe);
  run.status = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return run;
}

}  // namespace

const char* ferry_tool() { return std::getenv("FERRY_TOOL"); }

ToolRun run_ferry_tool(const std::string& args, const std::string& env) {
  const char* tool = ferry_tool();
  if (tool == nullptr) return {};
  return run_command(env + " '" + tool + "' " + args + " 2>&1");
}

ToolRun run_this_test_in_new_process(const std::string& env) {
  char exe[4096] = {};
  if (::readlink("/proc/self/exe", exe, sizeof(exe) - 1) <= 0) return {};
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  if (test == nullptr) return {};
  return run_command("env " + env + " timeout 300 '" + exe + "' --gtest_filter='" +
                     test->test_suite_name() + "." + test->name() + "' 2>&1");
}

}  // namespace ferry::testing
