// What the cuDNN-backed kernels (conv_cudnn.cc, softmax_cudnn.cc) share: status checks whose
// errors name the device, the call and cuDNN's own last message; a cuDNN handle per (device,
// thread) (handle_pool.h), bound to the device's current stream for each call; RAII descriptors;
// and the cuDNN data type of a ferry dtype. Included only when the build found cuDNN.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <limits>

#include "ferry/backends/cuda/cuda_compute.h"
#include "ferry/backends/cuda/handle_pool.h"

namespace ferry::cuda {

inline void check_cudnn(cudnnStatus_t status, int device, const char* call) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  char detail[256] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));
  FERRY_FAIL_AS(DeviceError, "cuda:", device, ": ", call, " failed: ", cudnnGetErrorString(status),
                detail[0] != '\0' ? " (" : "", detail, detail[0] != '\0' ? ")" : "");
}

struct CudnnTraits {
  using Handle = cudnnHandle_t;
  static Handle create() {
    int device = -1;
    (void)cudaGetDevice(&device);
    cudnnHandle_t h = nullptr;
    check_cudnn(cudnnCreate(&h), device, "cudnnCreate");
    return h;
  }
};

// The calling thread's cuDNN handle for `scope`'s device, bound to its current stream.
inline cudnnHandle_t cudnn_handle(const LaunchScope& scope) {
  const cudnnHandle_t h = HandlePool<CudnnTraits>::get(scope.device());
  check_cudnn(cudnnSetStream(h, scope.stream()), scope.device(), "cudnnSetStream");
  return h;
}

template <typename D, cudnnStatus_t (*Create)(D*), cudnnStatus_t (*Destroy)(D)>
class Descriptor {
 public:
  explicit Descriptor(int device) { check_cudnn(Create(&d_), device, "cudnnCreate*Descriptor"); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() { (void)Destroy(d_); }
  D get() const { return d_; }

 private:
  D d_ = nullptr;
};

using TensorDescriptor = Descriptor<cudnnTensorDescriptor_t, &cudnnCreateTensorDescriptor,
                                    &cudnnDestroyTensorDescriptor>;
using FilterDescriptor = Descriptor<cudnnFilterDescriptor_t, &cudnnCreateFilterDescriptor,
                                    &cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    Descriptor<cudnnConvolutionDescriptor_t, &cudnnCreateConvolutionDescriptor,
               &cudnnDestroyConvolutionDescriptor>;

// float32, bfloat16, float16, float64 (the caller has checked the dtype).
inline cudnnDataType_t cudnn_dtype(ScalarType t) {
  switch (t) {
    case kFloat16:
      return CUDNN_DATA_HALF;
    case kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    case kFloat64:
      return CUDNN_DATA_DOUBLE;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

inline bool fits_int(int64_t v) { return v >= 0 && v <= std::numeric_limits<int>::max(); }

// The scaling factors cuDNN takes by pointer: double for float64 data, float otherwise.
struct Scaling {
  float f;
  double d;
  const void* get(ScalarType t) const { return t == kFloat64 ? static_cast<const void*>(&d) : &f; }
};
inline Scaling scaling(double v) { return {static_cast<float>(v), v}; }

}  // namespace ferry::cuda
