// The autograd keys' fallback: an operator with no backward formula must not cut the graph
// silently. When grad mode is on and one of its tensor arguments requires grad, the call
// raises NotImplementedError naming the operator and the argument (PyTorch's "does not support
// automatic differentiation"); otherwise it runs below autograd. Operators that are simply not
// differentiable (comparisons, argmax) register non_differentiable_kernel instead.
#include "ferry/autograd/fallback.h"

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/dispatch/library.h"
#include "ferry/dispatch/local_dispatch_key_set.h"
#include "ferry/dispatch/operator_handle.h"

namespace ferry::autograd {
namespace {

bool requires_grad(const IValue& v) {
  if (v.is_tensor()) return v.to_tensor().defined() && v.to_tensor().requires_grad();
  if (v.tag() == IValue::Tag::TensorList) {
    for (const Tensor& t : v.to_tensor_list()) {
      if (t.defined() && t.requires_grad()) return true;
    }
  }
  return false;
}

void run_below_autograd(const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  ExcludeDispatchKeyGuard guard(DispatchKeySet::autograd());
  op.redispatch_boxed(ks.remove_above(DispatchKey::AutogradOther), stack);
}

void autograd_fallback(const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  if (GradMode::is_enabled() && op.has_schema()) {
    const auto& args = op.schema().arguments;
    const size_t n = args.size();
    for (size_t i = 0; i < n && i < stack->size(); ++i) {
      const IValue& v = (*stack)[stack->size() - n + i];
      FERRY_CHECK_AS(NotImplementedError, !requires_grad(v), op.name(),
                     " does not support automatic differentiation: its argument '", args[i].name,
                     "' requires grad, but no backward formula is registered for it. Call it on "
                     "detach()ed tensors or under NoGradGuard if no gradient should flow.");
    }
  }
  run_below_autograd(op, ks, stack);
}

}  // namespace

void non_differentiable_kernel(const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  run_below_autograd(op, ks, stack);
}

void register_non_differentiable(Library& m, std::string_view op) {
  for (DispatchKey k : {DispatchKey::AutogradCPU, DispatchKey::AutogradSim,
                        DispatchKey::AutogradCUDA, DispatchKey::AutogradOther}) {
    m.impl_boxed(op, k, &non_differentiable_kernel, "non_differentiable");
  }
}

FERRY_LIBRARY_IMPL(_, AutogradCPU, m) { m.fallback(&autograd_fallback, "autograd_fallback"); }
FERRY_LIBRARY_IMPL(_, AutogradSim, m) { m.fallback(&autograd_fallback, "autograd_fallback"); }
FERRY_LIBRARY_IMPL(_, AutogradCUDA, m) { m.fallback(&autograd_fallback, "autograd_fallback"); }
FERRY_LIBRARY_IMPL(_, AutogradOther, m) { m.fallback(&autograd_fallback, "autograd_fallback"); }

}  // namespace ferry::autograd
