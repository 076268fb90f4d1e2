// The sim's compute-time model: FERRY_SIM_COMPUTE is parsed and validated like the other
// settings; with a rate set, a kernel holds its stream for at least flops / rate (a lower bound,
// which load on the host can only lengthen), and timing-only mode skips the arithmetic but keeps
// the time. Also: compute kernels refuse operands a device may not touch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "ferry/ferry.h"
#include "tests/device/sim_fixture.h"
#include "tests/support/errors.h"

namespace ferry {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using testing::stream_ms;

sim::SimConfig from(std::map<std::string, std::string> env) {
  return sim::SimConfig::from_env([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(SimComputeConfig, ParsesRatesAndTimingOnly) {
  EXPECT_EQ(from({}).compute_rate, 0.0);
  EXPECT_DOUBLE_EQ(from({{"FERRY_SIM_COMPUTE", "15T"}}).compute_rate, 15e12);
  EXPECT_DOUBLE_EQ(from({{"FERRY_SIM_COMPUTE", "1.5e13"}}).compute_rate, 1.5e13);
  EXPECT_DOUBLE_EQ(from({{"FERRY_SIM_COMPUTE", "900GFLOP/s"}}).compute_rate, 900e9);
  const sim::SimConfig t = from({{"FERRY_SIM_COMPUTE", "2T, timing-only"}});
  EXPECT_TRUE(t.compute_timing_only);
  EXPECT_DOUBLE_EQ(t.compute_rate, 2e12);
  EXPECT_EQ(from({{"FERRY_SIM_COMPUTE", "off"}}).compute_rate, 0.0);
  EXPECT_THAT(error_of<DeviceError>([] {
                from({{"FERRY_SIM_COMPUTE", "fast"}});
              }),
              HasSubstr("FERRY_SIM_COMPUTE: expected a rate in FLOP/s such as 15T"));
  EXPECT_THAT(error_of<DeviceError>([] {
                from({{"FERRY_SIM_COMPUTE", "15T,exact"}});
              }),
              HasSubstr("optionally followed by \",timing-only\""));
  EXPECT_THAT(error_of<DeviceError>([] {
                from({{"FERRY_SIM_COMPUTE", "0,timing-only"}});
              }),
              HasSubstr("timing-only compute needs a compute rate"));
  const auto settings = t.settings();
  EXPECT_THAT(settings,
              ::testing::Contains(::testing::Pair("FERRY_SIM_COMPUTE", HasSubstr("timing-only"))));
}

// Tensors leave blocks in the caching allocator: give them back, so that later tests may change
// the sim's topology (which needs no live allocations).
class SimCompute : public testing::SimTest {
 protected:
  void TearDown() override {
    for (int d = 0; d < device_count(DeviceType::Sim); ++d) {
      memory::empty_cache(Device(DeviceType::Sim, static_cast<DeviceIndex>(d)));
    }
    testing::SimTest::TearDown();
  }
};

TEST_F(SimCompute, AKernelHoldsItsStreamForFlopsOverRate) {
  const Tensor x = ones({1 << 20}, Device("sim:0"));
  sim::SimConfig c;
  c.compute_rate = 1e9;  // a sum of 2^20 elements: ~1 ms at 1 GFLOP/s
  sim::configure(c);
  Tensor s;
  const double ms = stream_ms([&] { s = x.sum(); });
  EXPECT_GE(ms, 1.0);
  EXPECT_EQ(s.item<float>(), static_cast<float>(1 << 20));
}

TEST_F(SimCompute, TimingOnlySkipsTheArithmeticButKeepsTheTime) {
  const Tensor x = ones({1 << 20}, Device("sim:0"));
  Tensor out = zeros({1 << 20}, Device("sim:0"));
  sim::SimConfig c;
  c.compute_rate = 1e9;
  c.compute_timing_only = true;
  sim::configure(c);
  const double ms = stream_ms([&] { out.add_(x); });  // 2^20 FLOP: ~1 ms
  EXPECT_GE(ms, 1.0);
  sim::configure(sim::SimConfig{});
  EXPECT_EQ(out.sum().item<float>(), 0.0f);  // the add never ran
}

TEST_F(SimCompute, KernelsRefuseAnotherDevicesMemory) {
  Tensor a = ones({4}, Device("sim:0"));
  const Tensor b = ones({4}, Device("sim:1"));
  EXPECT_THAT(error_of<DeviceError>([&] { a + b; }),
              HasSubstr("Expected all tensors to be on the same device"));
}

}  // namespace
}  // namespace ferry
