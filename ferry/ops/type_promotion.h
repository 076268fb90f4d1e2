// PyTorch's type promotion: the dtype an operation computes in, from its tensor and number
// operands. Tensors with dimensions decide over 0-d tensors, which decide over plain numbers,
// unless a lower group holds a higher category (bool < integer < floating < complex): then
// float32 + 2.5 is float32, int64 tensor + 2.5 is float32 (the default dtype), and
// uint8 + int8 is int16. float8 types promote with nothing but themselves.
#pragma once

#include <initializer_list>
#include <optional>

#include "ferry/core/scalar.h"
#include "ferry/core/tensor.h"

namespace ferry {

// The promotion of two dtypes (PyTorch's promote_types). Raises DTypeError for float8 mixed
// with another type.
ScalarType promote_types(ScalarType a, ScalarType b);

// Accumulates operands, then result() gives the computation dtype.
class ResultType {
 public:
  ResultType& add(const Tensor& t);
  ResultType& add(const Scalar& s);
  ScalarType result() const;

 private:
  std::optional<ScalarType> dim_, zero_dim_, wrapped_;
};

ScalarType result_type(const Tensor& a, const Tensor& b);
ScalarType result_type(const Tensor& a, const Scalar& b);

// The dtype an operation that always produces floating results (exp, div, mean, ...) computes
// in: t itself when floating, else float32 (PyTorch's default dtype).
ScalarType to_floating(ScalarType t);

}  // namespace ferry
