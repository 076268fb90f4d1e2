// elementwise_stub: the per-device-type kernel of every elementwise compute operator (add, exp,
// relu, comparisons, where, the activations' backward helpers). The operator front-ends
// (ferry/ops/elementwise.cc) decide shapes and dtypes, build the iterator (outputs first, then
// the tensor inputs) and hand it here with the operation; backends register their kernel with
// FERRY_REGISTER_DISPATCH(elementwise_stub, DeviceType::..., &fn).
// Invariants the kernel may rely on: numel() > 0; all tensor inputs have one dtype (the
// operation's compute dtype, never complex); the output has that dtype, or bool for
// comparisons; `where` has a bool condition as input 0.
#pragma once

#include <cstdint>

#include "ferry/core/scalar.h"
#include "ferry/dispatch/dispatch_stub.h"
#include "ferry/iter/tensor_iterator.h"

namespace ferry {

enum class ElementwiseKind : uint8_t {
  // Unary: out = f(a).
  Neg,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Tanh,
  Sigmoid,
  Relu,
  Gelu,      // x * Phi(x), with erf
  GeluTanh,  // the tanh approximation
  Abs,
  Sign,  // -1, 0 or 1 (NaN stays NaN)
  Pow,   // a ** scalar
  // Binary: out = f(a, b), where b may be the op's scalar (scalar_operand).
  Add,  // a + alpha * b
  Sub,  // a - alpha * b
  Mul,
  Div,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  // Backward helpers: out = f(grad, saved).
  ReluBackward,      // grad * (result > 0)
  SigmoidBackward,   // grad * y * (1 - y), y the forward's result
  TanhBackward,      // grad * (1 - y * y)
  GeluBackward,      // grad * d/dx gelu(x), x the forward's input
  GeluTanhBackward,  // the same for the tanh approximation
  // Ternary: out = cond ? a : b.
  Where,
};

// "neg", "add", "relu_backward", ...
const char* elementwise_kind_name(ElementwiseKind kind);
// Number of tensor inputs the kind takes when no operand is a scalar.
int elementwise_arity(ElementwiseKind kind);
bool is_comparison(ElementwiseKind kind);

struct ElementwiseOp {
  ElementwiseKind kind = ElementwiseKind::Add;
  Scalar alpha = 1;  // Add / Sub
  // Pow's exponent; the scalar operand of a binary kind.
  Scalar scalar = 0;
  // A binary kind with one tensor input: the other operand is `scalar`, first when
  // scalar_first (scalar - a, scalar / a), else second.
  bool scalar_operand = false;
  bool scalar_first = false;
};

using ElementwiseFn = void (*)(const TensorIterator& iter, const ElementwiseOp& op);

FERRY_DECLARE_DISPATCH(ElementwiseFn, elementwise_stub);

}  // namespace ferry
