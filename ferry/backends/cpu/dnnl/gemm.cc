// cpu::gemm: batched out = alpha * a @ b + beta * out + bias on oneDNN's matmul for float32 and
// bfloat16 (and float16 where the CPU has it, else through float32 temporaries), the portable
// loops for float64 and integers. Row- or column-major operands with any leading dimension and
// batch stride go to oneDNN as they are; other layouts are staged through dense temporaries.
// One large float32 product with a column-major b goes to oneDNN's dnnl_sgemm (Note [float32 GEMM
// through dnnl_sgemm]).
#include <cstring>
#include <string>

#include "ferry/backends/cpu/dnnl/dnnl_runtime.h"
#include "ferry/backends/cpu/dnnl/nn_kernels.h"
#include "ferry/backends/cpu/dnnl/nn_reference.h"
#include "ferry/backends/cpu/dnnl/nn_support.h"

namespace ferry::cpu {
namespace {

constexpr const char* kOp = "gemm";

// A [B, R, C] operand as matmul sees it: a broadcast batch (stride 0) has size 1, and the strides
// of size-1 dimensions are made canonical so that they cannot hide a row- or column-major layout.
struct MatmulLayout {
  std::array<int64_t, 3> dims{};
  std::array<int64_t, 3> strides{};
  bool fast = false;  // row- or column-major matrices: oneDNN's optimized kernels take them
};

MatmulLayout matmul_layout(const Tensor& t, bool is_output) {
  MatmulLayout l;
  const int64_t batches = t.size(0), rows = t.size(1), cols = t.size(2);
  int64_t sb = t.stride(0), sr = t.stride(1), sc = t.stride(2);
  if (cols == 1) sc = 1;
  if (rows == 1) sr = sc == 1 ? cols : 1;
  const bool broadcast = batches > 1 && sb == 0;
  if (batches == 1 || broadcast) sb = rows * cols;
  l.dims = {broadcast ? 1 : batches, rows, cols};
  l.strides = {sb, sr, sc};
  const bool row_major = sc == 1 && sr >= cols;
  const bool col_major = sr == 1 && sc >= rows;
  l.fast = !t.is_neg() && !t.is_conj() && (row_major || (!is_output && col_major));
  return l;
}

dnnl::memory::desc matmul_desc(const Tensor& t, const MatmulLayout& l) {
  return onednn::desc_of(t, l.dims, l.strides, kOp);
}

std::string describe(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  return "a " + nn::shape_str(a) + " strides " + nn::shape_str(a.strides()) + ", b " +
         nn::shape_str(b) + " strides " + nn::shape_str(b.strides()) + ", out " +
         nn::shape_str(out) + " strides " + nn::shape_str(out.strides()) + ", bias " +
         nn::shape_str(bias) + ", dtype " + std::string(scalar_type_name(out.dtype()));
}

struct MatmulEntry : onednn::CachedPrimitive {
  bool bias_as_post_op = false;
  int bias_post_op_index = 0;
};

enum class Outcome { kDone, kDtypeUnsupported, kPrefersDense };

// One oneDNN matmul over operands that are all of one oneDNN dtype. `stage_all` stages every
// operand densely (used when the strides given only reach oneDNN's reference kernel, which the
// cache entry then says: the key holds the layouts oneDNN sees, so the answer is the same for
// every call with those layouts).
Outcome matmul_onednn(const Tensor& out, const Tensor& a, const Tensor& b, double alpha,
                      double beta, const Tensor& bias, bool stage_all) {
  const MatmulLayout la0 = matmul_layout(a, false), lb0 = matmul_layout(b, false);
  const MatmulLayout lo0 = matmul_layout(out, true);
  // matmul broadcasts one operand's batch, not both into a larger out: then a is expanded.
  const bool both_broadcast = la0.dims[0] == 1 && lb0.dims[0] == 1 && out.size(0) > 1;
  const Tensor a_used =
      la0.fast && !stage_all && !both_broadcast ? a : nn::dense_copy(a, a.dtype());
  const Tensor b_used = lb0.fast && !stage_all ? b : nn::dense_copy(b, b.dtype());
  nn::OutputStage out_stage(out, lo0.fast && !stage_all, out.dtype(), MemoryFormat::Contiguous,
                            beta != 0);
  const Tensor bias_used = !bias.defined() || bias.stride(0) == 1 || bias.size(0) == 1
                               ? bias
                               : nn::dense_copy(bias, bias.dtype());
  const MatmulLayout la = matmul_layout(a_used, false), lb = matmul_layout(b_used, false);
  const MatmulLayout lo = matmul_layout(out_stage.get(), true);
  const int64_t n = out.size(2);

  onednn::TeamScope team;
  onednn::CacheKey key(onednn::kGemm);
  key.add(static_cast<int64_t>(out.dtype())).add(la.dims).add(la.strides).add(lb.dims);
  key.add(lb.strides).add(lo.dims).add(lo.strides).add(bias.defined() ? 1 : 0);
  key.add_double(alpha).add_double(beta);
  const dnnl::memory::desc bias_md =
      bias.defined() ? onednn::desc_of(bias_used, {1, 1, n}, {n, n, 1}, kOp) : dnnl::memory::desc();
  auto entry = onednn::find_or_build_as<MatmulEntry>(key, team, [&] {
    auto e = std::make_shared<MatmulEntry>();
    try {
      dnnl::primitive_attr attr = onednn::default_attr();
      if (alpha != 1) attr.set_output_scales(0, {static_cast<float>(alpha)});
      dnnl::post_ops ops;
      if (beta != 0) ops.append_sum(static_cast<float>(beta));
      // Output scales multiply the bias too, so a bias under alpha != 1 is added afterwards.
      e->bias_as_post_op = bias.defined() && alpha != 1;
      if (e->bias_as_post_op) {
        e->bias_post_op_index = ops.len();
        ops.append_binary(dnnl::algorithm::binary_add, bias_md);
      }
      attr.set_post_ops(ops);
      const auto a_md = matmul_desc(a_used, la), b_md = matmul_desc(b_used, lb);
      const auto o_md = matmul_desc(out_stage.get(), lo);
      const dnnl::matmul::desc desc = bias.defined() && !e->bias_as_post_op
                                          ? dnnl::matmul::desc(a_md, b_md, bias_md, o_md)
                                          : dnnl::matmul::desc(a_md, b_md, o_md);
      const dnnl::matmul::primitive_desc pd(desc, attr, onednn::engine());
      e->impl = pd.impl_info_str();
      // The reference kernel is slow enough that dense copies of the operands pay for themselves.
      if (onednn::is_reference_impl(pd) &&
          !(a_used.is_contiguous() && b_used.is_contiguous() && out_stage.get().is_contiguous())) {
        e->status = onednn::CachedPrimitive::Status::kPrefersDense;
        return e;
      }
      e->primitive = dnnl::matmul(pd);
      e->scratchpad_bytes = pd.scratchpad_desc().get_size();
    } catch (const dnnl::error& err) {
      if (err.status == dnnl_unimplemented && out.dtype() == kFloat16) {
        e->status = onednn::CachedPrimitive::Status::kDtypeUnsupported;
        return e;
      }
      onednn::rethrow(err, "matmul", describe(out, a, b, bias));
    }
    return e;
  });
  using Status = onednn::CachedPrimitive::Status;
  if (entry->status == Status::kDtypeUnsupported) return Outcome::kDtypeUnsupported;
  if (entry->status == Status::kPrefersDense) return Outcome::kPrefersDense;

  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, onednn::memory_of(matmul_desc(a_used, la), a_used)},
      {DNNL_ARG_WEIGHTS, onednn::memory_of(matmul_desc(b_used, lb), b_used)},
      {DNNL_ARG_DST, onednn::memory_of(matmul_desc(out_stage.get(), lo), out_stage.get())}};
  if (bias.defined()) {
    const int slot =
        entry->bias_as_post_op
            ? (DNNL_ARG_ATTR_MULTIPLE_POST_OP(entry->bias_post_op_index) | DNNL_ARG_SRC_1)
            : DNNL_ARG_BIAS;
    args.emplace(slot, onednn::memory_of(bias_md, bias_used));
  }
  try {
    onednn::execute(*entry, args);
  } catch (const dnnl::error& err) {
    onednn::rethrow(err, "matmul", describe(out, a, b, bias));
  }
  out_stage.finish();
  return Outcome::kDone;
}

