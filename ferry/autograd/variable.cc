// AutogradMeta and the functions that wire tensors into the graph.
#include "ferry/autograd/variable.h"

#include "ferry/autograd/functions.h"
#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/ops/view_ops.h"

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

namespace {

// Whether t requires grad, with a stale view's history refreshed first.
bool requires_grad_now(const Tensor& t) {
  if (!t.defined()) return false;
  refresh_view_history(t);
  return t.requires_grad();
}

}  // namespace

bool compute_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::is_enabled()) return false;
  bool any = false;
  for (const Tensor* t : inputs) any = requires_grad_now(*t) || any;
  return any;
}

bool any_requires_grad(const variable_list& inputs) {
  if (!GradMode::is_enabled()) return false;
  bool any = false;
  for (const Tensor& t : inputs) any = requires_grad_now(t) || any;
  return any;
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
  if (!requires_grad_now(t)) return Edge();
  AutogradMeta* meta = autograd_meta(t);
  if (meta != nullptr && meta->grad_fn) return Edge(meta->grad_fn, meta->output_nr);
  // A view that requires grad only through its base and has no history (made under no_grad):
  // its gradient goes nowhere, as in PyTorch.
  if (!t.impl()->requires_grad_bit()) return Edge();
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

// Note [In-place on views]
// A view shares its base's storage, so an in-place write through it changes the base, and every
// other view of it, as PyTorch's autograd sees it too:
// - Every view operation's backend kernel marks its result a view of the root base
//   (TensorImpl::view_base), whether or not anything requires grad: x[0] = y must find x when
//   only y requires grad. A view requires grad when its base does (TensorImpl::requires_grad);
//   one made under no_grad has no history of its own, and its gradient goes nowhere, as in
//   PyTorch.
// - An in-place operation on a view (rebase_history) gives the base a CopySlices node over the
//   operation's own node: the base's gradient passes through unchanged but for the view's
//   part, which becomes what the operation gives for the view's old values (zero for copy_);
//   the operation's other gradients (y's) go on from CopySlices. The base now requires grad,
//   and the view's own history is AsStridedBackward0 of the base's.
// - Other views of the base, made before the write, still name the base's old history. Each
//   keeps the storage version its history was set at; where a view's history is read
//   (gradient_edge, a recording operator's inputs, Tensor::grad_fn) and the version has moved,
//   refresh_view_history makes it AsStridedBackward0 of the base's current history. This also
//   covers writes to the base itself (x.mul_(2) after v = x[0]).
// A view of a leaf that requires grad still refuses in-place writes (PyTorch's error): its base
// could not take CopySlices without losing its .grad.

namespace {

// view's history: AsStridedBackward0 of base's current one.
void set_view_history(const Tensor& view, const Tensor& base) {
  AutogradMeta& meta = materialize_autograd_meta(view);
  const DimVector base_sizes(base.sizes()), base_strides(base.strides());
  const DimVector sizes(view.sizes()), strides(view.strides());
  const int64_t base_offset = base.storage_offset(), offset = view.storage_offset();
  auto node = make_intrusive<FormulaNode>("AsStridedBackward0", edge_list{gradient_edge(base)});
  node->set_formula([=](FormulaNode&, const variable_list& g) -> variable_list {
    return {
        as_strided_backward(g[0], base_sizes, base_strides, base_offset, sizes, strides, offset)};
  });
  meta.grad_accumulator.reset();
  meta.requires_grad = false;
  meta.grad_fn = node;
  meta.output_nr = node->add_input_metadata(view);
  view.impl()->set_requires_grad(true);
  view.impl()->set_view_version(view._version());
}

}  // namespace

Tensor view_base_of(const Tensor& t) {
  TensorImpl* base = t.impl()->view_base();
  if (base == nullptr || base->storage().impl() != t.impl()->storage().impl()) return Tensor();
  return Tensor(IntrusivePtr<TensorImpl>(base));
}

void refresh_view_history(const Tensor& t) {
  if (t.impl()->view_base() == nullptr) return;
  const uint32_t now = t._version();
  if (t.impl()->view_version() == now) return;
  const Tensor base = view_base_of(t);
  if (!base.defined() || !base.requires_grad()) {
    t.impl()->set_view_version(now);
    return;
  }
  if (!GradMode::is_enabled()) return;  // refreshed where it can be recorded
  AutogradMeta& meta = materialize_autograd_meta(t);
  std::lock_guard<std::mutex> lock(meta.mutex);
  if (t.impl()->view_version() != now) set_view_history(t, base);
}

void rebase_history(const Tensor& self, const IntrusivePtr<Node>& node) {
  AutogradMeta& meta = materialize_autograd_meta(self);
  if (const Tensor base = view_base_of(self); base.defined()) {
    // Note [In-place on views]
    node->add_input_metadata(self);  // the operation's output, as for any in-place node
    auto copy_slices = make_intrusive<CopySlices>(base, self, node);
    AutogradMeta& base_meta = materialize_autograd_meta(base);
    base_meta.grad_accumulator.reset();
    base_meta.requires_grad = false;
    set_history(base, copy_slices);
    set_view_history(self, base);
    return;
  }
  meta.grad_accumulator.reset();
  meta.requires_grad = false;
  set_history(self, node);
}

void check_inplace(const Tensor& self, const char* op) {
  if (!GradMode::is_enabled()) return;
  if (const Tensor base = view_base_of(self); base.defined()) {
    // Note [In-place on views]
    const bool base_is_leaf = autograd_meta(base) == nullptr || !autograd_meta(base)->grad_fn;
    FERRY_CHECK(!(base_is_leaf && base.requires_grad()), op,
                ": a view of a leaf Variable that requires grad is being used in an in-place "
                "operation.");
    return;
  }
  if (!self.requires_grad()) return;
  AutogradMeta* meta = autograd_meta(self);
  const bool is_leaf = meta == nullptr || !meta->grad_fn;
  FERRY_CHECK(!is_leaf, op,
              ": a leaf Variable that requires grad is being used in an in-place operation.");
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
