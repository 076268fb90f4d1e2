// `ferry explain` end to end: the tool (FERRY_TOOL, set by ctest) prints the route, the byte
// strides at each stage, the kernel (with its tiling) and the threads for a few copies; bad
// options and sizes that overflow fail with a message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "ferry/backends/cpu/copy_kernel.h"
#include "ferry/backends/cpu/copy_plan.h"
#include "ferry/ferry.h"
#include "ferry/iter/parallel.h"
#include "tests/support/tool.h"

namespace {

using ::testing::HasSubstr;

// Runs `ferry explain <args>`; returns stdout and stderr, and the exit status in *status.
std::string explain(const std::string& args, int* status) {
  ferry::testing::ToolRun run = ferry::testing::run_ferry_tool("explain " + args);
  *status = run.status;
  return std::move(run.out);
}

class Explain : public ::testing::Test {
 protected:
  void SetUp() override { FERRY_SKIP_WITHOUT_TOOL(); }
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

// What plan_copy picks, in this process, for dst = empty(sizes of src, dst_type) and src =
// empty(shape).permute(perm) of src_type with `threads` threads: the line explain must print.
std::string planned(ferry::IntArrayRef shape, ferry::IntArrayRef perm, ferry::ScalarType src_type,
                    ferry::ScalarType dst_type, int threads) {
  const int saved = ferry::get_num_threads();
  ferry::set_num_threads(threads);
  const ferry::Tensor src = ferry::empty(shape, src_type).permute(perm);
  const ferry::Tensor dst = ferry::empty(src.sizes(), dst_type);
  const ferry::TensorIterator iter = ferry::TensorIteratorConfig()
                                         .add_output(dst)
                                         .add_input(src)
                                         .check_all_same_dtype(false)
                                         .build();
  const ferry::cpu::CopyPlan plan = ferry::cpu::plan_copy(ferry::copy_problem_from(iter));
  ferry::set_num_threads(saved);
  EXPECT_EQ(plan.kind, ferry::cpu::CopyKernelKind::Transpose);
  return plan.describe();
}

TEST_F(Explain, TransposeKernelPrintsTilingAndThreads) {
  // 64 x 48 floats: both sides reach kMinTransposeSide (copy_tuning.h), so the tile transpose.
  int status = 0;
  std::string out = explain("--shape 64,48 --permute 1,0 --threads 1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("coalesced              [64, 48]                 [4, 256]"));
  EXPECT_THAT(out, HasSubstr("kernel: Transpose (src fast dim 1, "));
  EXPECT_THAT(
      out, HasSubstr("kernel: " + planned({64, 48}, {1, 0}, ferry::kFloat32, ferry::kFloat32, 1) +
                     "\n"));
  EXPECT_THAT(out, HasSubstr("threads: 1 of 1 (get_num_threads)"));
  // 1024 x 1024 float -> bfloat16: the conversion folds into the tiles; large enough for two
  // threads.
  out = explain("--shape 1024,1024 --permute 1,0 --dst-dtype bf16 --threads 2", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("conversion: float32 -> bfloat16"));
  EXPECT_THAT(out, HasSubstr("kernel: Transpose (src fast dim 1, "));
  EXPECT_THAT(
      out, HasSubstr("kernel: " +
                     planned({1024, 1024}, {1, 0}, ferry::kFloat32, ferry::kBFloat16, 2) + "\n"));
  EXPECT_THAT(out, HasSubstr(", 2 threads, "));
  EXPECT_THAT(out, HasSubstr("threads: 2 of 2 (get_num_threads)"));
}

TEST_F(Explain, RowKernelsNameTheirWalk) {
  // NCHW -> NHWC of 3 channels of bytes: each dst run is a packed pixel, gathered from 3 planes.
  int status = 0;
  std::string out =
      explain("--shape 2,3,64,64 --permute 0,2,3,1 --src-dtype u8 --threads 1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("kernel: Gather, 1 thread, "));
  EXPECT_THAT(out, HasSubstr("walk: narrow gather: 3 planes interleaved into packed tuples"));
  // The reverse, NHWC -> NCHW: dst planes read from tuples of 3 along dim 1.
  out = explain("--shape 2,64,64,3 --permute 0,3,1,2 --threads 1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("walk: narrow scatter: tuples of 3 along dim 1 deinterleaved"));
  // permute(1, 0, 2) of rows of 8 float32 whose src rows are 16 KiB apart: short-run blocks.
  out = explain("--shape 64,512,8 --permute 1,0,2 --threads 1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("walk: short-run blocks: 32-byte runs, 8 per src row at a time"));
  // Half of each row: one 128-byte run per dst row.
  out = explain("--shape 100,64 --slice 1:0:32 --threads 1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("walk: rows: 128-byte runs along dim 0, one kernel call each"));
}

TEST_F(Explain, ManyDimTransposesNameTheirOuterOrder) {
  // Reversed 5 dims of float32, 32 along dst's contiguous dim (128 bytes per dst row): the outer
  // dims by src's strides, dim 3 (src stride 32 elements) first (Note [transpose outer order]).
  int status = 0;
  std::string out = explain("--shape 32,4,4,8,32 --permute 4,3,2,1,0 --threads 1", &status);
  EXPECT_EQ(status, 0) << out;
  if (out.find(", strided, ") != std::string::npos) {
    // The sanitizer builds' SCALAR target has no register tiles: blocks of 16 rows, dst's order.
    GTEST_SKIP() << "no register tiles on this build's SIMD target";
  }
  EXPECT_THAT(out, HasSubstr("walk: blocks of register tiles, outer dims 3 2 1 (fastest first)"));
  // The same of bytes (32 bytes per dst row): dst's fastest outer dim first, src's fastest of
  // the others next, ordinary stores and one block per unit, so that each kernel call takes the
  // 4 units along dim 1 (Note [small transposes]).
  out = explain("--shape 32,4,4,8,32 --permute 4,3,2,1,0 --src-dtype u8 --threads 1", &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("ordinary stores"));
  EXPECT_THAT(out, HasSubstr("walk: blocks of register tiles, outer dims 1 3 2 (fastest first), "
                             "up to 4 blocks per kernel call"));
}

TEST_F(Explain, LineStagedTransposesSayHowTheyAreStaged) {
  // Reversed 5 dims of bytes, rows 256 KiB apart on both sides (a multiple of the L2's set span)
  // and 32 bytes per row: src rows of 8 x 32 bytes along dim 3, dst rows of 4 x 32 along dim 1
  // (Note [line-staged transposes]).
  int status = 0;
  const std::string out =
      explain("--shape 32,32,16,16,32 --permute 4,3,2,1,0 --src-dtype u8 --threads 1", &status);
  EXPECT_EQ(status, 0) << out;
  if (out.find(", strided, ") != std::string::npos) {
    GTEST_SKIP() << "no register tiles on this build's SIMD target";
  }
  EXPECT_THAT(out, HasSubstr("tile 16x16, staged in whole lines)"));
  EXPECT_THAT(out, HasSubstr("walk: line-staged blocks: src rows of 256 bytes (8 of dim 3) into a "
                             "buffer, register tiles into a second, dst rows of 128 bytes (4 of "
                             "dim 1) out; 256 blocks"));
}

TEST_F(Explain, SizesThatOverflowAreRefused) {
  int status = 0;
  // 2^62 float32 elements: 2^64 bytes, which used to wrap to an empty storage.
  const std::string out = explain("--shape 4611686018427387904", &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_THAT(out, HasSubstr("storage size calculation overflowed"));
  EXPECT_THAT(out, HasSubstr("[4611686018427387904]"));
}

TEST_F(Explain, BadOptionsSaySo) {
  int status = 0;
  const std::string out = explain("--shape 4,x", &status);
  EXPECT_NE(status, 0);
  EXPECT_THAT(out, HasSubstr("--shape: expected an integer, but got \"x\""));
  EXPECT_NE((explain("--shape 4 --dst-format sideways", &status), status), 0);
}

}  // namespace
