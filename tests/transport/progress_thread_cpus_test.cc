// An endpoint's progress thread runs on the CPUs of ferry's pool, not on the single CPU an OpenMP
// binding (OMP_PROC_BIND) gives the process's initial thread, which it would inherit from the
// thread that made the endpoint: it drives transfers while that thread computes, so it must not
// share its CPU. Checked in a fresh process of this test binary started with the binding (the
// OpenMP runtime oneDNN loads reads it only when it loads; tests/pipeline has the same check for
// the pipeline's, the sim's and the autograd engine's threads).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "ferry/iter/parallel.h"
#include "ferry/transport/endpoint.h"
#include "tests/support/tool.h"

namespace ferry::transport {
namespace {

constexpr const char* kChildVariable = "FERRY_TEST_OPENMP_BOUND_CHILD";

int this_thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  return CPU_COUNT(&set);
}

// The CPU count of this process's thread named `name` (from /proc/self/task), or -1.
int named_thread_cpus(const std::string& name) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string comm;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    if (comm != name) continue;
    const pid_t tid = std::stoi(task.path().filename().string());
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(tid, sizeof(set), &set) != 0) return -1;
    return CPU_COUNT(&set);
  }
  return -1;
}

void check_in_child() {
  const int pool = ferry::detail::available_cores();
  if (this_thread_cpus() != 1 || pool < 2) {
    GTEST_SKIP() << "the OpenMP runtime did not bind the initial thread to one CPU (its CPUs: "
                 << this_thread_cpus() << ", the pool's: " << pool << ")";
  }
  EndpointOptions options;
  options.name = "progress-thread-cpus";
  options.secret = "test-secret";
  Endpoint endpoint(options);
  // The thread sets its CPUs when it starts: look for up to 10 s.
  int cpus = -1;
  for (int i = 0; i < 1000 && cpus != pool; ++i) {
    cpus = named_thread_cpus("ferry-transport");
    if (cpus != pool) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(cpus, pool) << "the endpoint's progress thread";
  EXPECT_EQ(this_thread_cpus(), 1) << "the caller keeps the binding it was given";
}

TEST(ProgressThreadUnderAnOpenMPBinding, RunsOnThePoolsCpus) {
  if (std::getenv(kChildVariable) != nullptr) {
    check_in_child();
    return;
  }
  if (ferry::detail::available_cores() < 2) GTEST_SKIP() << "one CPU: nothing to widen";
  const ferry::testing::ToolRun child = ferry::testing::run_this_test_in_new_process(
      std::string(kChildVariable) + "=1 OMP_PROC_BIND=true OMP_PLACES=threads");
  if (child.out.find("[  SKIPPED ]") != std::string::npos) GTEST_SKIP() << child.out;
  EXPECT_EQ(child.status, 0) << child.out;
  EXPECT_THAT(child.out, ::testing::HasSubstr("[  PASSED  ] 1 test")) << child.out;
}

}  // namespace
}  // namespace ferry::transport
