// DispatchStub: registration per device type (by macro and by hand), calls, the missing-kernel
// error, conflicting registrations.
#include <gtest/gtest.h>

#include <string>

#include "ferry/core/error.h"
#include "ferry/dispatch/dispatch_stub.h"

namespace ferry {
namespace {

using add_fn = int (*)(int, int);
FERRY_DECLARE_DISPATCH(add_fn, add_stub);
FERRY_DEFINE_DISPATCH(add_stub);

int add_cpu(int a, int b) { return a + b; }
int add_cpu_other(int a, int b) { return a + b + 100; }
int add_sim(int a, int b) { return 10 * (a + b); }

// As a backend's .cc would.
FERRY_REGISTER_DISPATCH(add_stub, DeviceType::CPU, &add_cpu);

TEST(DispatchStub, CallsTheKernelOfTheDeviceType) {
  EXPECT_EQ(add_stub(DeviceType::CPU, 2, 3), 5);
  EXPECT_TRUE(add_stub.has_kernel(DeviceType::CPU));
  EXPECT_FALSE(add_stub.has_kernel(DeviceType::Sim));
  EXPECT_STREQ(add_stub.name(), "add_stub");
  EXPECT_EQ(add_stub.get(DeviceType::CPU), &add_cpu);
}

TEST(DispatchStub, MissingKernelNamesTheStubAndTheDeviceType) {
  try {
    add_stub(DeviceType::CUDA, 1, 1);
    FAIL() << "expected an error";
  } catch (const NotImplementedError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "add_stub: no kernel for device type cuda; kernels are registered for cpu"),
              std::string::npos)
        << e.what();
  }
}

TEST(DispatchStub, RegistersPerDeviceTypeAndRejectsConflicts) {
  add_stub.register_kernel(DeviceType::Sim, &add_sim);
  EXPECT_EQ(add_stub(DeviceType::Sim, 2, 3), 50);
  EXPECT_NO_THROW(add_stub.register_kernel(DeviceType::Sim, &add_sim));  // same kernel: fine
  EXPECT_THROW(add_stub.register_kernel(DeviceType::CPU, &add_cpu_other), Error);
  EXPECT_EQ(add_stub(DeviceType::CPU, 2, 3), 5);
  EXPECT_EQ(add_stub.replace_kernel(DeviceType::Sim, nullptr), &add_sim);
  EXPECT_THROW(add_stub(DeviceType::Sim, 2, 3), NotImplementedError);
  EXPECT_EQ(add_stub.replace_kernel(DeviceType::CPU, &add_cpu_other), &add_cpu);
  EXPECT_EQ(add_stub(DeviceType::CPU, 2, 3), 105);
  add_stub.replace_kernel(DeviceType::CPU, &add_cpu);
}

TEST(DispatchStub, IsConstantInitialized) {
  // A stub is usable before any dynamic initializer runs: registrations from other files may
  // run first.
  using fn = void (*)();
  struct Local : DispatchStub<fn> {
    constexpr Local() : DispatchStub<fn>("local") {}
  };
  static constinit Local local;
  EXPECT_FALSE(local.has_kernel(DeviceType::CPU));
  EXPECT_THROW(local(DeviceType::CPU), NotImplementedError);
}

}  // namespace
}  // namespace ferry