// Note [float32 GEMM through dnnl_sgemm]: oneDNN 2.6's matmul primitive picks its brgemm kernel
// for every float32 layout; its BLAS-like dnnl_sgemm ("gemm:jit" kernels) is faster when b is
// column-major, i.e. b = W^T as in linear (on one Zen 5 core, median of 11, `ferry bench-ops`
// and a standalone program: [1024 x 768] x [768 x 3072]^T 26.0 ms against 27.3 ms, 1024^3 with
// b^T 11.5 against 11.9 ms; at 2 threads 13.5 against 13.8 ms), and not reliably so for a
// row-major b (111 to 201 GFLOP/s from run to run against the primitive's steady 178), which
// stays on the primitive. Both are oneDNN and run on the calling thread's OpenMP team
// (TeamScope). Taken for a single product into a row-major output, every dimension at least
// kSgemmMinDim (smaller products were not measured), with a bias only when beta is 0: the bias
// is written into every row of out first and then accumulated with beta = 1.
constexpr int64_t kSgemmMinDim = 256;

bool sgemm_onednn(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
                  const Tensor& bias) {
  if (out.dtype() != kFloat32 || out.size(0) != 1) return false;
  const int64_t m = out.size(1), n = out.size(2), k = a.size(2);
  if (m < kSgemmMinDim || n < kSgemmMinDim || k < kSgemmMinDim) return false;
  if (bias.defined() && (beta != 0 || bias.stride(0) != 1)) return false;
  const MatmulLayout la = matmul_layout(a, false), lb = matmul_layout(b, false);
  const MatmulLayout lo = matmul_layout(out, true);
  if (!la.fast || !lb.fast || !lo.fast) return false;
  // Row-major operands are not transposed; column-major ones are the transpose of a row-major
  // matrix whose leading dimension is the column stride.
  const bool a_rows = la.strides[2] == 1, b_rows = lb.strides[2] == 1;
  if (b_rows) return false;
  const int64_t lda = a_rows ? la.strides[1] : la.strides[2];
  const int64_t ldb = lb.strides[2];
  const int64_t ldc = lo.strides[1];
  auto* c = static_cast<float*>(out.data_ptr());
  float beta_used = static_cast<float>(beta);
  if (bias.defined()) {
    const auto* bias_data = static_cast<const float*>(bias.data_ptr());
    for (int64_t i = 0; i < m; ++i) std::memcpy(c + i * ldc, bias_data, sizeof(float) * n);
    beta_used = 1;
  }
  onednn::TeamScope team;
  const dnnl_status_t status =
      dnnl_sgemm(a_rows ? 'N' : 'T', 'T', m, n, k, static_cast<float>(alpha),
                 static_cast<const float*>(a.data_ptr()), lda,
                 static_cast<const float*>(b.data_ptr()), ldb, beta_used, c, ldc);
  FERRY_CHECK(status == dnnl_success, "gemm: oneDNN's dnnl_sgemm failed with status ",
              static_cast<int>(status), " (", describe(out, a, b, bias), ")");
  return true;
}

}  // namespace

