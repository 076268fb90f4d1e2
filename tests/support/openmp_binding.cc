// run_under_openmp_binding and its helpers (openmp_binding.h).
#include "tests/support/openmp_binding.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>
#include <string>

#include "ferry/iter/parallel.h"
#include "tests/support/tool.h"

namespace ferry::testing {
namespace {

constexpr const char* kBoundProcessVariable = "FERRY_TEST_OPENMP_BOUND_CHILD";

}  // namespace

int thread_cpu_count(pid_t tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(tid, sizeof(set), &set) != 0) return -1;
  return CPU_COUNT(&set);
}

bool in_openmp_bound_process() { return std::getenv(kBoundProcessVariable) != nullptr; }

void run_under_openmp_binding() {
  if (ferry::detail::available_cores() < 2) GTEST_SKIP() << "one CPU: nothing to widen";
  const ToolRun child = run_this_test_in_new_process(std::string(kBoundProcessVariable) +
                                                     "=1 OMP_PROC_BIND=true OMP_PLACES=threads");
  if (child.out.find("[  SKIPPED ]") != std::string::npos) GTEST_SKIP() << child.out;
  EXPECT_EQ(child.status, 0) << child.out;
  EXPECT_THAT(child.out, ::testing::HasSubstr("[  PASSED  ] 1 test")) << child.out;
}

void skip_unless_bound_to_one_cpu() {
  const int pool = ferry::detail::available_cores();
  if (thread_cpu_count() != 1 || pool < 2) {
    GTEST_SKIP() << "the OpenMP runtime did not bind the initial thread to one CPU (its CPUs: "
                 << thread_cpu_count() << ", the pool's: " << pool << ")";
  }
}

}  // namespace ferry::testing
