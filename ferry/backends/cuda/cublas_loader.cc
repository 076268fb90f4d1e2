// Loads cuBLAS on first use (see cublas_loader.h).
#include "ferry/backends/cuda/cublas_loader.h"

#include <dlfcn.h>

#include <string>

#include "ferry/core/error.h"

#ifndef FERRY_CUBLAS_PATH
#error "CMake defines FERRY_CUBLAS_PATH (the cuBLAS library found at configure time)"
#endif
#ifndef FERRY_CUBLAS_SONAME
#error "CMake defines FERRY_CUBLAS_SONAME (its soname, e.g. libcublas.so.13)"
#endif

namespace ferry::cuda {
namespace {

template <typename Fn>
void bind(void* library, const char* symbol, Fn& fn) {
  void* address = dlsym(library, symbol);
  const char* error = address == nullptr ? dlerror() : nullptr;
  FERRY_CHECK_AS(DeviceError, address != nullptr, "cuBLAS (", FERRY_CUBLAS_SONAME, "): symbol ",
                 symbol, " not found: ", error ? error : "unknown error");
  fn = reinterpret_cast<Fn>(address);
}

CublasApi load() {
  void* library = dlopen(FERRY_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
  std::string first_error;
  if (library == nullptr) {
    const char* e = dlerror();
    first_error = e ? e : "unknown error";
    library = dlopen(FERRY_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  }
  if (library == nullptr) {
    const char* e = dlerror();
    FERRY_FAIL_AS(DeviceError, "CUDA GEMM: cannot load cuBLAS: ", first_error, "; ",
                  e ? e : "unknown error");
  }
  CublasApi api{};
  bind(library, "cublasCreate_v2", api.create);
  bind(library, "cublasSetStream_v2", api.set_stream);
  bind(library, "cublasSetMathMode", api.set_math_mode);
  bind(library, "cublasGetStatusString", api.status_string);
  bind(library, "cublasGemmStridedBatchedEx", api.gemm_strided_batched);
  return api;
}

}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api = load();  // a failed load raises, and the next call retries
  return api;
}

}  // namespace ferry::cuda
