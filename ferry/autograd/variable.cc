// AutogradMeta and the functions that wire tensors into the graph.
#include "ferry/autograd/variable.h"

#include "ferry/autograd/functions.h"
#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"

namespace ferry::autograd {

AutogradMeta* autograd_meta(const Tensor& t) {
  return static_cast<AutogradMeta*>(t.impl()->autograd_meta());
}

AutogradMeta& materialize_autograd_meta(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (impl->autograd_meta() == nullptr) {
    // A new leaf's meta carries the bit it had: requires_grad_ may have set it without a meta.
    auto meta = std::make_unique<AutogradMeta>();
    meta->requires_grad = impl->requires_grad();
    impl->set_autograd_meta(std::move(meta));
  }
  return *static_cast<AutogradMeta*>(impl->autograd_meta());
}

bool compute_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor* t : inputs) {
    if (t->defined() && t->requires_grad()) return true;
  }
  return false;
}

bool any_requires_grad(const variable_list& inputs) {
  if (!GradMode::is_enabled()) return false;
  for (const Tensor& t : inputs) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

IntrusivePtr<Node> grad_accumulator(const Tensor& leaf) {
  if (!leaf.defined() || !leaf.requires_grad()) return nullptr;
  AutogradMeta& meta = materialize_autograd_meta(leaf);
  if (meta.grad_fn) return nullptr;
  std::lock_guard<std::mutex> lock(meta.mutex);
  if (IntrusivePtr<Node> existing = meta.grad_accumulator.lock()) return existing;
  // The accumulator holds the leaf through a handle of its own impl, so that .grad lands on
  // the tensor the user holds.
  IntrusivePtr<Node> acc = make_intrusive<AccumulateGrad>(leaf);
  meta.grad_accumulator = WeakIntrusivePtr<Node>(acc);
  return acc;
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return Edge();
  if (AutogradMeta* meta = autograd_meta(t); meta != nullptr && meta->grad_fn) {
    return Edge(meta->grad_fn, meta->output_nr);
  }
  return Edge(grad_accumulator(t), 0);
}

edge_list collect_next_edges(std::initializer_list<const Tensor*> inputs) {
  edge_list edges;
  edges.reserve(inputs.size());
  for (const Tensor* t : inputs) edges.push_back(gradient_edge(*t));
  return edges;
}

edge_list collect_next_edges(const variable_list& inputs) {
  edge_list edges;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(gradient_edge(t));
  return edges;
}

void set_history(const Tensor& output, const IntrusivePtr<Node>& node) {
  // Integer and bool results are not differentiable (they cannot require grad, as leaves
  // cannot): their slot stays undefined, as PyTorch leaves to(int64) and argmax out of graphs.
  if (!output.defined() || !(output.is_floating_point() || output.is_complex())) {
    node->add_undefined_input();
    return;
  }
  AutogradMeta& meta = materialize_autograd_meta(output);
  meta.grad_fn = node;
  meta.output_nr = node->add_input_metadata(output);
  output.impl()->set_requires_grad(true);
}

void rebase_history(const Tensor& self, const IntrusivePtr<Node>& node) {
  AutogradMeta& meta = materialize_autograd_meta(self);
  meta.grad_accumulator.reset();
  meta.requires_grad = false;
  set_history(self, node);
}

void check_inplace(const Tensor& self, const char* op) {
  if (!GradMode::is_enabled() || !self.requires_grad()) return;
  AutogradMeta* meta = autograd_meta(self);
  const bool is_leaf = meta == nullptr || !meta->grad_fn;
  if (meta != nullptr && meta->is_view) {
    const Tensor& base = meta->base;
    const bool base_is_leaf = autograd_meta(base) == nullptr || !autograd_meta(base)->grad_fn;
    FERRY_CHECK(!(base_is_leaf && base.requires_grad()), op,
                ": a view of a leaf Variable that requires grad is being used in an in-place "
                "operation.");
    // Note [In-place on views]: PyTorch rewrites the base's history (CopySlices); ferry does
    // not yet, and says so rather than computing a wrong gradient.
    FERRY_FAIL_AS(NotImplementedError, op,
                  ": in-place operation on a view of a tensor that requires grad is not supported "
                  "yet; apply it to a clone() of the view, or to the base tensor");
  }
  FERRY_CHECK(!is_leaf, op,
              ": a leaf Variable that requires grad is being used in an in-place operation.");
}

void mark_as_view(const Tensor& view, const Tensor& base) {
  AutogradMeta& meta = materialize_autograd_meta(view);
  meta.is_view = true;
  AutogradMeta* base_meta = autograd_meta(base);
  meta.base = base_meta != nullptr && base_meta->is_view ? base_meta->base : base;
}

void Node::run_retain_grad_hooks(const variable_list& grads) {
  std::lock_guard<std::mutex> lock(hooks_mutex_);
  for (auto& [nr, weak] : retain_grad_hooks_) {
    IntrusivePtr<TensorImpl> impl = weak.lock();
    if (!impl || nr >= grads.size() || !grads[nr].defined()) continue;
    const Tensor tensor(impl);
    AutogradMeta& meta = materialize_autograd_meta(tensor);
    std::lock_guard<std::mutex> grad_lock(meta.mutex);
    NoGradGuard no_grad;
    meta.grad = meta.grad.defined() ? meta.grad + grads[nr] : grads[nr].clone();
  }
}

}  // namespace ferry::autograd
