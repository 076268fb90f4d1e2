// The Tensor methods that move bytes, and the views, run through the dispatcher: a trace sees
// them, in call order, and composite front-ends (zeros, to, clone, t) show the operators they
// are made of.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/ferry.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;

TEST(OperatorTrace, MethodsDispatch) {
  Tensor a = empty({4, 4});
  Tensor b = empty({4, 4}, kBFloat16);
  TraceGuard trace;
  a.fill_(1.5);
  b.copy_(a.t());
  a.zero_();
  EXPECT_THAT(trace.names(),
              ElementsAre("ferry::fill_", "ferry::transpose.int", "ferry::copy_", "ferry::fill_"));
  EXPECT_EQ(b.select(0, 2).select(0, 1).item<float>(), 1.5f);
  EXPECT_EQ(a.select(0, 3).select(0, 3).item<float>(), 0.0f);
}

TEST(OperatorTrace, CompositesShowTheirParts) {
  Tensor a = arange(6, kFloat).view({2, 3});
  TraceGuard trace;
  Tensor z = zeros({2});
  Tensor c = a.t().clone(MemoryFormat::Contiguous);
  Tensor same = a.to(kFloat);  // nothing changes: no operator runs
  EXPECT_TRUE(same.is_same(a));
  EXPECT_THAT(trace.names(), ElementsAre("ferry::fill_", "ferry::transpose.int", "ferry::copy_"));
  EXPECT_EQ(c.select(0, 2).select(0, 1).item<float>(), 5.0f);
}

TEST(OperatorTrace, DeviceFillsDispatchToTheDeviceKernel) {
  if (device_count(DeviceType::Sim) == 0) GTEST_SKIP() << "no sim device";
  Tensor s = empty({3}, Device("sim:0"));
  TraceGuard trace;
  s.fill_(2);
  EXPECT_THAT(trace.names(), ElementsAre("ferry::fill_"));
  EXPECT_EQ(s.cpu().select(0, 1).item<float>(), 2.0f);
}

}  // namespace
}  // namespace ferry
