// The threads ferry starts beside its CPU pool (a sim stream's worker, a pipeline partition's
// worker, the autograd engine's device thread) run on the pool's CPUs, not on the single CPU an
// OpenMP binding gives the initial thread they are started from. With OMP_PROC_BIND set, the
// OpenMP runtime that oneDNN loads binds the process's initial thread to one CPU before main, and
// a thread inherits its creator's mask. Checked in a fresh process of this test binary started
// with the binding (the runtime reads it only when it loads); the transport's progress thread is
// checked the same way in tests/transport/progress_thread_cpus_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "ferry/autograd/function.h"
#include "ferry/ferry.h"
#include "ferry/iter/parallel.h"
#include "ferry/pipeline/worker.h"
#include "tests/support/tool.h"

namespace ferry {
namespace {

constexpr const char* kChildVariable = "FERRY_TEST_OPENMP_BOUND_CHILD";

int this_thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return -1;
  return CPU_COUNT(&set);
}

std::atomic<int> backward_cpus{0};

// Records the CPUs of the thread its backward runs on (the engine's thread for a sim tensor).
struct RecordCpus : autograd::Function<RecordCpus> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x * 1; }
  static autograd::variable_list backward(autograd::AutogradContext*,
                                          autograd::variable_list grads) {
    backward_cpus = this_thread_cpus();
    return {grads[0]};
  }
};

// In the child: the initial thread is bound to one CPU; each kind of thread gets the pool's.
void check_threads_in_child() {
  const int pool = detail::available_cores();
  if (this_thread_cpus() != 1 || pool < 2) {
    GTEST_SKIP() << "the OpenMP runtime did not bind the initial thread to one CPU (its CPUs: "
                 << this_thread_cpus() << ", the pool's: " << pool << ")";
  }
  const Device sim0("sim:0");
  Stream stream = get_stream_from_pool(sim0);
  while (stream == default_stream(sim0)) stream = get_stream_from_pool(sim0);

  std::atomic<int> stream_cpus{0};
  enqueue_host_function(stream, [&] { stream_cpus = this_thread_cpus(); });
  stream.synchronize();
  EXPECT_EQ(stream_cpus.load(), pool) << "a sim stream's worker";

  {
    std::atomic<int> worker_cpus{0};
    pipeline::Workers workers({stream}, /*grad_enabled=*/false);
    workers.put(0, [&] {
      worker_cpus = this_thread_cpus();
      return Tensor();
    });
    const pipeline::TaskResult result = workers.get(0);
    EXPECT_FALSE(result.error);
    EXPECT_EQ(worker_cpus.load(), pool) << "a pipeline partition's worker";
  }

  Tensor x = ones({8}, TensorOptions(kFloat32).device(sim0)).requires_grad_();
  RecordCpus::apply(x).sum().backward();
  EXPECT_EQ(backward_cpus.load(), pool) << "the autograd engine's thread for sim:0";
  EXPECT_EQ(this_thread_cpus(), 1) << "the caller keeps the binding it was given";
}

TEST(ThreadsUnderAnOpenMPBinding, RunOnThePoolsCpus) {
  if (std::getenv(kChildVariable) != nullptr) {
    check_threads_in_child();
    return;
  }
  if (detail::available_cores() < 2) GTEST_SKIP() << "one CPU: nothing to widen";
  const testing::ToolRun child = testing::run_this_test_in_new_process(
      std::string(kChildVariable) + "=1 OMP_PROC_BIND=true OMP_PLACES=threads");
  if (child.out.find("[  SKIPPED ]") != std::string::npos) GTEST_SKIP() << child.out;
  EXPECT_EQ(child.status, 0) << child.out;
  EXPECT_THAT(child.out, ::testing::HasSubstr("[  PASSED  ] 1 test")) << child.out;
}

}  // namespace
}  // namespace ferry
