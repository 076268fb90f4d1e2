// The device copy benchmark's verdict on the bound (bench/device_copy_bench.h): the limit
// is 1.2 x memcpy plus the per-copy overhead, and the exit code is non-zero only when a check was
// asked for and the bound fails or cannot be judged. No timing happens here.
#include <gtest/gtest.h>

#include <vector>

#include "bench/device_copy_bench.h"

namespace ferry::testing {
namespace {

bench::BoundLine line(double ms, double memcpy_ms, double overhead_ms) {
  bench::BoundLine l;
  l.name = "h2d_dense_pinned_blocking";
  l.ms = ms;
  l.memcpy_ms = memcpy_ms;
  l.overhead_ms = overhead_ms;
  return l;
}

TEST(DeviceBenchBound, TheLimitIsOnePointTwoMemcpyPlusTheOverhead) {
  EXPECT_DOUBLE_EQ(line(0, 10, 0.5).limit_ms(), 12.5);
  EXPECT_TRUE(line(12.5, 10, 0.5).holds());
  EXPECT_FALSE(line(12.51, 10, 0.5).holds());
  EXPECT_TRUE(line(11.9, 10, 0).holds());
  EXPECT_FALSE(line(12.1, 10, 0).holds());
}

TEST(DeviceBenchBound, TheExitCodeFailsOnlyWhenAsked) {
  const std::vector<bench::BoundLine> good = {line(10, 10, 0.1), line(11, 10, 0.1)};
  const std::vector<bench::BoundLine> bad = {line(10, 10, 0.1), line(13, 10, 0.1)};
  EXPECT_EQ(bench::bound_exit_code(good, false), 0);
  EXPECT_EQ(bench::bound_exit_code(bad, false), 0) << "informational unless asked";
  EXPECT_EQ(bench::bound_exit_code({}, false), 0);
  EXPECT_EQ(bench::bound_exit_code(good, true), 0);
  EXPECT_EQ(bench::bound_exit_code(bad, true), 1);
  EXPECT_EQ(bench::bound_exit_code({}, true), 2) << "nothing judged is not a pass";
}

}  // namespace
}  // namespace ferry::testing
