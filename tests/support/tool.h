// Running the `ferry` command-line tool from a test, as a separate process: ctest puts the
// tool's path in FERRY_TOOL. Tests that need it skip when it is not set (a test binary run by
// hand), so that a missing tool is never mistaken for a passing test.
#pragma once

#include <string>

namespace ferry::testing {

struct ToolRun {
  int status = -1;  // the exit status; -1 when the tool could not run or did not exit normally
  std::string out;  // stdout and stderr, interleaved
};

// The tool's path, or nullptr when FERRY_TOOL is not set.
const char* ferry_tool();

// Runs `<env> <tool> <args>` through the shell. `env` is a command prefix such as
// "FERRY_NUM_THREADS=3" or "env -u FERRY_SIM_DEVICES"; `args` is passed as written.
ToolRun run_ferry_tool(const std::string& args, const std::string& env = "");

// Runs the calling test alone in a new process of this test binary, with the environment
// variables `env` added ("A=1 B=2"), for at most 300 s: for behaviour a process fixes when it
// starts (an OpenMP runtime reads OMP_PROC_BIND when it loads). The test tells the two runs
// apart by one of those variables.
ToolRun run_this_test_in_new_process(const std::string& env);

}  // namespace ferry::testing

// In a test body or SetUp: skips the test when there is no tool to run.
#define FERRY_SKIP_WITHOUT_TOOL()                          \
  do {                                                     \
    if (::ferry::testing::ferry_tool() == nullptr)         \
      GTEST_SKIP() << "FERRY_TOOL is not set (run ctest)"; \
  } while (0)
