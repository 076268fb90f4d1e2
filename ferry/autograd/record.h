// Recording an operator call in the graph, for the autograd kernels of ferry's operators
// (ferry/autograd/formulas): the kernel makes a Recorder from its differentiable inputs, runs
// the operator below autograd, and, when the recorder is live, saves what its formula needs,
// sets the formula and records the outputs:
//   Tensor mul_autograd(const Tensor& a, const Tensor& b) {
//     Recorder rec("MulBackward0", {&a, &b});
//     Tensor out = below_autograd([&] { return ferry::mul(a, b); });
//     if (rec) {
//       const size_t sa = rec.save(a), sb = rec.save(b);
//       rec.record(out, [sa, sb](FormulaNode& n, const variable_list& g) -> variable_list {
//         return {n.needs_input_grad(0) ? g[0] * n.saved(sb) : Tensor(),
//                 n.needs_input_grad(1) ? g[0] * n.saved(sa) : Tensor()};
//       });
//     }
//     return out;
//   }
#pragma once

#include <initializer_list>
#include <utility>

#include "ferry/autograd/functions.h"
#include "ferry/autograd/variable.h"
#include "ferry/dispatch/dispatch_key_set.h"
#include "ferry/dispatch/library.h"
#include "ferry/dispatch/local_dispatch_key_set.h"

namespace ferry::autograd {

// Runs fn with the autograd keys excluded: the operators it calls go straight to their backend
// kernels and record nothing.
template <typename F>
decltype(auto) below_autograd(F&& fn) {
  ExcludeDispatchKeyGuard guard(DispatchKeySet::autograd());
  return fn();
}

class Recorder {
 public:
  // A live recorder (a new node with an edge per input) when grad mode is on and some input
  // requires grad; otherwise an empty one.
  Recorder(const char* name, std::initializer_list<const Tensor*> inputs) {
    if (compute_requires_grad(inputs)) {
      node_ = make_intrusive<FormulaNode>(name, collect_next_edges(inputs));
    }
  }
  Recorder(const char* name, const variable_list& inputs) {
    if (any_requires_grad(inputs)) {
      node_ = make_intrusive<FormulaNode>(name, collect_next_edges(inputs));
    }
  }

  explicit operator bool() const { return static_cast<bool>(node_); }
  FormulaNode& node() { return *node_; }
  const IntrusivePtr<FormulaNode>& node_ptr() const { return node_; }

  size_t save(const Tensor& t) { return node_->save(t, /*is_output=*/false); }
  // Saves an output of this call (after record(): the output must already have this node as
  // its grad_fn).
  size_t save_output(const Tensor& t) { return node_->save(t, /*is_output=*/true); }

  void record(const Tensor& output, FormulaNode::Formula formula) {
    node_->set_formula(std::move(formula));
    set_history(output, node_);
  }
  void record(const variable_list& outputs, FormulaNode::Formula formula) {
    node_->set_formula(std::move(formula));
    for (const Tensor& o : outputs) set_history(o, node_);
  }
  // For an in-place operation: self's history becomes this node.
  void record_inplace(const Tensor& self, FormulaNode::Formula formula) {
    node_->set_formula(std::move(formula));
    rebase_history(self, node_);
  }

 private:
  IntrusivePtr<FormulaNode> node_;
};

// Registers `fn` at every autograd key (AutogradCPU, AutogradSim, AutogradCUDA, AutogradOther).
template <typename F>
void impl_autograd(Library& m, std::string_view op, F fn, std::string name = {}) {
  for (DispatchKey k : {DispatchKey::AutogradCPU, DispatchKey::AutogradSim,
                        DispatchKey::AutogradCUDA, DispatchKey::AutogradOther}) {
    m.impl(op, k, fn, name);
  }
}

}  // namespace ferry::autograd
