// The autograd methods of Tensor (declared in ferry/core/tensor.h).
#include "ferry/autograd/engine.h"
#include "ferry/autograd/grad_mode.h"
#include "ferry/autograd/variable.h"
#include "ferry/core/error.h"
#include "ferry/core/views.h"

namespace ferry {

using autograd::autograd_meta;
using autograd::AutogradMeta;
using autograd::materialize_autograd_meta;

Tensor& Tensor::requires_grad_(bool requires_grad) {
  AutogradMeta* meta = autograd_meta(*this);
  if (meta != nullptr && meta->grad_fn) {
    FERRY_CHECK(requires_grad, "you can only change requires_grad flags of leaf variables. If ",
                "you want to use a computed variable in a subgraph that doesn't require "
                "differentiation use var_no_grad = var.detach().");
    return *this;
  }
  FERRY_CHECK_AS(DTypeError, !requires_grad || is_floating_point() || is_complex(),
                 "only Tensors of floating point and complex dtype can require gradients, but "
                 "this tensor is ",
                 dtype());
  if (meta != nullptr) meta->requires_grad = requires_grad;
  impl_->set_requires_grad(requires_grad);
  return *this;
}

const Tensor& Tensor::grad() const {
  static const Tensor undefined;
  const AutogradMeta* meta = autograd_meta(*this);
  return meta != nullptr ? meta->grad : undefined;
}

Tensor& Tensor::mutable_grad() const { return materialize_autograd_meta(*this).grad; }

IntrusivePtr<autograd::Node> Tensor::grad_fn() const {
  autograd::refresh_view_history(*this);  // Note [In-place on views]
  const AutogradMeta* meta = autograd_meta(*this);
  return meta != nullptr ? meta->grad_fn : nullptr;
}

bool Tensor::is_leaf() const {
  autograd::refresh_view_history(*this);
  const AutogradMeta* meta = autograd_meta(*this);
  return meta == nullptr || !meta->grad_fn;
}

uint32_t Tensor::output_nr() const {
  const AutogradMeta* meta = autograd_meta(*this);
  return meta != nullptr ? meta->output_nr : 0;
}

void Tensor::retain_grad() const {
  FERRY_CHECK(requires_grad(), "can't retain_grad on Tensor that has requires_grad=False");
  if (is_leaf()) return;  // leaves keep their gradient anyway
  AutogradMeta& meta = materialize_autograd_meta(*this);
  if (meta.retains_grad) return;
  meta.grad_fn->add_retain_grad_hook(meta.output_nr, *this);
  meta.retains_grad = true;
}

bool Tensor::retains_grad() const {
  const AutogradMeta* meta = autograd_meta(*this);
  return meta != nullptr && meta->retains_grad;
}

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph,
                      bool create_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph, create_graph);
}

Tensor Tensor::detach() const { return native::alias(*this); }

Tensor& Tensor::detach_() {
  AutogradMeta* meta = autograd_meta(*this);
  if (meta == nullptr) return *this;
  FERRY_CHECK(!autograd::view_base_of(*this).defined(),
              "Can't detach views in-place. Use detach() instead.");
  meta->grad_fn = nullptr;
  meta->output_nr = 0;
  meta->requires_grad = false;
  impl_->set_requires_grad(false);
  return *this;
}

void Tensor::set_data(const Tensor& new_data) const {
  FERRY_CHECK(new_data.defined(), "set_data: expected a defined tensor");
  impl_->shallow_copy_from(*new_data.impl());
}

bool Tensor::is_view() const { return autograd::view_base_of(*this).defined(); }

Tensor Tensor::_base() const { return autograd::view_base_of(*this); }

}  // namespace ferry
