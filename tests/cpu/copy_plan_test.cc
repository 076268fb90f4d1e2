// plan_copy picks the intended kernel for each kind of problem (the benchmark's shapes among
// them), splits only large problems across threads, and describes itself; the SIMD target
// controls list, force and restore targets.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "ferry/backends/cpu/copy_plan.h"
#include "ferry/backends/cpu/cpu_target.h"
#include "ferry/backends/cpu/simd.h"
#include "ferry/core/error.h"
#include "ferry/iter/parallel.h"

namespace ferry::cpu {
namespace {

// A problem over sizes with strides in elements (fastest-first for dst); no data: planning
// never reads it.
CopyProblem problem(std::vector<int64_t> sizes, std::vector<int64_t> dst, std::vector<int64_t> src,
                    ScalarType dst_t = kFloat32, ScalarType src_t = kFloat32) {
  CopyProblem p;
  for (size_t d = 0; d < sizes.size(); ++d) {
    p.sizes.push_back(sizes[d]);
    p.dst_strides.push_back(dst[d] * static_cast<int64_t>(element_size(dst_t)));
    p.src_strides.push_back(src[d] * static_cast<int64_t>(element_size(src_t)));
  }
  p.dst_dtype = dst_t;
  p.src_dtype = src_t;
  return p;
}

class Plan : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = get_num_threads();
    set_num_threads(2);
  }
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = 1;
};

TEST_F(Plan, DenseCopiesAreMemcpyOrConvert) {
  EXPECT_EQ(plan_copy(problem({1 << 24}, {1}, {1})).kind, CopyKernelKind::Memcpy);
  EXPECT_EQ(plan_copy(problem({}, {}, {})).kind, CopyKernelKind::Memcpy);
  EXPECT_EQ(plan_copy(problem({1 << 24}, {1}, {1}, kBFloat16)).kind, CopyKernelKind::Convert);
  EXPECT_EQ(plan_copy(problem({64}, {1}, {1}, kBFloat16)).kind, CopyKernelKind::Convert);
  CopyProblem negated = problem({100}, {1}, {1});
  negated.neg = true;
  EXPECT_EQ(plan_copy(negated).kind, CopyKernelKind::Convert);
  // conj means nothing for real dtypes, neg nothing for bool: still a memcpy.
  CopyProblem conj_real = problem({100}, {1}, {1});
  conj_real.conj = true;
  EXPECT_EQ(plan_copy(conj_real).kind, CopyKernelKind::Memcpy);
  CopyProblem neg_bool = problem({100}, {1}, {1}, kBool, kBool);
  neg_bool.neg = true;
  EXPECT_EQ(plan_copy(neg_bool).kind, CopyKernelKind::Memcpy);
  // Rows that are contiguous on both sides, with gaps between them.
  EXPECT_EQ(plan_copy(problem({100, 7}, {1, 100}, {1, 128})).kind, CopyKernelKind::Memcpy);
}

TEST_F(Plan, TransposesFindSrcsContiguousDim) {
  // transpose2d: dst (4096, 4096) contiguous, src = rand(4096, 4096).t().
  CopyPlan t2 = plan_copy(problem({4096, 4096}, {1, 4096}, {4096, 1}));
  EXPECT_EQ(t2.kind, CopyKernelKind::Transpose);
  EXPECT_EQ(t2.src_fast_dim, 1);
  EXPECT_EQ(t2.tile_rows, t2.tile_cols);
  EXPECT_GT(t2.block_rows, 0);
  EXPECT_GT(t2.block_cols, 0);
  // Register tiles exist on every SIMD target but the one-lane SCALAR baseline.
  if (std::string(simd_target()) != "SCALAR") {
    EXPECT_GT(t2.tile_rows, 1);
    EXPECT_EQ(t2.block_rows % t2.tile_rows, 0);
    EXPECT_EQ(t2.block_cols % t2.tile_cols, 0);
  }
  EXPECT_EQ(plan_copy(problem({4096, 4096}, {1, 4096}, {4096, 1}, kBFloat16)).kind,
            CopyKernelKind::Transpose);
  EXPECT_EQ(plan_copy(problem({4096, 4096}, {1, 4096}, {4096, 1}, kBFloat16, kBFloat16)).kind,
            CopyKernelKind::Transpose);
  // permute3d_210 on 256^3: the middle dim is outer, dims 0 and 2 transpose.
  CopyPlan p3 = plan_copy(problem({256, 256, 256}, {1, 256, 65536}, {65536, 256, 1}));
  EXPECT_EQ(p3.kind, CopyKernelKind::Transpose);
  EXPECT_EQ(p3.src_fast_dim, 2);
  // NCHW -> NHWC (32x64x56x56) as the iterator coalesces it: (C, HW, N).
  CopyPlan nhwc = plan_copy(problem({64, 3136, 32}, {1, 64, 200704}, {3136, 1, 200704}));
  EXPECT_EQ(nhwc.kind, CopyKernelKind::Transpose);
  EXPECT_EQ(nhwc.src_fast_dim, 1);
  // NHWC -> NCHW: (HW, C, N).
  CopyPlan nchw = plan_copy(problem({3136, 64, 32}, {1, 3136, 200704}, {64, 1, 200704}));
  EXPECT_EQ(nchw.kind, CopyKernelKind::Transpose);
  EXPECT_EQ(nchw.src_fast_dim, 1);
  // Too narrow for tiles: a gather along dim 0 serves better.
  EXPECT_EQ(plan_copy(problem({100000, 3}, {1, 100000}, {3, 1})).kind, CopyKernelKind::Gather);
}

