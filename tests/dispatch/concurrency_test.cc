// Calls racing with registration: kernels, fallbacks, fallthroughs and definitions come and go
// on one thread while others call. Every call must run a kernel that was registered at some
// point during the call and never fault; under ThreadSanitizer the run must be race-free.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <vector>

#include "ferry/dispatch/dispatcher.h"
#include "ferry/dispatch/tracing.h"
#include "tests/dispatch/dispatch_test_util.h"

namespace ferry {
namespace {

using K = DispatchKey;
using testing::tensor_on;
using RaceUnary = int64_t(const Tensor&);

using testing::D;

int64_t base_cpu(const Tensor&) { return 1; }
int64_t shadow_cpu(const Tensor&) { return 2; }
int64_t autograd_cpu(DispatchKeySet ks, const Tensor& t) {
  static const auto op = D().find("race::op").typed<RaceUnary>();
  return 10 + op.redispatch(ks.remove_above(K::AutogradCPU), t);
}
void autograd_fallback(const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  op.redispatch_boxed(ks.remove_above(K::AutogradCPU), stack);
  stack->back() = IValue(stack->back().to_int() + 100);
}

TEST(DispatcherConcurrency, CallsRacingWithRegistration) {
  // Between rounds the autograd key falls through, as the dispatcher's default does (ferry's
  // autograd fallback, which refuses operators without a formula, is shadowed for the test).
  auto autograd_fallthrough = D().fallback_fallthrough(K::AutogradCPU);
  auto def = D().def("race::op(Tensor self) -> int");
  auto base = D().impl("race::op", K::CPU, &base_cpu);
  const auto op = D().find("race::op").typed<RaceUnary>();

  std::atomic<bool> stop{false};
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> bad{0};
  auto caller = [&](bool with_grad, bool traced) {
    const Tensor t = tensor_on(Device("cpu"), with_grad);
    std::optional<TraceGuard> trace;
    for (int64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      if (traced && i % 1024 == 0) {  // a fresh trace now and then keeps memory flat
        trace.reset();
        trace.emplace();
      }
      const int64_t r = op.call(t);
      // base or shadow, possibly under the autograd kernel (+10) or fallback (+100)
      const int64_t backend = r % 10;
      if (backend != 1 && backend != 2) bad.fetch_add(1);
      if (!with_grad && r >= 10) bad.fetch_add(1);
      calls.fetch_add(1, std::memory_order_relaxed);
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(caller, true, false);
  threads.emplace_back(caller, false, true);

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  int rounds = 0;
  while (std::chrono::steady_clock::now() < deadline || rounds < 50) {
    auto shadow = D().impl("race::op", K::CPU, &shadow_cpu);
    auto ag = D().impl("race::op", K::AutogradCPU, &autograd_cpu);
    auto fb = D().fallback(K::AutogradCPU, &autograd_fallback, "race_fallback");
    ag.reset();
    auto ft = D().impl_fallthrough("race::op", K::AutogradCPU);
    auto other = D().def("race::other(Tensor self) -> int");
    auto tracing_off = D().fallback_fallthrough(K::Tracing);
    ++rounds;
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(calls.load(), 0);
  EXPECT_EQ(op.call(tensor_on(Device("cpu"), true)), 1);  // everything else is gone again
}

}  // namespace
}  // namespace ferry
