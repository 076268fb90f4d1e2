// The CUDA GEMM (gemm_stub for DeviceType::CUDA): out[i] = alpha * a[i] @ b[i] + beta * out[i]
// + bias for every batch index i, on cuBLAS's cublasGemmStridedBatchedEx: float32 in float32
// without TF32 (unless FERRY_CUDA_ALLOW_TF32=1), float16 and bfloat16 with float32 compute and
// no reduced-precision reductions, float64 in float64; integer dtypes on a plain kernel with the
// CPU's wrapping 64-bit accumulation. Operands keep their strides when cuBLAS can take them
// (gemm_plan.h; a batch stride of 0 broadcasts) and are staged through dense copies otherwise.
// The bias (and beta) is applied first by a small kernel, cuBLAS then adds the product with
// beta = 1; a float16/bfloat16 output with both a bias and beta != 0 is thus rounded twice.
// One cuBLAS handle per (device, thread), bound to the device's current stream for each call;
// cuBLAS itself is loaded on the first GEMM (cublas_loader.h).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ferry/backends/cuda/cublas_loader.h"
#include "ferry/backends/cuda/cuda_compute.h"
#include "ferry/backends/cuda/gemm_plan.h"
#include "ferry/backends/cuda/handle_pool.h"
#include "ferry/device/compute_kernels.h"

namespace ferry::cuda {
namespace {

constexpr const char* kOp = "gemm";

void check_cublas(cublasStatus_t status, int device, const char* call) {
  FERRY_CHECK_AS(DeviceError, status == CUBLAS_STATUS_SUCCESS, "cuda:", device, ": ", call,
                 " failed: ", cublas_api().status_string(status), " (status ",
                 static_cast<int>(status), ")");
}

struct CublasTraits {
  using Handle = cublasHandle_t;
  static Handle create() {
    int device = -1;
    (void)cudaGetDevice(&device);
    cublasHandle_t h = nullptr;
    check_cublas(cublas_api().create(&h), device, "cublasCreate");
    // Float32 accumulation for float16/bfloat16, as the CPU kernels; TF32 is chosen per call
    // through the compute type.
    check_cublas(
        cublas_api().set_math_mode(
            h, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                         CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
        device, "cublasSetMathMode");
    return h;
  }
};

// out[b, m, n] = (beta == 0 ? 0 : beta * out[b, m, n]) + bias[n] (bias may be null), in the
// compute type C.
template <typename T, typename C>
__global__ void scale_add_bias_kernel(T* out, int64_t batch, int64_t rows, int64_t cols, int64_t s0,
                                      int64_t s1, int64_t s2, const T* bias, int64_t bias_stride,
                                      C beta) {
  const int64_t total = batch * rows * cols;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t col = e % cols, rest = e / cols, row = rest % rows, b = rest / rows;
    T* p = out + b * s0 + row * s1 + col * s2;
    C v = beta == C(0) ? C(0) : beta * static_cast<C>(*p);
    if (bias != nullptr) v += static_cast<C>(bias[col * bias_stride]);
    *p = static_cast<T>(v);
  }
}

// Integer GEMM, one thread per output, wrapping 64-bit accumulation (the CPU's rule).
struct IntGemmArgs {
  int64_t batch, m, n, k;
  int64_t os[3], as[3], bs[3];
  int64_t bias_stride;
  uint64_t alpha, beta;
};

template <typename T>
__global__ void int_gemm_kernel(T* out, const T* a, const T* b, const T* bias, IntGemmArgs g) {
  const int64_t total = g.batch * g.m * g.n;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t j = e % g.n, rest = e / g.n, i = rest % g.m, bi = rest / g.m;
    const T* arow = a + bi * g.as[0] + i * g.as[1];
    const T* bcol = b + bi * g.bs[0] + j * g.bs[2];
    uint64_t sum = 0;
    for (int64_t kk = 0; kk < g.k; ++kk) {
      sum += static_cast<uint64_t>(static_cast<int64_t>(arow[kk * g.as[2]])) *
             static_cast<uint64_t>(static_cast<int64_t>(bcol[kk * g.bs[1]]));
    }
    T* o = out + bi * g.os[0] + i * g.os[1] + j * g.os[2];
    uint64_t r = g.alpha * sum;
    if (g.beta != 0) r += g.beta * static_cast<uint64_t>(static_cast<int64_t>(*o));
    if (bias != nullptr) r += static_cast<uint64_t>(static_cast<int64_t>(bias[j * g.bias_stride]));
    *o = static_cast<T>(r);
  }
}

bool expressible(const Tensor& t) {
  return !t.is_neg() && !t.is_conj() &&
         blas_matrix(t.size(1), t.size(2), t.stride(1), t.stride(2)).ok;
}

cudaDataType blas_dtype(ScalarType t) {
  switch (t) {
    case kFloat16:
      return CUDA_R_16F;
    case kBFloat16:
      return CUDA_R_16BF;
    case kFloat64:
      return CUDA_R_64F;
    default:
      return CUDA_R_32F;
  }
}

void run_int_gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
                  const Tensor& bias, const LaunchScope& scope) {
  const auto integral = [](double v) {
    return std::isfinite(v) && v == std::trunc(v) && std::fabs(v) < 0x1p63;
  };
  FERRY_CHECK_AS(DTypeError, integral(alpha) && integral(beta),
                 "gemm: expected integral alpha and beta for an integer dtype (", out.dtype(),
                 "), but got alpha=", alpha, ", beta=", beta);
  IntGemmArgs g{};
  g.batch = out.size(0);
  g.m = out.size(1);
  g.n = out.size(2);
  g.k = a.size(2);
  for (int d = 0; d < 3; ++d) {
    g.os[d] = out.stride(d);
    g.as[d] = a.stride(d);
    g.bs[d] = b.stride(d);
  }
  g.bias_stride = bias.defined() ? bias.stride(0) : 0;
  g.alpha = static_cast<uint64_t>(static_cast<int64_t>(alpha));
  g.beta = static_cast<uint64_t>(static_cast<int64_t>(beta));
  visit_dtype(out.dtype(), [&]<typename T>() {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      int_gemm_kernel<T><<<blocks_for(out.numel()), kThreads, 0, scope.stream()>>>(
          static_cast<T*>(out.data_ptr()), static_cast<const T*>(a.const_data_ptr()),
          static_cast<const T*>(b.const_data_ptr()),
          bias.defined() ? static_cast<const T*>(bias.const_data_ptr()) : nullptr, g);
      check_launch(scope.device(), "integer gemm kernel");
    }
  });
}

