// An endpoint's progress thread runs on the CPUs of ferry's pool, not on the single CPU an OpenMP
// binding (OMP_PROC_BIND) gives the process's initial thread, which it would inherit from the
// thread that made the endpoint: it drives transfers while that thread computes, so it must not
// share its CPU. Checked in a fresh process of this test binary started with the binding (the
// OpenMP runtime oneDNN loads reads it only when it loads; tests/pipeline has the same check for
// the pipeline's, the sim's and the autograd engine's threads).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "ferry/iter/parallel.h"
#include "ferry/transport/endpoint.h"
#include "tests/support/openmp_binding.h"

namespace ferry::transport {
namespace {

using ferry::testing::thread_cpu_count;

// The CPU count of this process's thread named `name` (from /proc/self/task), or -1.
int named_thread_cpus(const std::string& name) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string comm;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    if (comm != name) continue;
    return thread_cpu_count(std::stoi(task.path().filename().string()));
  }
  return -1;
}

void check_in_child() {
  ferry::testing::skip_unless_bound_to_one_cpu();
  if (::testing::Test::IsSkipped()) return;
  const int pool = ferry::detail::available_cores();
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
  EXPECT_EQ(thread_cpu_count(), 1) << "the caller keeps the binding it was given";
}

TEST(ProgressThreadUnderAnOpenMPBinding, RunsOnThePoolsCpus) {
  if (ferry::testing::in_openmp_bound_process()) {
    check_in_child();
    return;
  }
  ferry::testing::run_under_openmp_binding();
}

}  // namespace
}  // namespace ferry::transport
