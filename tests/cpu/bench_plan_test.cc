// Which kernel each `ferry bench` case gets (bench/copy_cases.cc), on every SIMD target this CPU
// supports: the kernel kind, the transpose route, and the register tile and staging of the
// targets the project tunes for (AVX-512 and AVX2). Prints each plan, as `ferry explain` would.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "bench/copy_bench.h"
#include "ferry/backends/cpu/copy_kernel.h"
#include "ferry/backends/cpu/copy_plan.h"
#include "ferry/backends/cpu/simd.h"
#include "ferry/iter/parallel.h"
#include "ferry/ops/copy.h"

namespace ferry::cpu {
namespace {

// The plan copy_ makes for dst.copy_(src), by the route copy_impl takes.
CopyPlan plan_of(const Tensor& dst, const Tensor& src) {
  const CopyRoute route = copy_route(dst, src);
  if (route == CopyRoute::kDenseCpu) return plan_copy(dense_copy_problem(dst, src));
  return plan_copy(copy_problem_from(build_copy_iterator(dst, src)));
}

struct Expected {
  CopyKernelKind kind;
  int avx512_tile = 0;  // the register tile's edge on AVX3 and AVX2 (transposes only)
  int avx2_tile = 0;
  TransposeRoute route = TransposeRoute::kFused;
  // Tiles only where a vector holds two elements or more (16-byte ones: AVX2 and AVX-512);
  // strided runs on narrower targets.
  bool wide_vectors_only = false;
  // Through buffers in whole lines on AVX-512 and AVX2 (Note [line-staged transposes] in
  // copy_run.cc): narrow blocks whose rows share the L2's sets.
  bool staged = false;
  // The half tiles' edge on AVX3 and AVX2 (Note [half tiles] in copy_planner.cc); 0: none.
  int avx512_half = 0;
  int avx2_half = 0;
};

// Keyed by the full-size case names.
const std::map<std::string, Expected>& expected() {
  using K = CopyKernelKind;
  static const std::map<std::string, Expected> table = {
      {"contig_f32", {K::Memcpy}},
      {"contig_f32_to_bf16", {K::Convert}},
      {"contig_f32_to_f16", {K::Convert}},
      {"contig_i32_to_f32", {K::Convert}},
      {"transpose2d_f32_4096", {K::Transpose, 16, 8}},
      // AVX2's 16-bit and 8-bit dst tiles are 16 x 16, paired (transpose_kernels.cc).
      {"transpose2d_bf16_4096", {K::Transpose, 16, 16}},
      {"transpose2d_f32_to_bf16_4096", {K::Transpose, 16, 16}},
      {"transpose2d_f32_to_f16_4096", {K::Transpose, 16, 16}},
      // 3000 rows: the last 8 under AVX-512's tiles of 16 go by its half tiles.
      {"transpose2d_f32_3000", {K::Transpose, 16, 8, TransposeRoute::kFused, false, false, 8, 0}},
      {"transpose2d_f32_to_bf16_3000",
       {K::Transpose, 16, 16, TransposeRoute::kFused, false, false, 8, 8}},
      {"transpose2d_u8_4096", {K::Transpose, 16, 16}},
      {"transpose2d_f64_2896", {K::Transpose, 8, 4}},
      // 16-byte elements: 4 x 4 tiles of 512-bit rows, 2 x 2 of 256-bit ones (none on SSE4).
      {"transpose2d_c128_2048", {K::Transpose, 4, 2, TransposeRoute::kFused, true}},
      {"nchw_to_nhwc_f32_32x64x56x56", {K::Transpose, 16, 8}},
      {"nhwc_to_nchw_f32_32x64x56x56", {K::Transpose, 16, 8}},
      // Innermost dims of 3 and 4 elements are too short for tiles: gathers along them.
      {"nchw_to_nhwc_u8_32x3x224x224", {K::Gather}},
      {"nhwc_to_nchw_f32_32x3x224x224", {K::Gather}},
      {"permute3d_102_f32_inner8", {K::Memcpy}},
      {"permute3d_120_f32_inner4", {K::Gather}},
      {"permute3d_210_f32_256", {K::Transpose, 16, 8}},
      {"permute5d_43210_f32", {K::Transpose, 16, 8}},
      {"permute6d_013524_f32_pixel_unshuffle", {K::Gather}},
      {"permute6d_305142_f32", {K::Transpose, 16, 8}},
      {"permute5d_43210_u8", {K::Transpose, 16, 16, TransposeRoute::kFused, false, true}},
      {"permute5d_43210_bf16", {K::Transpose, 16, 16, TransposeRoute::kFused, false, true}},
      {"permute6d_305142_u8", {K::Transpose, 16, 16}},
      // Sides of 8: half tiles take them, but for AVX2's float32, whose whole tiles are 8 x 8.
      {"permute6d_305142_u8_side8",
       {K::Transpose, 16, 16, TransposeRoute::kFused, false, false, 8, 8}},
      {"permute6d_305142_f32_side8",
       {K::Transpose, 16, 8, TransposeRoute::kFused, false, false, 8, 0}},
      {"broadcast_col_f32_4096", {K::Broadcast}},
      {"slice_step2_f32", {K::Gather}},
  };
  return table;
}

class BenchPlans : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_threads_ = get_num_threads();
    set_num_threads(2);
  }
  void TearDown() override {
    set_simd_target("");
    set_num_threads(saved_threads_);
  }
  int saved_threads_ = 1;
};

TEST_F(BenchPlans, EachCaseGetsItsKernel) {
  for (const std::string& target : simd_targets()) {
    set_simd_target(target);
    int checked = 0;
    for (const bench::Spec& spec : bench::copy_cases(/*quick=*/false)) {
      if (spec.per_call()) continue;
      const bench::CaseTensors t = bench::case_tensors(spec, /*fill=*/false);
      const CopyPlan plan = plan_of(t.dst, t.src);
      std::printf("%-8s %-38s %s\n", target.c_str(), spec.name.c_str(), plan.describe().c_str());
      const auto it = expected().find(spec.name);
      ASSERT_NE(it, expected().end()) << "a bench case without an expected plan: " << spec.name;
      const Expected& e = it->second;
      EXPECT_EQ(copy_kernel_name(plan.kind), std::string(copy_kernel_name(e.kind))) << spec.name;
      if (e.kind == CopyKernelKind::Transpose) {
        // HWY_SCALAR (one lane) has no register tiles: every transpose runs strided.
        const bool wide = target.rfind("AVX", 0) == 0;
        const TransposeRoute route = target == "SCALAR" || (e.wide_vectors_only && !wide)
                                         ? TransposeRoute::kStrided
                                         : e.route;
        EXPECT_EQ(transpose_route_name(plan.route), std::string(transpose_route_name(route)))
            << spec.name;
        if (wide) {
          EXPECT_EQ(plan.staged, e.staged) << spec.name;
        }
        if (target == "AVX3") {
          EXPECT_EQ(plan.tile_rows, e.avx512_tile) << spec.name;
          EXPECT_EQ(plan.half_tile, e.avx512_half) << spec.name;
        } else if (target == "AVX2") {
          EXPECT_EQ(plan.tile_rows, e.avx2_tile) << spec.name;
          EXPECT_EQ(plan.half_tile, e.avx2_half) << spec.name;
        }
      }
      ++checked;
    }
    EXPECT_EQ(checked, static_cast<int>(expected().size()));
  }
}

}  // namespace
}  // namespace ferry::cpu
