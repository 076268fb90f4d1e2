// The default thread count: FERRY_NUM_THREADS (valid values, malformed ones and their error),
// else the CPUs this process may run on, an OpenMP binding of the initial thread notwithstanding.
// The rule is checked in process through its seam (detail::num_threads_from_env), and end to end in
// fresh processes of the ferry tool (FERRY_TOOL, set by ctest), whose pool reads the variable when
// first used.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>
#include <string>

#include "ferry/core/error.h"
#include "ferry/iter/parallel.h"
#include "tests/support/errors.h"
#include "tests/support/openmp_binding.h"
#include "tests/support/tool.h"

namespace ferry {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using testing::thread_cpu_count;

// One CPU this process may run on (not necessarily CPU 0 in a container).
int some_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) return cpu;
  }
  return 0;
}

TEST(NumThreadsFromEnv, ValidValues) {
  EXPECT_EQ(detail::num_threads_from_env("1"), 1);
  EXPECT_EQ(detail::num_threads_from_env("3"), 3);
  EXPECT_EQ(detail::num_threads_from_env("1024"), 1024);
}

TEST(PoolCpuList, ListsTheCpusThisProcessMayUseAsRanges) {
  std::string expected;
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {  // as single CPUs, then compared by expansion
    if (CPU_ISSET(cpu, &set)) expected += std::to_string(cpu) + ",";
  }
  std::string expanded;
  const std::string list = detail::pool_cpu_list();
  size_t at = 0;
  while (at < list.size()) {
    size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(at, end - at);
    const size_t dash = item.find('-');
    const int lo = std::stoi(item.substr(0, dash));
    const int hi = dash == std::string::npos ? lo : std::stoi(item.substr(dash + 1));
    EXPECT_LE(lo, hi) << list;
    for (int cpu = lo; cpu <= hi; ++cpu) expanded += std::to_string(cpu) + ",";
    at = end + 1;
  }
  EXPECT_EQ(expanded, expected) << list;
}

TEST(NumThreadsFromEnv, UnsetOrEmptyMeansTheAvailableCores) {
  EXPECT_EQ(detail::available_cores(), thread_cpu_count());
  EXPECT_EQ(detail::num_threads_from_env(nullptr), thread_cpu_count());
  EXPECT_EQ(detail::num_threads_from_env(""), thread_cpu_count());
}

TEST(NumThreadsFromEnv, MalformedValuesRaiseQuotingThem) {
  for (const char* bad : {"0", "-2", "1025", "abc", "3x", "2.5", "99999999999999999999"}) {
    const std::string message = error_of([&] { detail::num_threads_from_env(bad); });
    EXPECT_THAT(message, HasSubstr("FERRY_NUM_THREADS: expected an integer between 1 and 1024, "
                                   "but got \"" +
                                   std::string(bad) + "\""));
  }
}

// Runs the tool with `env` prepended (e.g. "FERRY_NUM_THREADS=3"); stdout and stderr.
std::string run_tool(const std::string& env, const std::string& args, int* status) {
  testing::ToolRun run = testing::run_ferry_tool("explain " + args, env);
  *status = run.status;
  return std::move(run.out);
}

class NumThreadsInANewProcess : public ::testing::Test {
 protected:
  void SetUp() override { FERRY_SKIP_WITHOUT_TOOL(); }
};

// A 4 MiB copy: enough work for several threads, so the plan uses all of them.
constexpr const char* kBigCopy = "--shape 1024,1024 --permute 1,0";

TEST_F(NumThreadsInANewProcess, TheVariableSetsThePool) {
  int status = 0;
  const std::string out = run_tool("FERRY_NUM_THREADS=3", kBigCopy, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("threads: 3 of 3 (get_num_threads)"));
}

TEST_F(NumThreadsInANewProcess, DefaultIsTheCoresTheProcessMayUse) {
  int status = 0;
  std::string out = run_tool("env -u FERRY_NUM_THREADS", kBigCopy, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("of " + std::to_string(thread_cpu_count()) + " (get_num_threads)"));
  // Limited to one CPU, the default follows.
  out = run_tool("env -u FERRY_NUM_THREADS taskset -c " + std::to_string(some_allowed_cpu()),
                 kBigCopy, &status);  // taskset: util-linux, always installed
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("threads: 1 of 1 (get_num_threads)"));
  // An empty value counts as unset.
  out = run_tool("FERRY_NUM_THREADS=", kBigCopy, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("of " + std::to_string(thread_cpu_count()) + " (get_num_threads)"));
}

// OMP_PROC_BIND makes the OpenMP runtime (oneDNN's) bind the initial thread to one CPU when the
// process starts. The pool's default and its workers must still cover every CPU the process may
// use: before this was handled, the tool printed "threads: 1 of 1" here, and 2 threads forced
// with set_num_threads shared one CPU.
TEST_F(NumThreadsInANewProcess, AnOpenMPBindingDoesNotConfineThePool) {
  if (thread_cpu_count() < 2) GTEST_SKIP() << "needs at least 2 CPUs to tell a binding apart";
  for (const char* bind : {"OMP_PROC_BIND=true", "OMP_PROC_BIND=close OMP_PLACES=cores"}) {
    SCOPED_TRACE(bind);
    int status = 0;
    const std::string out =
        run_tool(std::string("env -u FERRY_NUM_THREADS ") + bind, kBigCopy, &status);
    EXPECT_EQ(status, 0) << out;
    const std::string n = std::to_string(thread_cpu_count());
    EXPECT_THAT(out,
                HasSubstr("threads: " + n + " of " + n + " (get_num_threads), workers on CPUs " +
                          detail::pool_cpu_list() + "\n"));
  }
}

TEST_F(NumThreadsInANewProcess, AMalformedValueFailsWithAClearError) {
  int status = 0;
  const std::string out = run_tool("FERRY_NUM_THREADS=lots", kBigCopy, &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("FERRY_NUM_THREADS: expected an integer between 1 and 1024, but got "
                             "\"lots\""));
}

}  // namespace
}  // namespace ferry
