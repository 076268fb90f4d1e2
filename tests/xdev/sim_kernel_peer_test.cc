// The sim's copy kernel holds the policy to peer access, as a GPU would: a kernel on one sim
// device that names another device's memory is refused, before anything is queued, unless
// access to that peer has been enabled; once enabled, the same problem runs and copies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "ferry/device/device_copy_kernel.h"
#include "tests/support/errors.h"
#include "tests/xdev/xdev_util.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

CopyProblem contiguous_problem(const Tensor& dst, const Tensor& src) {
  CopyProblem p;
  p.sizes.assign(1, dst.numel());
  p.dst_strides.assign(1, static_cast<int64_t>(dst.element_size()));
  p.src_strides.assign(1, static_cast<int64_t>(src.element_size()));
  p.dst = static_cast<char*>(dst.data_ptr());
  p.src = static_cast<const char*>(src.data_ptr());
  p.dst_dtype = dst.dtype();
  p.src_dtype = src.dtype();
  return p;
}

TEST_F(XdevTest, SimKernelRefusesPeerMemoryUntilAccessIsEnabled) {
  ASSERT_FALSE(sim::peer_access_enabled(0, 1)) << "configure() should have disabled peer access";
  const Tensor src = arange(64, TensorOptions(kFloat)).to(kSim1);
  Tensor dst = zeros({64}, TensorOptions(kFloat).device(kSim0));
  device_synchronize(kSim1);
  device_synchronize(kSim0);
  const Stream stream = current_stream(kSim0);
  const CopyProblem problem = contiguous_problem(dst, src);

  const std::string message =
      error_of<DeviceError>([&] { device_copy_kernel_stub(DeviceType::Sim, problem, stream); });
  EXPECT_THAT(message, HasSubstr("sim:0: copy kernel: expected the source in memory of sim:0"));
  EXPECT_THAT(message, HasSubstr("it is on sim:1 and peer access from sim:0 to sim:1 is off"));
  EXPECT_EQ(sim::pending_operations(0, stream.raw()), 0u) << "nothing may be queued";
  EXPECT_EQ(sim::device_of(src.data_ptr()), 1);
  EXPECT_EQ(sim::device_of(dst.data_ptr()), 0);
  int on_host = 0;
  EXPECT_EQ(sim::device_of(&on_host), -1);

  // The destination side is checked too: a kernel on sim:0 writing sim:1's memory.
  const CopyProblem reverse = contiguous_problem(src, dst);
  EXPECT_THAT(
      error_of<DeviceError>([&] { device_copy_kernel_stub(DeviceType::Sim, reverse, stream); }),
      HasSubstr("expected the destination in memory of sim:0"));

  ASSERT_TRUE(enable_peer_access(kSim0, kSim1));
  EXPECT_TRUE(sim::peer_access_enabled(0, 1));
  EXPECT_FALSE(sim::peer_access_enabled(1, 0)) << "access is per direction";
  device_copy_kernel_stub(DeviceType::Sim, problem, stream);
  stream.synchronize();
  const std::vector<uint8_t> bytes = read_storage(dst);
  std::vector<float> values(64);
  std::memcpy(values.data(), bytes.data(), 64 * sizeof(float));
  for (int i = 0; i < 64; ++i) EXPECT_EQ(values[static_cast<size_t>(i)], static_cast<float>(i));
}

}  // namespace
}  // namespace ferry::testing