void scale_add_bias(const Tensor& out, double beta, const Tensor& bias, const LaunchScope& scope) {
  const auto run = [&]<typename T, typename C>() {
    scale_add_bias_kernel<T, C><<<blocks_for(out.numel()), kThreads, 0, scope.stream()>>>(
        static_cast<T*>(out.data_ptr()), out.size(0), out.size(1), out.size(2), out.stride(0),
        out.stride(1), out.stride(2),
        bias.defined() ? static_cast<const T*>(bias.const_data_ptr()) : nullptr,
        bias.defined() ? bias.stride(0) : 0, static_cast<C>(beta));
    check_launch(scope.device(), "gemm bias kernel");
  };
  switch (out.dtype()) {
    case kFloat16:
      return run.operator()<Half, float>();
    case kBFloat16:
      return run.operator()<BFloat16, float>();
    case kFloat64:
      return run.operator()<double, double>();
    default:
      return run.operator()<float, float>();
  }
}

void check_int(int64_t v, const char* what) {
  FERRY_CHECK_AS(NotImplementedError, v <= std::numeric_limits<int>::max(), kOp,
                 ": cuBLAS takes 32-bit sizes, but ", what, " is ", v);
}

void cuda_gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
               const Tensor& bias) {
  const int device = operands_device(kOp, {{&out, "out"}, {&a, "a"}, {&b, "b"}, {&bias, "bias"}});
  FERRY_CHECK_AS(ShapeError, out.dim() == 3 && a.dim() == 3 && b.dim() == 3, kOp,
                 ": expected 3-d operands (out [B, M, N], a [B, M, K], b [B, K, N]), but got out ",
                 shape_str(out), ", a ", shape_str(a), ", b ", shape_str(b));
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  check_shape(a, {batch, m, k}, kOp, "a ([B, M, K])");
  check_shape(b, {batch, k, n}, kOp, "b ([B, K, N])");
  check_dtype(a, out.dtype(), kOp, "a (out's dtype)");
  check_dtype(b, out.dtype(), kOp, "b (out's dtype)");
  if (bias.defined()) {
    check_shape(bias, {n}, kOp, "bias ([N])");
    check_dtype(bias, out.dtype(), kOp, "bias (out's dtype)");
  }
  FERRY_CHECK_AS(DTypeError,
                 is_integral(out.dtype()) || out.dtype() == kFloat32 || out.dtype() == kFloat16 ||
                     out.dtype() == kBFloat16 || out.dtype() == kFloat64,
                 "gemm: expected a float or integer dtype, but got ", out.dtype());
  check_output(out, kOp, "out");
  if (out.numel() == 0) return;
  BelowAutograd below;
  const LaunchScope scope(device);
  if (is_integral(out.dtype())) {
    return run_int_gemm(out, dense_as(a, a.dtype()), dense_as(b, b.dtype()), alpha, beta,
                        dense_as(bias, out.dtype()), scope);
  }
  // out through a dense temporary when cuBLAS cannot write it (its values kept when read).
  OutputStage stage = expressible(out)
                          ? OutputStage()
                          : OutputStage(out, out.dtype(), MemoryFormat::Contiguous, beta != 0);
  const Tensor& o = stage.staged() ? stage.get() : out;
  double beta_used = beta;
  if (bias.defined() || k == 0) {
    scale_add_bias(o, beta, bias, scope);
    beta_used = 1;
  }
  if (k > 0) {
    const Tensor a_used = expressible(a) ? a : dense_as(a, a.dtype());
    const Tensor b_used = expressible(b) ? b : dense_as(b, b.dtype());
    const int64_t os[3] = {o.stride(0), o.stride(1), o.stride(2)};
    const int64_t as[3] = {a_used.stride(0), a_used.stride(1), a_used.stride(2)};
    const int64_t bs[3] = {b_used.stride(0), b_used.stride(1), b_used.stride(2)};
    const GemmPlan p = plan_gemm({batch, m, n, k}, os, as, bs);
    check_int(p.m, "M or N");
    check_int(p.n, "M or N");
    check_int(p.k, "K");
    check_int(batch, "the batch size");
    const Tensor& first = p.swapped ? b_used : a_used;
    const Tensor& second = p.swapped ? a_used : b_used;
    const cudaDataType dt = blas_dtype(out.dtype());
    const bool f64 = out.dtype() == kFloat64;
    const cublasComputeType_t compute =
        f64 ? CUBLAS_COMPUTE_64F
            : (out.dtype() == kFloat32 && tf32_allowed() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                         : CUBLAS_COMPUTE_32F);
    const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta_used);
    const void* alpha_p = f64 ? static_cast<const void*>(&alpha) : &alpha_f;
    const void* beta_p = f64 ? static_cast<const void*>(&beta_used) : &beta_f;
    const cublasHandle_t h = HandlePool<CublasTraits>::get(device);
    check_cublas(cublas_api().set_stream(h, scope.stream()), device, "cublasSetStream");
    check_cublas(
        cublas_api().gemm_strided_batched(
            h, p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
            static_cast<int>(p.m), static_cast<int>(p.n), static_cast<int>(p.k), alpha_p,
            first.const_data_ptr(), dt, static_cast<int>(p.lda), p.stride_a,
            second.const_data_ptr(), dt, static_cast<int>(p.ldb), p.stride_b, beta_p, o.data_ptr(),
            dt, static_cast<int>(p.ldc), p.stride_c, static_cast<int>(batch), compute,
            CUBLAS_GEMM_DEFAULT),
        device, "cublasGemmStridedBatchedEx");
  }
  stage.finish();
}

}  // namespace

FERRY_REGISTER_DISPATCH(gemm_stub, DeviceType::CUDA, &cuda_gemm);

}  // namespace ferry::cuda