void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
          const Tensor& bias) {
  nn::check_operand(a, kOp, "a");
  nn::check_operand(b, kOp, "b");
  nn::check_output(out, kOp, "out");
  nn::check_rank(a, 3, kOp, "a ([B, M, K])");
  nn::check_rank(b, 3, kOp, "b ([B, K, N])");
  nn::check_rank(out, 3, kOp, "out ([B, M, N])");
  const int64_t batches = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
  nn::check_shape(b, {batches, k, n}, kOp, "b (given a of shape " + nn::shape_str(a) + ")",
                  "[B, K, N]");
  nn::check_shape(out, {batches, m, n}, kOp, "out (given a and b)", "[B, M, N]");
  if (bias.defined()) {
    nn::check_operand(bias, kOp, "bias");
    nn::check_shape(bias, {n}, kOp, "bias", "[N]");
    nn::check_dtype(bias, out.dtype(), kOp, "bias (out's dtype)");
  }
  nn::check_dtype(a, out.dtype(), kOp, "a (out's dtype)");
  nn::check_dtype(b, out.dtype(), kOp, "b (out's dtype)");
  FERRY_CHECK_AS(DTypeError, out.dtype() != kBool && !out.is_complex(),
                 "gemm: expected a float or integer dtype, but got ", out.dtype());
  if (out.numel() == 0) return;

  const ScalarType dtype = out.dtype();
  const bool onednn_dtype = dtype == kFloat32 || dtype == kBFloat16 || dtype == kFloat16;
  if (!onednn_dtype || k == 0) return reference::gemm(out, a, b, alpha, beta, bias);

  if (sgemm_onednn(out, a, b, alpha, beta, bias)) return;
  Outcome outcome = matmul_onednn(out, a, b, alpha, beta, bias, false);
  if (outcome == Outcome::kPrefersDense)
    outcome = matmul_onednn(out, a, b, alpha, beta, bias, true);
  if (outcome == Outcome::kDtypeUnsupported) {
    // float16 on a CPU without oneDNN float16 kernels: float32 temporaries, rounded back once.
    const Tensor a32 = nn::dense_copy(a, kFloat32), b32 = nn::dense_copy(b, kFloat32);
    const Tensor bias32 = bias.defined() ? nn::dense_copy(bias, kFloat32) : Tensor();
    nn::OutputStage out32(out, false, kFloat32, MemoryFormat::Contiguous, beta != 0);
    matmul_onednn(out32.get(), a32, b32, alpha, beta, bias32, false);
    out32.finish();
  }
}

}  // namespace ferry::cpu