TEST_F(Plan, BroadcastGatherAndStrided) {
  // broadcast_col: rand(4096, 1).expand(4096, 4096).
  EXPECT_EQ(plan_copy(problem({4096, 4096}, {1, 4096}, {0, 1})).kind, CopyKernelKind::Broadcast);
  // A broadcast row is a memcpy per row.
  EXPECT_EQ(plan_copy(problem({4096, 4096}, {1, 4096}, {1, 0})).kind, CopyKernelKind::Memcpy);
  // slice_step2: rand(4096, 8192)[:, ::2].
  EXPECT_EQ(plan_copy(problem({4096, 4096}, {1, 4096}, {2, 8192})).kind, CopyKernelKind::Gather);
  // A strided destination.
  EXPECT_EQ(plan_copy(problem({4096, 100}, {2, 8192}, {1, 4096})).kind, CopyKernelKind::Strided);
  EXPECT_EQ(plan_copy(problem({4096, 100}, {2, 8192}, {0, 1})).kind, CopyKernelKind::Broadcast);
}

TEST_F(Plan, OnlyLargeProblemsUseThreads) {
  EXPECT_EQ(plan_copy(problem({1}, {1}, {1})).threads, 1);
  EXPECT_EQ(plan_copy(problem({64}, {1}, {1}, kBFloat16)).threads, 1);
  EXPECT_EQ(plan_copy(problem({4096}, {1}, {1})).threads, 1);
  EXPECT_EQ(plan_copy(problem({1 << 24}, {1}, {1})).threads, 2);
  EXPECT_EQ(plan_copy(problem({4096, 4096}, {1, 4096}, {4096, 1})).threads, 2);
  set_num_threads(1);
  EXPECT_EQ(plan_copy(problem({1 << 24}, {1}, {1})).threads, 1);
}

TEST_F(Plan, DescribeNamesKernelThreadsAndTarget) {
  const CopyPlan t = plan_copy(problem({4096, 4096}, {1, 4096}, {4096, 1}));
  const std::string d = t.describe();
  EXPECT_NE(d.find("Transpose"), std::string::npos) << d;
  EXPECT_NE(d.find("2 threads"), std::string::npos) << d;
  EXPECT_NE(d.find(simd_target()), std::string::npos) << d;
  EXPECT_STREQ(copy_kernel_name(CopyKernelKind::Gather), "Gather");
}

TEST(SimdTargets, ListForceAndRestore) {
  const std::vector<std::string> targets = simd_targets();
  ASSERT_FALSE(targets.empty());
  // The default: FERRY_CPU_TARGET's (the per-target test runs set it), else the best.
  const std::string chosen = default_cpu_target();
  EXPECT_EQ(chosen, simd_target());
  if (std::getenv("FERRY_CPU_TARGET") == nullptr) {
    EXPECT_EQ(targets.front(), chosen);
  }
  for (const std::string& t : targets) {
    set_simd_target(t);
    EXPECT_EQ(t, simd_target());
    EXPECT_EQ(simd_targets(), targets);  // the list ignores the forced target
    EXPECT_EQ(plan_copy(problem({64}, {1}, {1})).simd_target, t);
    set_simd_target(cpu_target_alias(t));  // ferry's name for it: the same target
    EXPECT_EQ(t, simd_target());
  }
  set_simd_target("");
  EXPECT_EQ(chosen, simd_target());
  EXPECT_THROW(set_simd_target("NEON9000"), Error);
  EXPECT_EQ(chosen, simd_target());
}

}  // namespace
}  // namespace ferry::cpu
