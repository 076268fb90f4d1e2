// The elementwise stub and the names of its operations.
#include "ferry/iter/elementwise_stub.h"

namespace ferry {

FERRY_DEFINE_DISPATCH(elementwise_stub);

const char* elementwise_kind_name(ElementwiseKind kind) {
  switch (kind) {
    case ElementwiseKind::Neg:
      return "neg";
    case ElementwiseKind::Exp:
      return "exp";
    case ElementwiseKind::Log:
      return "log";
    case ElementwiseKind::Sqrt:
      return "sqrt";
    case ElementwiseKind::Rsqrt:
      return "rsqrt";
    case ElementwiseKind::Tanh:
      return "tanh";
    case ElementwiseKind::Sigmoid:
      return "sigmoid";
    case ElementwiseKind::Relu:
      return "relu";
    case ElementwiseKind::Gelu:
      return "gelu";
    case ElementwiseKind::GeluTanh:
      return "gelu(tanh)";
    case ElementwiseKind::Abs:
      return "abs";
    case ElementwiseKind::Sign:
      return "sign";
    case ElementwiseKind::Pow:
      return "pow";
    case ElementwiseKind::Add:
      return "add";
    case ElementwiseKind::Sub:
      return "sub";
    case ElementwiseKind::Mul:
      return "mul";
    case ElementwiseKind::Div:
      return "div";
    case ElementwiseKind::Eq:
      return "eq";
    case ElementwiseKind::Ne:
      return "ne";
    case ElementwiseKind::Lt:
      return "lt";
    case ElementwiseKind::Le:
      return "le";
    case ElementwiseKind::Gt:
      return "gt";
    case ElementwiseKind::Ge:
      return "ge";
    case ElementwiseKind::ReluBackward:
      return "relu_backward";
    case ElementwiseKind::SigmoidBackward:
      return "sigmoid_backward";
    case ElementwiseKind::TanhBackward:
      return "tanh_backward";
    case ElementwiseKind::GeluBackward:
      return "gelu_backward";
    case ElementwiseKind::GeluTanhBackward:
      return "gelu_backward(tanh)";
    case ElementwiseKind::Where:
      return "where";
  }
  return "?";
}

int elementwise_arity(ElementwiseKind kind) {
  if (kind == ElementwiseKind::Where) return 3;
  return kind >= ElementwiseKind::Add ? 2 : 1;
}

bool is_comparison(ElementwiseKind kind) {
  return kind >= ElementwiseKind::Eq && kind <= ElementwiseKind::Ge;
}

}  // namespace ferry
