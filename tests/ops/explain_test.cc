// `ferry explain` end to end: the tool (FERRY_TOOL, set by ctest) prints the route, the byte
// strides at each stage and the kernel for a few copies; bad options fail with a message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

using ::testing::HasSubstr;

// Runs `ferry explain <args>`; returns stdout and stderr, and the exit status in *status.
std::string explain(const std::string& args, int* status) {
  const char* tool = std::getenv("FERRY_TOOL");
  const std::string command = std::string(tool) + " explain " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buf[512];
  while (pipe != nullptr && std::fgets(buf, sizeof(buf), pipe) != nullptr) out += buf;
  const int rc = pipe != nullptr ? pclose(pipe) : -1;
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

class Explain : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("FERRY_TOOL") == nullptr) GTEST_SKIP() << "FERRY_TOOL is not set (run ctest)";
  }
};

TEST_F(Explain, TransposePrintsEveryStage) {
  int status = 0;
  const std::string out = explain("--shape 4,6 --permute 1,0 --dst-dtype f64", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("route: iterator, then copy_stub"));
  // dst (6, 4) float64 row-major: bytes (32, 8); src = (4, 6).t(): bytes (4, 24).
  EXPECT_THAT(out, HasSubstr("broadcast              [6, 4]                   [32, 8]"));
  EXPECT_THAT(out, HasSubstr("reordered, perm [1, 0]"));
  EXPECT_THAT(out, HasSubstr("coalesced              [4, 6]                   [8, 32]"));
  EXPECT_THAT(out, HasSubstr("kernel: "));
  EXPECT_THAT(out, HasSubstr("temporaries: none"));
}

TEST_F(Explain, DenseFastPathAndOverlap) {
  int status = 0;
  std::string out = explain("--shape 1000 --dst-dtype f16", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("route: dense fast path"));
  out = explain("--shape 8,8 --permute 1,0 --into-source", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("source copied to a temporary"));
  EXPECT_THAT(out, HasSubstr("temporaries: the source is first copied to new memory (256 bytes"));
}

TEST_F(Explain, DeviceCopiesPrintPlanStreamsAndSynchronization) {
  int status = 0;
  std::string out =
      explain("--shape 64,32 --permute 1,0 --dst-device sim:0 --dst-dtype bf16", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("device type: sim"));
  EXPECT_THAT(out, HasSubstr("plan: staged from cpu to sim:0"));
  EXPECT_THAT(out, HasSubstr("stream: sim:0/default stream"));
  EXPECT_THAT(out, HasSubstr("the host synchronizes sim:0/default stream"));
  out = explain("--shape 64,32 --src-device sim:0 --dst-device sim:1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("plan: memcpy from sim:0 to sim:1"));
  EXPECT_THAT(out, HasSubstr("waits for an event recorded on sim:1/default stream before"));
  out = explain("--shape 64,32 --permute 1,0 --src-device sim:1 --dst-device sim:1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("device kernel: "));
  EXPECT_THAT(out, HasSubstr("synchronization: none (stream order)"));
  out = explain("--shape 64,32 --src-device sim:0 --pinned --non-blocking", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("keeps the pinned host block from reuse"));
  out = explain("--shape 4 --dst-device sim:9", &status);
  EXPECT_NE(status, 0);
  EXPECT_THAT(out, HasSubstr("sim:9"));
}

TEST_F(Explain, BadOptionsSaySo) {
  int status = 0;
  const std::string out = explain("--shape 4,x", &status);
  EXPECT_NE(status, 0);
  EXPECT_THAT(out, HasSubstr("--shape: expected an integer, but got \"x\""));
  EXPECT_NE((explain("--shape 4 --dst-format sideways", &status), status), 0);
}

}  // namespace
