// Argument checks shared by the linear-algebra and nn operators' device-generic kernels
// (ferry/ops/linalg.cc, nn_*.cc): each raises the ferry::Error subclass PyTorch's error maps to,
// with a message naming the operator, what was expected and what was given (both shapes, both
// devices, both dtypes). Internal to ferry/ops.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>

#include "ferry/core/tensor.h"

namespace ferry::op_checks {

// DeviceError unless every defined tensor is on the device of the first one.
void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors);
// DTypeError unless t is float32, bfloat16, float16 or float64.
void check_floating(const char* op, const char* name, const Tensor& t);
// DTypeError unless b's dtype is a's.
void check_same_dtype(const char* op, const char* name_a, const Tensor& a, const char* name_b,
                      const Tensor& b);
// DTypeError unless t is int64 (or int32 when allow_int32).
void check_index_dtype(const char* op, const char* name, const Tensor& t, bool allow_int32);
// A 2-d operator's int[2] parameter given as one value (used for both dims) or two; raises
// ShapeError for any other count, naming the parameter and its values.
std::array<int64_t, 2> pair_param(const char* op, const char* name, IntArrayRef values);
// The tensor of an optional argument (undefined for None).
inline const Tensor& value_or_undefined(const std::optional<Tensor>& t) {
  static const Tensor kUndefined;
  return t.has_value() ? *t : kUndefined;
}

}  // namespace ferry::op_checks
