// Enforces Note [The hot path] (operator_handle.h): a typed call of a registered operator
// allocates nothing, whether the kernel is plain, takes the key set, or hands the call down with
// redispatch, and whatever the thread's include/exclude sets hold.
//
// This file replaces the global operator new/delete for the whole ferry_dispatch_tests binary.
// The replacements forward to malloc/free (the non-aligned forms all together, so every pointer
// is freed by the allocator that made it, also under the sanitizers) and count only on a thread
// whose counting flag is set, so the other tests in the binary see an ordinary allocator.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <new>

#include "ferry/dispatch/dispatcher.h"
#include "ferry/dispatch/local_dispatch_key_set.h"
#include "tests/dispatch/dispatch_test_util.h"

namespace {

// Trivially initialized thread_locals: reading them from operator new allocates nothing.
thread_local bool t_counting = false;
thread_local int64_t t_allocations = 0;

void* counted_malloc(std::size_t size) {
  if (t_counting) ++t_allocations;
  return std::malloc(size == 0 ? 1 : size);
}

void* throwing_malloc(std::size_t size) {
  void* p = counted_malloc(size);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

// Counts this thread's allocations from construction until stop().
class AllocationCounter {
 public:
  AllocationCounter() {
    t_allocations = 0;
    t_counting = true;
  }
  ~AllocationCounter() { t_counting = false; }
  AllocationCounter(const AllocationCounter&) = delete;
  AllocationCounter& operator=(const AllocationCounter&) = delete;
  int64_t stop() {
    t_counting = false;
    return t_allocations;
  }
};

}  // namespace

// All out of line: when GCC sees a replacement's malloc or free next to a caller's
// new-expression or delete, it warns about mismatched allocation functions
// (-Wmismatched-new-delete), which does not apply to replacements that pair malloc with free.
[[gnu::noinline]] void* operator new(std::size_t size) { return throwing_malloc(size); }
[[gnu::noinline]] void* operator new[](std::size_t size) { return throwing_malloc(size); }
[[gnu::noinline]] void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return counted_malloc(size);
}
[[gnu::noinline]] void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return counted_malloc(size);
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace ferry {
namespace {

using K = DispatchKey;
using Unary = Tensor(const Tensor&);
using testing::tensor_on;

using testing::D;

constexpr int kCalls = 1000;

int64_t g_backend_calls = 0;

Tensor plain_cpu(const Tensor& t) {
  ++g_backend_calls;
  return t;
}
Tensor keyed_sim(DispatchKeySet, const Tensor& t) {
  ++g_backend_calls;
  return t;
}
Tensor autograd_then_below(DispatchKeySet ks, const Tensor& t) {
  static const auto op = D().find("test::noalloc").typed<Unary>();
  return op.redispatch(ks.remove_above(ks.highest_priority_key()), t);
}

TEST(HotPath, TheCounterSeesAllocations) {
  // Without this the test below could not fail.
  // A direct call of the function: unlike a new-expression, the compiler may not elide it.
  AllocationCounter counter;
  void* p = ::operator new(sizeof(int));
  const int64_t counted = counter.stop();
  ::operator delete(p);
  EXPECT_EQ(counted, 1);
}

TEST(HotPath, TypedCallsAllocateNothing) {
  auto def = D().def("test::noalloc(Tensor self) -> Tensor");
  auto cpu = D().impl("test::noalloc", K::CPU, &plain_cpu, "plain_cpu");
  auto sim = D().impl("test::noalloc", K::Sim, &keyed_sim, "keyed_sim");
  auto autograd = D().impl("test::noalloc", K::AutogradCPU, &autograd_then_below, "autograd");
  const auto op = D().find("test::noalloc").typed<Unary>();
  const Tensor on_cpu = tensor_on(Device("cpu"));
  const Tensor on_sim = tensor_on(Device("sim:0"));
  const Tensor with_grad = tensor_on(Device("cpu"), /*requires_grad=*/true);
  // Warm-up: function-local statics (the redispatch handle) are made on first use.
  op.call(with_grad);
  g_backend_calls = 0;

  int64_t allocations = 0;
  {
    AllocationCounter counter;
    for (int i = 0; i < kCalls; ++i) {
      op.call(on_cpu);     // plain kernel
      op.call(on_sim);     // kernel taking the key set
      op.call(with_grad);  // autograd key, then redispatch to CPU
    }
    allocations += counter.stop();
  }
  {
    IncludeDispatchKeyGuard include(K::Sim);
    ExcludeDispatchKeyGuard exclude(K::CPU);
    AllocationCounter counter;
    for (int i = 0; i < kCalls; ++i) op.call(on_cpu);  // steered to Sim by the guards
    allocations += counter.stop();
  }
  EXPECT_EQ(allocations, 0) << "allocations in " << 4 * kCalls << " dispatcher calls";
  EXPECT_EQ(g_backend_calls, 4 * kCalls);  // every call reached a backend kernel
}

}  // namespace
}  // namespace ferry
