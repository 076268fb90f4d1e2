// The foundation issue's "shape of the API" example, compiled and checked as written.
#include <gtest/gtest.h>

#include <string>

#include "ferry/ferry.h"

namespace {

TEST(ApiExample, ReadsLikePyTorch) {
  ferry::Tensor a = ferry::arange(24, ferry::kFloat).view({2, 3, 4});
  ferry::Tensor b = ferry::empty({4, 3, 2}, ferry::kBFloat16);
  b.copy_(a.permute({2, 1, 0}));
  float x = b.select(0, 1).select(0, 2).select(0, 0).item<float>();
  EXPECT_EQ(x, 9.0f);  // b[1][2][0] = a[0][2][1] = 0*12 + 2*4 + 1
  ferry::Tensor c = ferry::empty(
      {8, 3, 5, 5},
      ferry::TensorOptions().dtype(ferry::kHalf).memory_format(ferry::MemoryFormat::ChannelsLast));
  bool cl = c.is_contiguous(ferry::MemoryFormat::ChannelsLast);
  EXPECT_TRUE(cl);
  ferry::Device d("sim:1");
  EXPECT_EQ(d.type(), ferry::DeviceType::Sim);
  std::string message;
  try {
    a.view({5, 5});
  } catch (const ferry::Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("[5, 5]"), std::string::npos) << message;
  EXPECT_NE(message.find("24"), std::string::npos) << message;
}

}  // namespace
