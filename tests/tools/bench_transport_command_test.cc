// `ferry bench-transport` and `ferry bench-weights` as processes (FERRY_TOOL, set by ctest): the
// --quick smoke run starts its peer process, succeeds and prints one table per transport with every
// case and the transports used; bad options are refused. Nothing here judges speed, and the run
// succeeds with or without ucx_perftest installed (--quick never fails on a missed target).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/support/tool.h"
#include "tests/tools/bench_json.h"

namespace ferry {
namespace {

using testing::bench_built;
using ::testing::HasSubstr;
using testing::run_ferry_tool;
using Result = testing::ToolRun;

// Skips unless this tool has the command: it needs the benchmarks and the transport (UCX).
#define SKIP_WITHOUT_BENCH_TRANSPORT()                                                          \
  do {                                                                                          \
    FERRY_SKIP_WITHOUT_TOOL();                                                                  \
    if (!bench_built()) GTEST_SKIP() << "this build has no benchmarks (FERRY_BUILD_BENCH=OFF)"; \
    if (run_ferry_tool("bench-transport --help").status != 0) {                                 \
      GTEST_SKIP() << "this tool has no bench-transport (built without ferry/transport: "       \
                      "FERRY_TRANSPORT, UCX)";                                                  \
    }                                                                                           \
  } while (0)

TEST(BenchTransportCommand, QuickRunPrintsATablePerTransport) {
  SKIP_WITHOUT_BENCH_TRANSPORT();
  const Result r = run_ferry_tool("bench-transport --quick --repeat 1 --timeout 30");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* tls : {"\nshm: ", "UCX_TLS=sm,tcp", "\ntcp: ", "UCX_TLS=tcp"}) {
    EXPECT_THAT(r.out, HasSubstr(tls)) << r.out;
  }
  EXPECT_THAT(r.out, HasSubstr("ferry's connection"));
  EXPECT_THAT(r.out, HasSubstr("ucx_perftest"));
  for (const char* c : {"latency 8 B, median", "latency 8 B, mean", "bandwidth 4 KiB",
                        "bandwidth 1 MiB", "bandwidth 16 MiB"}) {
    EXPECT_THAT(r.out, HasSubstr(c)) << r.out;
  }
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("bandwidth 1 GiB")));  // --quick stops at 16 MiB
}

TEST(BenchTransportCommand, SizesPicksTheBandwidthCases) {
  SKIP_WITHOUT_BENCH_TRANSPORT();
  const Result r = run_ferry_tool(
      "bench-transport --quick --repeat 1 --timeout 30 --tls tcp --cases bandwidth --sizes 64K");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("bandwidth 64 KiB")) << r.out;
  for (const char* other : {"bandwidth 4 KiB", "bandwidth 1 MiB", "latency 8 B", "\nshm: "}) {
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr(other))) << r.out;
  }
  const Result bad = run_ferry_tool("bench-transport --quick --sizes 3M");
  EXPECT_NE(bad.status, 0);
  EXPECT_THAT(bad.out, HasSubstr("--sizes"));
}

TEST(BenchTransportCommand, BadOptionsAreRefusedWithAMessage) {
  SKIP_WITHOUT_BENCH_TRANSPORT();
  const Result repeat = run_ferry_tool("bench-transport --quick --repeat 0");
  EXPECT_NE(repeat.status, 0);
  EXPECT_THAT(repeat.out, HasSubstr("expected --repeat >= 1, but got 0"));
  const Result tls = run_ferry_tool("bench-transport --quick --tls rdma");
  EXPECT_NE(tls.status, 0);
  EXPECT_THAT(tls.out, HasSubstr("--tls"));
}

// `ferry bench-weights`: one small model, one repeat, over both transports.
TEST(BenchWeightsCommand, PrintsTheLocalLoadsAndAFetchPerTransport) {
  SKIP_WITHOUT_BENCH_TRANSPORT();
  const Result r = run_ferry_tool("bench-weights --arch resnet18 --repeat 1 --timeout 60");
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* line :
       {"bench-weights: resnet18", "local load, file in the page cache",
        "local load, file evicted from the page cache", "UCX_TLS=sm,tcp:", "UCX_TLS=tcp:",
        "fetch: request to verified bytes in pinned memory", "fetch / local load: "}) {
    EXPECT_THAT(r.out, HasSubstr(line)) << r.out;
  }
  const Result bad = run_ferry_tool("bench-weights --arch alexnet --repeat 1");
  EXPECT_NE(bad.status, 0);
  EXPECT_THAT(bad.out, HasSubstr("alexnet"));
}

}  // namespace
}  // namespace ferry
