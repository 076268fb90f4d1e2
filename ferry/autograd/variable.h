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
// The same for an in-place result: `self` already exists; its old history is replaced. When
// self is a view, its base's history becomes CopySlices over `node` and self's a view of that
// (Note [In-place on views]).
void rebase_history(const Tensor& self, const IntrusivePtr<Node>& node);

// Checks made before writing into `self` in place with grad mode on: a leaf that requires grad
// and a view of one raise (PyTorch's messages, naming `op`). Other views are written through
// (Note [In-place on views]).
void check_inplace(const Tensor& self, const char* op);

// Note [In-place on views]: the root base of a view (TensorImpl::view_base) while it still shares
// the view's storage (set_data may have given the base another); undefined otherwise.
Tensor view_base_of(const Tensor& t);
// Note [In-place on views]: when t is a view whose storage was written in place since its
// history was set and its base requires grad, t's history becomes a view of the base's current
// one (AsStridedBackward0). Called wherever t's history is read (gradient_edge, the
// requires-grad checks of a recording operator, Tensor::grad_fn).
void refresh_view_history(const Tensor& t);

}  // namespace ferry::autograd
