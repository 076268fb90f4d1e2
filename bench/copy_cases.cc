// The copy benchmark's cases (bench/copy_bench.h): names, shapes, layouts and dtypes, and the
// ferry tensors each one copies between. Shared by `ferry bench` and the planner test that
// shows which kernel each case gets (tests/cpu/bench_plan_test.cc).
#include <string>
#include <utility>
#include <vector>

#include "bench/copy_bench.h"
#include "ferry/ferry.h"
#include "ferry/ops/factories.h"

namespace ferry::bench {
namespace {

Spec make(std::string name, Layout layout, std::vector<int64_t> sizes, ScalarType src,
          ScalarType dst, std::vector<int64_t> perm = {}) {
  Spec s;
  s.name = std::move(name);
  s.layout = layout;
  s.sizes = std::move(sizes);
  s.perm = std::move(perm);
  s.src_dtype = src;
  s.dst_dtype = dst;
  int64_t numel = 1;
  for (int64_t n : s.sizes) numel *= n;
  const double used_src =
      s.layout == Layout::ExpandCol ? static_cast<double>(s.sizes[0]) : static_cast<double>(numel);
  s.bytes_read = used_src * static_cast<double>(element_size(src));
  s.bytes_written = static_cast<double>(numel) * static_cast<double>(element_size(dst));
  return s;
}

std::string dims(const std::vector<int64_t>& v, const char* sep) {
  std::string out;
  for (size_t k = 0; k < v.size(); ++k) out += (k == 0 ? "" : sep) + std::to_string(v[k]);
  return out;
}

// src = base.permute(perm) with base.size(perm[d]) = sizes[d], dst contiguous.
Spec permuted(const std::string& what, std::vector<int64_t> sizes, std::vector<int64_t> perm,
              ScalarType t = kFloat32) {
  std::string name = "permute" + std::to_string(sizes.size()) + "d_" + dims(perm, "") + "_" + what;
  return make(std::move(name), Layout::Permute, std::move(sizes), t, t, std::move(perm));
}

}  // namespace

std::vector<Spec> copy_cases(bool quick) {
  const int64_t m = quick ? 1 << 20 : 1 << 24;  // contiguous elements
  const int64_t n = quick ? 1024 : 4096;        // matrix side
  const int64_t batch = quick ? 2 : 32;
  const int64_t cube = quick ? 64 : 256;
  std::vector<Spec> c;
  c.push_back(make("contig_f32", Layout::Contig, {m}, kFloat32, kFloat32));
  c.push_back(make("contig_f32_to_bf16", Layout::Contig, {m}, kFloat32, kBFloat16));
  c.push_back(make("contig_f32_to_f16", Layout::Contig, {m}, kFloat32, kFloat16));
  c.push_back(make("contig_i32_to_f32", Layout::Contig, {m}, kInt32, kFloat32));
  const std::string side = std::to_string(n);
  c.push_back(make("transpose2d_f32_" + side, Layout::Transpose2D, {n, n}, kFloat32, kFloat32));
  c.push_back(make("transpose2d_bf16_" + side, Layout::Transpose2D, {n, n}, kBFloat16, kBFloat16));
  c.push_back(
      make("transpose2d_f32_to_bf16_" + side, Layout::Transpose2D, {n, n}, kFloat32, kBFloat16));
  c.push_back(
      make("transpose2d_f32_to_f16_" + side, Layout::Transpose2D, {n, n}, kFloat32, kFloat16));
  // A side whose rows do not fill whole cache lines (3000 float32 elements are 187.5 lines): dst
  // rows start mid-line, and streaming stores go by panels.
  const int64_t odd = quick ? 1000 : 3000;
  const std::string odd_side = std::to_string(odd);
  c.push_back(
      make("transpose2d_f32_" + odd_side, Layout::Transpose2D, {odd, odd}, kFloat32, kFloat32));
  c.push_back(make("transpose2d_f32_to_bf16_" + odd_side, Layout::Transpose2D, {odd, odd}, kFloat32,
                   kBFloat16));
  // Every element width the tiles move unchanged: 1, 8 and 16 bytes (2 and 4 above), at sides
  // that keep the bytes moved near the 4096 x 4096 float32 case's.
  const int64_t side8 = quick ? 724 : 2896;
  const int64_t side16 = quick ? 512 : 2048;
  c.push_back(make("transpose2d_u8_" + side, Layout::Transpose2D, {n, n}, kUInt8, kUInt8));
  c.push_back(make("transpose2d_f64_" + std::to_string(side8), Layout::Transpose2D, {side8, side8},
                   kFloat64, kFloat64));
  c.push_back(make("transpose2d_c128_" + std::to_string(side16), Layout::Transpose2D,
                   {side16, side16}, kComplex128, kComplex128));
  const std::string nchw = std::to_string(batch) + "x64x56x56";
  c.push_back(make("nchw_to_nhwc_f32_" + nchw, Layout::ToChannelsLast, {batch, 64, 56, 56},
                   kFloat32, kFloat32));
  c.push_back(make("nhwc_to_nchw_f32_" + nchw, Layout::FromChannelsLast, {batch, 64, 56, 56},
                   kFloat32, kFloat32));
  // Small innermost dims (fewer than 16 elements): RGB images to and from channels-last, and
  // runs of 8 float32 (32 bytes) moved whole.
  const std::string rgb = std::to_string(batch) + "x3x224x224";
  c.push_back(
      make("nchw_to_nhwc_u8_" + rgb, Layout::ToChannelsLast, {batch, 3, 224, 224}, kUInt8, kUInt8));
  c.push_back(make("nhwc_to_nchw_f32_" + rgb, Layout::FromChannelsLast, {batch, 3, 224, 224},
                   kFloat32, kFloat32));
  c.push_back(permuted("f32_inner8", {quick ? 512 : 4096, 512, 8}, {1, 0, 2}));
  c.push_back(permuted("f32_inner4", {quick ? 256 : 1024, 4096, 4}, {1, 2, 0}));
  c.push_back(make("permute3d_210_f32_" + std::to_string(cube), Layout::Permute210,
                   {cube, cube, cube}, kFloat32, kFloat32));
  // High-rank permutations: a 5-dim reversal, pixel unshuffle (6 dims: N, C, H/2, 2, W/2, 2 ->
  // N, C, 2, 2, H/2, W/2) and a scrambled 6-dim one.
  c.push_back(permuted("f32", {quick ? 8 : 32, 16, 16, 32, 32}, {4, 3, 2, 1, 0}));
  c.push_back(permuted("f32_pixel_unshuffle", {batch, 64, 2, 2, 28, 28}, {0, 1, 3, 5, 2, 4}));
  c.push_back(permuted("f32", {16, 8, 16, quick ? 2 : 8, 16, 16}, {3, 0, 5, 1, 4, 2}));
  // The same permutations of narrower elements: each block then writes a dst row less than a
  // line (Note [transpose outer order] in copy_run.cc).
  c.push_back(permuted("u8", {quick ? 8 : 32, 16, 16, 32, 32}, {4, 3, 2, 1, 0}, kUInt8));
  c.push_back(permuted("bf16", {quick ? 8 : 32, 16, 16, 32, 32}, {4, 3, 2, 1, 0}, kBFloat16));
  c.push_back(permuted("u8", {16, 8, 16, quick ? 2 : 8, 16, 16}, {3, 0, 5, 1, 4, 2}, kUInt8));
  // Both contiguous dims 8 long, half a tile on AVX-512 (Note [half tiles] in copy_planner.cc).
  c.push_back(permuted("u8_side8", {16, 16, 8, quick ? 2 : 16, 16, 8}, {3, 0, 5, 1, 4, 2}, kUInt8));
  c.push_back(permuted("f32_side8", {16, 16, 8, quick ? 2 : 16, 16, 8}, {3, 0, 5, 1, 4, 2}));
  c.push_back(make("broadcast_col_f32_" + side, Layout::ExpandCol, {n, n}, kFloat32, kFloat32));
  c.push_back(make("slice_step2_f32", Layout::SliceStep2, {n, n}, kFloat32, kFloat32));
  c.push_back(make("copy_1_f32", Layout::PerCallCopy, {1}, kFloat32, kFloat32));
  c.push_back(make("copy_64_f32", Layout::PerCallCopy, {64}, kFloat32, kFloat32));
  c.push_back(make("to_bf16_64_f32", Layout::PerCallTo, {64}, kFloat32, kBFloat16));
  for (Spec& s : c) {
    if (s.per_call()) s.calls = quick ? 2000 : 20000;
  }
  return c;
}

CaseTensors case_tensors(const Spec& s, bool fill) {
  const TensorOptions src_opts(s.src_dtype);
  const TensorOptions dst_opts(s.dst_dtype);
  auto source = [&](IntArrayRef sizes) {
    if (!fill) return empty(sizes, src_opts);
    return is_floating_point(s.src_dtype) || is_complex(s.src_dtype)
               ? rand(sizes, src_opts)
               : randint(0, 100, sizes, src_opts);
  };
  const std::vector<int64_t>& z = s.sizes;
  CaseTensors t;
  switch (s.layout) {
    case Layout::Contig:
    case Layout::PerCallCopy:
      t.src = source(z);
      t.dst = empty(z, dst_opts);
      break;
    case Layout::PerCallTo:
      t.src = source(z);
      break;
    case Layout::Transpose2D:
      t.src = source(z).t();
      t.dst = empty(z, dst_opts);
      break;
    case Layout::ToChannelsLast:
      t.src = source(z);
      t.dst = empty({z[0], z[2], z[3], z[1]}, dst_opts).permute({0, 3, 1, 2});
      break;
    case Layout::FromChannelsLast:
      t.src = source({z[0], z[2], z[3], z[1]}).permute({0, 3, 1, 2});
      t.dst = empty(z, dst_opts);
      break;
    case Layout::Permute210:
      t.src = source(z).permute({2, 1, 0});
      t.dst = empty(z, dst_opts);
      break;
    case Layout::Permute: {
      std::vector<int64_t> base(z.size());
      for (size_t d = 0; d < z.size(); ++d) base[static_cast<size_t>(s.perm[d])] = z[d];
      t.src = source(base).permute(s.perm);
      t.dst = empty(z, dst_opts);
      break;
    }
    case Layout::ExpandCol:
      t.src = source({z[0], 1}).expand(z);
      t.dst = empty(z, dst_opts);
      break;
    case Layout::SliceStep2:
      t.src = source({z[0], 2 * z[1]}).slice(1, 0, std::nullopt, 2);
      t.dst = empty(z, dst_opts);
      break;
  }
  return t;
}

}  // namespace ferry::bench
