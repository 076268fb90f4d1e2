// What the CUDA compute kernels (ferry/backends/cuda) share on the host: operand checks whose
// messages name the operation and the operand, the scope of a launch (the operands' device made
// current, its current ferry stream), launch error checks, and temporaries from the caching
// allocator. Temporaries are stream-ordered: they are allocated for the device's current stream
// and freed when their last Tensor goes, so the allocator hands their memory only to work
// enqueued after the kernels that use them. Every check runs before anything is enqueued.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "ferry/core/error.h"
#include "ferry/core/memory_format.h"
#include "ferry/core/tensor.h"

namespace ferry::cuda {

inline constexpr int kThreads = 256;
// Grid-stride loops beyond this many blocks.
inline constexpr int64_t kMaxBlocks = int64_t{1} << 16;

struct Operand {
  const Tensor* tensor;
  const char* name;
};

// The CUDA device index of the defined operands (at least one is defined). Raises DeviceError
// naming the operand that is not on a CUDA device, or the two devices that differ.
int operands_device(const char* op, std::initializer_list<Operand> operands);

// "[2, 3, 4]", or "undefined".
std::string shape_str(IntArrayRef sizes);
std::string shape_str(const Tensor& t);

// ShapeError "<op>: expected <name> of shape <expected>, but got <shape>".
void check_shape(const Tensor& t, IntArrayRef expected, const char* op, const char* name);
// DTypeError "<op>: expected <name> of dtype <expected>, but got <dtype>".
void check_dtype(const Tensor& t, ScalarType expected, const char* op, const char* name);
// An output the kernels write raw values into: its elements have memory of their own and it
// carries no lazy negation or conjugation bit.
void check_output(const Tensor& t, const char* op, const char* name);
// A float dtype the nn kernels take: float32, bfloat16, float16 or float64.
void check_nn_float(const Tensor& t, const char* op, const char* name);

// The operands' device made current (and restored), with that device's current stream.
class LaunchScope {
 public:
  explicit LaunchScope(int device);
  LaunchScope(const LaunchScope&) = delete;
  LaunchScope& operator=(const LaunchScope&) = delete;
  ~LaunchScope();

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  // Multiprocessors of the device (cached per device).
  int multiprocessors() const;

 private:
  int device_;
  int previous_ = -1;
  cudaStream_t stream_ = nullptr;
};

// Raises DeviceError naming `what` when the last launch on this thread failed.
void check_launch(int device, const char* what);
// Raises DeviceError naming `call` unless error is cudaSuccess.
void check_cuda(cudaError_t error, int device, const char* call);

// Whether float32 GEMMs and convolutions may use TF32 tensor cores: only when the environment
// sets FERRY_CUDA_ALLOW_TF32=1 (read once). Off by default, so float32 results keep float32
// precision, as on the CPU.
bool tf32_allowed();

// Blocks of kThreads for `work` items, at least 1, at most kMaxBlocks.
inline unsigned blocks_for(int64_t work) {
  const int64_t b = (work + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : b > kMaxBlocks ? kMaxBlocks : b);
}

// A dense, uninitialized tensor on cuda:<device> laid out in `format`.
Tensor device_empty(IntArrayRef sizes, ScalarType dtype, int device,
                    MemoryFormat format = MemoryFormat::Contiguous);
// Dense in `format` with no lazy bits: the memory holds exactly the values, in that order.
bool is_dense_in(const Tensor& t, MemoryFormat format);
// t converted to dtype and laid out densely in format: t itself when it already is.
Tensor dense_as(const Tensor& t, ScalarType dtype, MemoryFormat format = MemoryFormat::Contiguous);

// An output written directly when it is dense in `format` with `dtype`, else through a dense
// temporary that finish() copies back (converting the dtype). keep_values copies the target's
// values into the temporary first.
class OutputStage {
 public:
  OutputStage() = default;
  OutputStage(const Tensor& target, ScalarType dtype, MemoryFormat format, bool keep_values);
  const Tensor& get() const { return staged_.defined() ? staged_ : target_; }
  bool staged() const { return staged_.defined(); }
  void finish();

 private:
  Tensor target_;
  Tensor staged_;
};

// Runs the operators that kernels call on their temporaries (copy_, zero_, ...) below autograd,
// so that a kernel called with tensors that require grad records nothing (an
// ExcludeDispatchKeyGuard of the autograd keys, whose header nvcc cannot read: its thread-local
// carries a TLS-model attribute).
class BelowAutograd {
 public:
  BelowAutograd();
  BelowAutograd(const BelowAutograd&) = delete;
  BelowAutograd& operator=(const BelowAutograd&) = delete;
  ~BelowAutograd();

 private:
  uint64_t added_;  // the keys this scope added to the thread's exclude set
};

}  // namespace ferry::cuda
