// Device parsing and printing, and DeviceType names.
#include <gtest/gtest.h>

#include <sstream>
#include <unordered_set>

#include "ferry/core/device.h"
#include "ferry/core/error.h"

namespace ferry {
namespace {

TEST(Device, ParsesTypesAndIndices) {
  EXPECT_EQ(Device("cpu"), Device(DeviceType::CPU));
  EXPECT_EQ(Device("cpu:0"), Device(DeviceType::CPU));
  EXPECT_EQ(Device("sim:1"), Device(DeviceType::Sim, 1));
  EXPECT_EQ(Device("cuda:0"), Device(DeviceType::CUDA, 0));
  EXPECT_EQ(Device("cuda:127").index(), 127);
  const Device bare("sim");
  EXPECT_EQ(bare.type(), DeviceType::Sim);
  EXPECT_FALSE(bare.has_index());
  EXPECT_TRUE(Device("sim:1").is_sim());
  EXPECT_TRUE(Device("cuda:3").is_cuda());
  EXPECT_TRUE(Device("cpu").is_cpu());
}

TEST(Device, PrintsAsParsed) {
  for (const char* spec : {"cpu", "cpu:0", "sim", "sim:0", "sim:1", "cuda:0", "cuda:12"}) {
    EXPECT_EQ(Device(spec).str(), spec);
    std::ostringstream out;
    out << Device(spec);
    EXPECT_EQ(out.str(), spec);
  }
  EXPECT_EQ(Device("cpu:0").str(), "cpu:0");
  std::ostringstream out;
  out << DeviceType::CUDA;
  EXPECT_EQ(out.str(), "cuda");
}

// What a PyTorch user types: torch::Device("cpu:0").index() is 0, and there is one CPU.
TEST(Device, CpuKeepsTheIndexItWasWrittenWithAndIsOneDevice) {
  EXPECT_EQ(Device("cpu:0").index(), 0);
  EXPECT_EQ(Device("cpu").index(), -1);
  EXPECT_TRUE(Device("cpu:0").has_index());
  EXPECT_EQ(Device(DeviceType::CPU, 0).index(), 0);
  EXPECT_EQ(Device(DeviceType::CPU, 5).index(), 0);
  EXPECT_EQ(Device("cpu:0"), Device("cpu"));
  EXPECT_EQ(std::hash<Device>()(Device("cpu:0")), std::hash<Device>()(Device("cpu")));
  EXPECT_FALSE(Device("cpu:0") == Device("sim:0"));
}

TEST(Device, BadStringsNameTheString) {
  for (const char* spec : {"", "gpu", "gpu:0", "sim:", "sim:-1", "sim:x", "sim:1x", "sim:128",
                           "sim:01", "cpu:1", "cuda:+1", " cuda:0", "CUDA:0", "sim:1:2"}) {
    try {
      Device d(spec);
      ADD_FAILURE() << "expected an error for \"" << spec << "\", got " << d;
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("\"") + spec + "\""), std::string::npos)
          << e.what();
    }
  }
}

TEST(Device, IsHashable) {
  std::unordered_set<Device> set{Device("cpu"), Device("sim:0"), Device("sim:1"), Device("sim:0")};
  EXPECT_EQ(set.size(), 3u);
  EXPECT_TRUE(set.count(Device("sim:1")));
}

}  // namespace
}  // namespace ferry
