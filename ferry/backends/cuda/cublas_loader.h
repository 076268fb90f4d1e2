// cuBLAS, loaded on the first GEMM rather than linked: libcublasLt (which libcublas needs) runs
// thousands of static initializers and touches about 200 MB when it loads, which would cost every
// process that loads libferry half a second at start, GEMM or not. The library found at configure
// time is tried first, then its soname on the loader's search path; it is never unloaded.
// Raises DeviceError naming the library and the loader's message when it cannot be loaded.
#pragma once

#include <cublas_v2.h>

namespace ferry::cuda {

struct CublasApi {
  cublasStatus_t (*create)(cublasHandle_t*);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t);
  const char* (*status_string)(cublasStatus_t);
  cublasStatus_t (*gemm_strided_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                         int m, int n, int k, const void* alpha, const void* a,
                                         cudaDataType a_type, int lda, long long stride_a,
                                         const void* b, cudaDataType b_type, int ldb,
                                         long long stride_b, const void* beta, void* c,
                                         cudaDataType c_type, int ldc, long long stride_c,
                                         int batch, cublasComputeType_t compute,
                                         cublasGemmAlgo_t algo);
};

// The loaded API (thread-safe; loads once).
const CublasApi& cublas_api();

}  // namespace ferry::cuda
