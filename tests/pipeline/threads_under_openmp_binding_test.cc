// The threads ferry starts beside its CPU pool (a sim stream's worker, a pipeline partition's
// worker, the autograd engine's device thread) run on the pool's CPUs, not on the single CPU an
// OpenMP binding gives the initial thread they are started from. With OMP_PROC_BIND set, the
// OpenMP runtime that oneDNN loads binds the process's initial thread to one CPU before main, and
// a thread inherits its creator's mask. Checked in a fresh process of this test binary started
// with the binding (the runtime reads it only when it loads); the transport's progress thread is
// checked the same way in tests/transport/progress_thread_cpus_test.cc.
#include <gtest/gtest.h>

#include <atomic>

#include "ferry/autograd/function.h"
#include "ferry/ferry.h"
#include "ferry/iter/parallel.h"
#include "ferry/pipeline/worker.h"
#include "tests/support/openmp_binding.h"

namespace ferry {
namespace {

using testing::thread_cpu_count;

std::atomic<int> backward_cpus{0};

// Records the CPUs of the thread its backward runs on (the engine's thread for a sim tensor).
struct RecordCpus : autograd::Function<RecordCpus> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x * 1; }
  static autograd::variable_list backward(autograd::AutogradContext*,
                                          autograd::variable_list grads) {
    backward_cpus = thread_cpu_count();
    return {grads[0]};
  }
};

// In the child: the initial thread is bound to one CPU; each kind of thread gets the pool's.
void check_threads_in_child() {
  testing::skip_unless_bound_to_one_cpu();
  if (::testing::Test::IsSkipped()) return;
  const int pool = detail::available_cores();
  const Device sim0("sim:0");
  Stream stream = get_stream_from_pool(sim0);
  while (stream == default_stream(sim0)) stream = get_stream_from_pool(sim0);

  std::atomic<int> stream_cpus{0};
  enqueue_host_function(stream, [&] { stream_cpus = thread_cpu_count(); });
  stream.synchronize();
  EXPECT_EQ(stream_cpus.load(), pool) << "a sim stream's worker";

  {
    std::atomic<int> worker_cpus{0};
    pipeline::Workers workers({stream}, /*grad_enabled=*/false);
    workers.put(0, [&] {
      worker_cpus = thread_cpu_count();
      return Tensor();
    });
    const pipeline::TaskResult result = workers.get(0);
    EXPECT_FALSE(result.error);
    EXPECT_EQ(worker_cpus.load(), pool) << "a pipeline partition's worker";
  }

  Tensor x = ones({8}, TensorOptions(kFloat32).device(sim0)).requires_grad_();
  RecordCpus::apply(x).sum().backward();
  EXPECT_EQ(backward_cpus.load(), pool) << "the autograd engine's thread for sim:0";
  EXPECT_EQ(thread_cpu_count(), 1) << "the caller keeps the binding it was given";
}

TEST(ThreadsUnderAnOpenMPBinding, RunOnThePoolsCpus) {
  if (testing::in_openmp_bound_process()) {
    check_threads_in_child();
    return;
  }
  testing::run_under_openmp_binding();
}

}  // namespace
}  // namespace ferry
