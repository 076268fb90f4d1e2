// The linear-algebra operators, as PyTorch's torch:: functions: matmul, mm, bmm, addmm, linear
// (and the Tensor methods matmul/mm/bmm declared in ferry/core/tensor.h). Each is a dispatched
// operator whose work is one gemm_stub call ([B, M, K] x [B, K, N]; a broadcast batch is a
// stride-0 view, never a copy, unless both operands broadcast), so it runs on the CPU (oneDNN),
// on sim streams and on CUDA, and is differentiable (ferry/autograd/formulas/linalg_formulas.cc).
// Operands must share a device and a dtype (float32, bfloat16, float16, float64, or an integer
// type); shape mismatches raise ShapeError naming both shapes.
#pragma once

#include <optional>

#include "ferry/core/scalar.h"
#include "ferry/core/tensor.h"

namespace ferry {

// PyTorch's matmul: 1-d x 1-d is a dot product (0-d result); a 1-d operand is a vector (a row
// on the left, a column on the right) whose dim is removed from the result; 2-d x 2-d is mm;
// otherwise the dims before the last two are batch dims, broadcast against each other.
Tensor matmul(const Tensor& self, const Tensor& other);
// [M, K] x [K, N] -> [M, N].
Tensor mm(const Tensor& self, const Tensor& mat2);
// [B, M, K] x [B, K, N] -> [B, M, N] (no broadcasting, as PyTorch).
Tensor bmm(const Tensor& self, const Tensor& mat2);
// beta * self + alpha * (mat1 @ mat2); self broadcasts to [M, N]. With beta == 0 self's values
// are ignored (NaN included).
Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta = 1,
             const Scalar& alpha = 1);
// input [..., in_features] x weight [out_features, in_features]^T + bias [out_features]: any
// number of leading dims (also none: a 1-d input gives a 1-d result).
Tensor linear(const Tensor& input, const Tensor& weight,
              const std::optional<Tensor>& bias = std::nullopt);

}  // namespace ferry
