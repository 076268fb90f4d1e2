// The CUDA backend on a machine without a GPU (0 devices, a reason, clear errors), GPU tests that
// skip, and the `ferry devices` command (the tool's path comes from FERRY_TOOL, set by ctest).
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/device/event.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "tests/support/errors.h"
#include "tests/support/tool.h"

namespace ferry::testing {
namespace {

TEST(CudaTest, CountIsZeroWithAReasonWhenThereIsNoGpu) {
  if (device_count(DeviceType::CUDA) > 0) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(device_unavailable_reason(DeviceType::CUDA).empty());
  const std::string message = error_of<DeviceError>([] { default_stream(Device("cuda:0")); });
  EXPECT_NE(message.find("cuda:0: no CUDA device ("), std::string::npos) << message;
  EXPECT_NE(message.find(device_unavailable_reason(DeviceType::CUDA)), std::string::npos)
      << message;
  EXPECT_THROW(memory_info(Device("cuda:0")), DeviceError);
  EXPECT_THROW(pinned_malloc(DeviceType::CUDA, 64), DeviceError);
  int on_host = 0;
  EXPECT_FALSE(is_pinned(&on_host));
}

#ifndef FERRY_WITH_CUDA
#error "tests/CMakeLists.txt defines FERRY_WITH_CUDA (0 or 1) for every test executable"
#endif

TEST(CudaTest, BackendIsRegisteredExactlyWhenBuilt) {
  const bool built = FERRY_WITH_CUDA != 0;
  ASSERT_EQ(has_backend(DeviceType::CUDA), built)
      << "the build says the CUDA backend was " << (built ? "" : "not ") << "built";
  if (built) {
    EXPECT_EQ(get_backend(DeviceType::CUDA).display_name(), "CUDA");
    EXPECT_EQ(get_backend(DeviceType::CUDA).type(), DeviceType::CUDA);
    EXPECT_EQ(device_unavailable_reason(DeviceType::CUDA).find("built without"), std::string::npos);
  } else {
    EXPECT_EQ(find_backend(DeviceType::CUDA), nullptr);
    EXPECT_EQ(device_count(DeviceType::CUDA), 0);
    EXPECT_NE(device_unavailable_reason(DeviceType::CUDA).find("built without the CUDA backend"),
              std::string::npos)
        << device_unavailable_reason(DeviceType::CUDA);
  }
}

TEST(CudaTest, StreamsAndEventsOnAGpu) {
  if (device_count(DeviceType::CUDA) == 0) GTEST_SKIP() << "no CUDA device";
  const Device dev("cuda:0");
  const Stream side = get_stream_from_pool(dev);
  Event start(true), end(true);
  start.record(side);
  void* p = get_backend(DeviceType::CUDA).malloc(0, 1 << 20);
  get_backend(DeviceType::CUDA).memset_async(0, p, 1, 1 << 20, side.raw());
  end.record(side);
  wait_stream(current_stream(dev), side);
  current_stream(dev).synchronize();
  EXPECT_GE(start.elapsed_time(end), 0.0F);
  get_backend(DeviceType::CUDA).free(0, p);
}

class DevicesCommandTest : public ::testing::Test {
 protected:
  void SetUp() override { FERRY_SKIP_WITHOUT_TOOL(); }
  // `ferry devices` in a clean sim environment plus `env`: the exit status and the output.
  static std::pair<int, std::string> devices(const std::string& env) {
    ToolRun run = run_ferry_tool(
        "devices",
        "env -u FERRY_SIM_DEVICES -u FERRY_SIM_MEMORY -u FERRY_SIM_PEER -u FERRY_SIM_BANDWIDTH "
        "-u FERRY_SIM_LATENCY -u FERRY_SIM_CHAOS -u FERRY_SIM_COMPUTE " +
            env);
    return {run.status, std::move(run.out)};
  }
};

TEST_F(DevicesCommandTest, ListsEveryDeviceWithoutAGpu) {
  const auto [status, out] = devices("FERRY_SIM_DEVICES=3 FERRY_SIM_LATENCY=h2d=10us");
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("cpu: 1 device"), std::string::npos) << out;
  EXPECT_NE(out.find("sim: 3 devices"), std::string::npos) << out;
  EXPECT_NE(out.find("sim:2"), std::string::npos) << out;
  EXPECT_NE(out.find("memory 4.00 GiB total"), std::string::npos) << out;
  EXPECT_NE(out.find("peer access"), std::string::npos) << out;
  EXPECT_NE(out.find("FERRY_SIM_DEVICES=3"), std::string::npos) << out;
  EXPECT_NE(out.find("FERRY_SIM_LATENCY=h2d=10us,d2h=none,d2d=none,peer=none"), std::string::npos)
      << out;
  EXPECT_NE(out.find("FERRY_SIM_CHAOS=off"), std::string::npos) << out;
  if (device_count(DeviceType::CUDA) == 0) {
    EXPECT_NE(out.find("cuda: 0 devices ("), std::string::npos) << out;
  }
}

// A compute model that skips the arithmetic says so in capitals; a timed one that computes does
// not warn.
TEST_F(DevicesCommandTest, ATimingOnlyComputeModelIsAnnouncedLoudly) {
  auto [status, out] = devices("FERRY_SIM_COMPUTE=15T,timing-only");
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("WARNING: FERRY_SIM_COMPUTE is timing-only: sim kernels SKIP THEIR "
                     "ARITHMETIC and their OUTPUTS ARE UNDEFINED"),
            std::string::npos)
      << out;
  std::tie(status, out) = devices("FERRY_SIM_COMPUTE=15T");
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out.find("WARNING"), std::string::npos) << out;
}

// Whether `out` has a line whose whitespace-separated words are exactly `words`.
bool has_line(const std::string& out, const std::vector<std::string>& words) {
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    std::vector<std::string> got;
    std::string word;
    while (in >> word) got.push_back(word);
    if (got == words) return true;
  }
  return false;
}

TEST_F(DevicesCommandTest, PeerMatrixAndBadSettings) {
  auto [status, out] = devices("FERRY_SIM_PEER='1,0;1,1'");
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("FERRY_SIM_PEER=1,0;1,1"), std::string::npos) << out;
  // Row i, column j: may sim:i access sim:j's memory ("yes": possible, not enabled yet).
  EXPECT_TRUE(has_line(out, {"sim:0", "sim:1"})) << out;
  EXPECT_TRUE(has_line(out, {"sim:0", "-", "no"})) << out;
  EXPECT_TRUE(has_line(out, {"sim:1", "yes", "-"})) << out;

  // A bad setting is reported, not fatal: the sim lists 0 devices and the command succeeds.
  std::tie(status, out) = devices("FERRY_SIM_MEMORY=lots");
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("sim: 0 devices (FERRY_SIM_MEMORY: expected a size"), std::string::npos)
      << out;
  EXPECT_NE(out.find("\"lots\""), std::string::npos) << out;
}

}  // namespace
}  // namespace ferry::testing
