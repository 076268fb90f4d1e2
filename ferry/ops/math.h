// The math operators, as PyTorch's torch:: functions (and Tensor methods, declared in
// ferry/core/tensor.h): elementwise with broadcasting and type promotion, reductions, softmax,
// and the backward helpers autograd's formulas use. Each is a dispatched operator (`ferry ops`
// lists them) whose device work goes through elementwise_stub / the compute stubs, so it runs
// on the CPU, on sim streams and on CUDA. Operands must be on one device, except that a 0-d CPU
// tensor may join tensors on a device (as a number); errors name both shapes or devices.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "ferry/core/tensor.h"

namespace ferry {

// ---- elementwise ------------------------------------------------------------------------------
Tensor add(const Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor add(const Tensor& self, const Scalar& other, const Scalar& alpha = 1);
Tensor sub(const Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor sub(const Tensor& self, const Scalar& other, const Scalar& alpha = 1);
// other - alpha * self
Tensor rsub(const Tensor& self, const Scalar& other, const Scalar& alpha = 1);
Tensor mul(const Tensor& self, const Tensor& other);
Tensor mul(const Tensor& self, const Scalar& other);
// True division: integer operands give float32.
Tensor div(const Tensor& self, const Tensor& other);
Tensor div(const Tensor& self, const Scalar& other);
// other / self
Tensor rdiv(const Tensor& self, const Scalar& other);
Tensor neg(const Tensor& self);
Tensor exp(const Tensor& self);
Tensor log(const Tensor& self);
Tensor sqrt(const Tensor& self);
Tensor rsqrt(const Tensor& self);
Tensor tanh(const Tensor& self);
Tensor sigmoid(const Tensor& self);
Tensor relu(const Tensor& self);
Tensor abs(const Tensor& self);
// -1, 0 or 1 by the sign of each element (NaN stays NaN).
Tensor sign(const Tensor& self);
// approximate: "none" (erf) or "tanh".
Tensor gelu(const Tensor& self, std::string_view approximate = "none");
Tensor pow(const Tensor& self, const Scalar& exponent);
Tensor eq(const Tensor& self, const Tensor& other);
Tensor eq(const Tensor& self, const Scalar& other);
Tensor ne(const Tensor& self, const Tensor& other);
Tensor ne(const Tensor& self, const Scalar& other);
Tensor lt(const Tensor& self, const Tensor& other);
Tensor lt(const Tensor& self, const Scalar& other);
Tensor le(const Tensor& self, const Tensor& other);
Tensor le(const Tensor& self, const Scalar& other);
Tensor gt(const Tensor& self, const Tensor& other);
Tensor gt(const Tensor& self, const Scalar& other);
Tensor ge(const Tensor& self, const Tensor& other);
Tensor ge(const Tensor& self, const Scalar& other);
// condition ? self : other, broadcasting all three; condition is bool.
Tensor where(const Tensor& condition, const Tensor& self, const Tensor& other);

// In place: the result is cast to self's dtype, which must be able to hold it (an integer
// tensor cannot take a float result).
Tensor& add_(Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor& add_(Tensor& self, const Scalar& other, const Scalar& alpha = 1);
Tensor& sub_(Tensor& self, const Tensor& other, const Scalar& alpha = 1);
Tensor& sub_(Tensor& self, const Scalar& other, const Scalar& alpha = 1);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& mul_(Tensor& self, const Scalar& other);
Tensor& div_(Tensor& self, const Tensor& other);
Tensor& div_(Tensor& self, const Scalar& other);
Tensor& neg_(Tensor& self);
Tensor& relu_(Tensor& self);
Tensor& exp_(Tensor& self);
Tensor& log_(Tensor& self);
Tensor& sqrt_(Tensor& self);
Tensor& rsqrt_(Tensor& self);
Tensor& tanh_(Tensor& self);
Tensor& sigmoid_(Tensor& self);
Tensor& pow_(Tensor& self, const Scalar& exponent);

// Backward helpers (dispatched, so that they run on every device and are differentiable).
// grad where result > 0, else 0 (relu's backward).
Tensor threshold_backward(const Tensor& grad, const Tensor& result, const Scalar& threshold);
Tensor sigmoid_backward(const Tensor& grad, const Tensor& output);
Tensor tanh_backward(const Tensor& grad, const Tensor& output);
Tensor gelu_backward(const Tensor& grad, const Tensor& self, std::string_view approximate = "none");

// ---- reductions -------------------------------------------------------------------------------
// Over `dims` (every dim when empty). dtype: the result's dtype (default: the input's for
// floating inputs, int64 for integer and bool inputs of sum).
Tensor sum(const Tensor& self, std::optional<ScalarType> dtype = std::nullopt);
Tensor sum(const Tensor& self, IntArrayRef dims, bool keepdim = false,
           std::optional<ScalarType> dtype = std::nullopt);
Tensor mean(const Tensor& self, std::optional<ScalarType> dtype = std::nullopt);
Tensor mean(const Tensor& self, IntArrayRef dims, bool keepdim = false,
            std::optional<ScalarType> dtype = std::nullopt);
Tensor amax(const Tensor& self, IntArrayRef dims = {}, bool keepdim = false);
Tensor argmax(const Tensor& self, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

// ---- softmax ----------------------------------------------------------------------------------
Tensor softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype = std::nullopt);
Tensor softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim);
Tensor log_softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim);

// The dims a reduction over `dims` of a `rank`-d tensor covers: wrapped, sorted, unique (all
// dims when empty). Raises IndexError for a dim out of range or given twice.
std::vector<int64_t> reduction_dims(IntArrayRef dims, int64_t rank, const char* op);

}  // namespace ferry
