// What the CPU compute kernels share besides oneDNN: argument checks whose messages name what was
// expected and what was given, dense host temporaries for staging, merged-dimension views, and
// the dtype dispatch of the portable loops. Nothing here includes oneDNN, so tests may use it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "ferry/core/bfloat16.h"
#include "ferry/core/error.h"
#include "ferry/core/half.h"
#include "ferry/core/memory_format.h"
#include "ferry/core/tensor.h"

namespace ferry::cpu::nn {

// "[2, 3, 4]", or "undefined".
std::string shape_str(IntArrayRef sizes);
std::string shape_str(const Tensor& t);

// Raises unless t is defined and on the CPU (DeviceError names the device).
void check_operand(const Tensor& t, const char* op, const char* name);
// ShapeError "<op>: expected <name> of rank <rank>, but got <shape>".
void check_rank(const Tensor& t, int64_t rank, const char* op, const char* name);
// ShapeError "<op>: expected <name> of shape <expected>, but got <shape>" (what: an explanation
// of the expected shape, e.g. "[N, O, oH, oW]").
void check_shape(const Tensor& t, IntArrayRef expected, const char* op, const std::string& name,
                 const char* what = nullptr);
// DTypeError "<op>: expected <name> of dtype <expected>, but got <dtype>".
void check_dtype(const Tensor& t, ScalarType expected, const char* op, const char* name);
// An output: checked as an operand, and refused when its elements share memory (a stride-0
// dimension) or it carries a lazy negation bit that writing raw values would ignore.
void check_output(const Tensor& t, const char* op, const char* name);

// A dense, uninitialized host tensor.
Tensor host_empty(IntArrayRef sizes, ScalarType dtype,
                  MemoryFormat format = MemoryFormat::Contiguous);
// t's values (conj/neg bits applied) converted to dtype, in a dense tensor laid out in format.
Tensor dense_copy(const Tensor& t, ScalarType dtype,
                  MemoryFormat format = MemoryFormat::Contiguous);
// ChannelsLast when a 4-d t's strides order it so (PyTorch's suggest_memory_format), else
// Contiguous.
MemoryFormat layout_of(const Tensor& t);
// Dense in `format` and without lazy bits: the memory holds exactly the values, in that order.
bool is_dense_in(const Tensor& t, MemoryFormat format);

// An output written in place when it can be, else through a dense temporary that finish()
// copies back (converting the dtype). keep_values fills the temporary with target's values
// first (a GEMM with beta != 0 reads them).
class OutputStage {
 public:
  OutputStage(const Tensor& target, bool in_place, ScalarType dtype, MemoryFormat format,
              bool keep_values);
  // Through `staged` (of target's sizes) unless it is undefined.
  OutputStage(const Tensor& target, Tensor staged) : target_(target), staged_(std::move(staged)) {}
  const Tensor& get() const { return staged_.defined() ? staged_ : target_; }
  bool staged() const { return staged_.defined(); }
  void finish();

 private:
  Tensor target_;
  Tensor staged_;
};

// Dimensions [begin, end) of t merged into one (size = their product), when their strides let
// one stride walk them all; size-1 dimensions never stand in the way. An empty range merges to
// (1, 1).
struct MergedDim {
  int64_t size = 1;
  int64_t stride = 1;
};
std::optional<MergedDim> merge_dims(const Tensor& t, int64_t begin, int64_t end);
int64_t product(IntArrayRef sizes, size_t begin, size_t end);

// A 1-d tensor as float32 with unit stride: t itself when it already is, else a copy.
Tensor f32_vector(const Tensor& t);

// The accumulator of the portable loops: double for double, float for the other float types,
// and 64-bit (wrapping) integers for integer types.
template <typename T>
using acc_t = std::conditional_t<
    std::is_same_v<T, double>, double,
    std::conditional_t<std::is_integral_v<T>, std::make_unsigned_t<int64_t>, float>>;

// Calls fn(T{}) for the float dtypes the portable loops take (float64, float32, bfloat16,
// float16); raises DTypeError naming op otherwise.
template <typename Fn>
void dispatch_floating(ScalarType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case kFloat64:
      return fn(double{});
    case kFloat32:
      return fn(float{});
    case kBFloat16:
      return fn(BFloat16{});
    case kFloat16:
      return fn(Half{});
    default:
      FERRY_FAIL_AS(DTypeError, op, ": expected a float64, float32, bfloat16 or float16 tensor, ",
                    "but got ", dtype);
  }
}

// The grain for parallel_for over `items` units of about `work` element operations each: large
// enough that a chunk does at least ~32K operations.
int64_t grain_for(int64_t work_per_item);

}  // namespace ferry::cpu::nn
