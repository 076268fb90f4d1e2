// A serving process under an OpenMP binding (OMP_PROC_BIND): the OpenMP runtime that oneDNN loads
// binds the initial thread to one CPU before main, and every thread the server starts would
// inherit that one CPU, so requests that run a model in-process would share it. A connection's
// thread takes the pool's CPUs when it starts. Checked in a fresh process of this test binary
// started with the binding (tests/support/openmp_binding.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "ferry/ferry.h"
#include "ferry/iter/parallel.h"
#include "ferry/switch/client.h"
#include "ferry/switch/server.h"
#include "tests/support/openmp_binding.h"
#include "tests/switch/switch_test_util.h"

namespace ferry::switch_ {
namespace {

// Echoes its inputs and records the CPUs of the thread that ran the request.
class CpuRecordingHandler : public RequestHandler {
 public:
  InferResult handle(const InferRequest& request) override {
    cpus = ferry::testing::thread_cpu_count();
    InferResult result;
    result.outputs = request.inputs;
    return result;
  }
  std::atomic<int> cpus{0};
};

TEST(SwitchServerThreads, RequestsRunOnThePoolsCpus) {
  if (!ferry::testing::in_openmp_bound_process()) {
    ferry::testing::run_under_openmp_binding();
    return;
  }
  ferry::testing::skip_unless_bound_to_one_cpu();
  if (::testing::Test::IsSkipped()) return;
  testing::TempDir dir;
  ServerOptions options;
  options.socket_path = dir.file("ferry.sock");
  auto handler = std::make_shared<CpuRecordingHandler>();
  Server server(options, handler);
  Client client(server.socket_path());
  const InferResult result =
      client.infer("echo", {{"x", arange(4, TensorOptions(kFloat32))}}, std::chrono::seconds(10));
  ASSERT_EQ(result.outputs.size(), 1u);
  EXPECT_EQ(handler->cpus.load(), detail::available_cores()) << "a connection's thread";
  EXPECT_EQ(ferry::testing::thread_cpu_count(), 1) << "the caller keeps the binding it was given";
}

}  // namespace
}  // namespace ferry::switch_
