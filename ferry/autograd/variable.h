// A tensor's autograd state (AutogradMeta, in TensorImpl's slot) and the functions that connect
// tensors to the graph: the edge a tensor's gradient travels (its grad_fn or its leaf's
// accumulator), recording a node as a tensor's history, and checking in-place writes.
// Invariant: TensorImpl's requires_grad bit is set exactly when the tensor is a leaf that
// requires grad or has a grad_fn (Note [requires_grad bit]); only these functions change either.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <mutex>

#include "ferry/autograd/node.h"
#include "ferry/core/tensor.h"

namespace ferry::autograd {

struct AutogradMeta final : AutogradMetaInterface {
  bool has_grad_fn() const override { return static_cast<bool>(grad_fn); }

  Tensor grad;
  IntrusivePtr<Node> grad_fn;
  // A leaf's AccumulateGrad, held weakly: the graph owns it, so a leaf does not keep a graph
  // alive, and every graph built while one exists shares it.
  WeakIntrusivePtr<Node> grad_accumulator;
  uint32_t output_nr = 0;
  bool requires_grad = false;  // a leaf's own flag (results follow grad_fn)
  bool retains_grad = false;
  // A view made by a differentiable view operation: in-place writes through it are recorded
  // on `base` (Note [In-place on views]).
  bool is_view = false;
  Tensor base;
  std::mutex mutex;  // guards grad and grad_accumulator
};

// The tensor's AutogradMeta, or null when it never had one.
AutogradMeta* autograd_meta(const Tensor& t);
// The tensor's AutogradMeta, created if needed.
AutogradMeta& materialize_autograd_meta(const Tensor& t);

// Whether an operation on these inputs should record a node: grad mode on and some defined
// input requires grad.
bool compute_requires_grad(std::initializer_list<const Tensor*> inputs);
bool any_requires_grad(const variable_list& inputs);

// Where t's gradient goes: {grad_fn, output_nr}, {accumulator, 0} for a leaf that requires
// grad, or an invalid edge.
Edge gradient_edge(const Tensor& t);
edge_list collect_next_edges(std::initializer_list<const Tensor*> inputs);
edge_list collect_next_edges(const variable_list& inputs);
// The leaf's AccumulateGrad (created on first use); null for tensors that are not such leaves.
IntrusivePtr<Node> grad_accumulator(const Tensor& leaf);

// Makes `node` the history of `output` (its next free output slot). Undefined outputs get an
// undefined slot.
void set_history(const Tensor& output, const IntrusivePtr<Node>& node);
// The same for an in-place result: `self` already exists; its old history is replaced.
void rebase_history(const Tensor& self, const IntrusivePtr<Node>& node);

// Checks made before writing into `self` in place with grad mode on: a leaf that requires grad
// and a view of one raise (PyTorch's messages, naming `op`).
void check_inplace(const Tensor& self, const char* op);

// Marks `view` as a differentiable view of `base` (the base's base, when base is a view).
void mark_as_view(const Tensor& view, const Tensor& base);

}  // namespace ferry::autograd
