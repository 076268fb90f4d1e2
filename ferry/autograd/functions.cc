// AccumulateGrad, GraphRoot and FormulaNode.
#include "ferry/autograd/functions.h"

#include <algorithm>

#include "ferry/autograd/grad_mode.h"
#include "ferry/autograd/variable.h"
#include "ferry/core/error.h"
#include "ferry/ops/factories.h"

namespace ferry::autograd {

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {
  add_input_metadata(variable_);
}

variable_list AccumulateGrad::apply(variable_list&& grads) {
  Tensor new_grad = std::move(grads.at(0));
  if (!new_grad.defined()) return {};
  AutogradMeta& meta = materialize_autograd_meta(variable_);
  std::lock_guard<std::mutex> lock(meta.mutex);
  if (GradMode::is_enabled()) {
    // create_graph: .grad keeps the graph of the backward itself.
    meta.grad = meta.grad.defined() ? meta.grad + new_grad : new_grad;
    return {};
  }
  if (!meta.grad.defined()) {
    // Steal a gradient no one else can see; copy one that others hold (a user's tensor, a view).
    const bool unique = new_grad.use_count() == 1 && new_grad.storage().use_count() == 1 &&
                        !new_grad.requires_grad() && new_grad.is_contiguous();
    meta.grad = unique ? std::move(new_grad) : new_grad.detach().clone();
  } else if (meta.grad.requires_grad()) {
    meta.grad = meta.grad + new_grad;  // a grad made under create_graph: never write into it
  } else {
    meta.grad.add_(new_grad);
  }
  return {};
}

GraphRoot::GraphRoot(edge_list roots, variable_list grads)
    : Node(std::move(roots)), grads_(std::move(grads)) {
  for (const Tensor& g : grads_) {
    if (g.defined()) {
      add_input_metadata(g);
    } else {
      add_undefined_input();
    }
  }
}

variable_list FormulaNode::apply(variable_list&& grads) {
  // A released node still runs: only its saved tensors are gone (SavedVariable::unpack raises
  // if the formula needs one), as in PyTorch, where a graph without saved tensors can be run
  // twice.
  FERRY_CHECK(static_cast<bool>(formula_), name(), ": the node has no backward formula");
  // No gradient reached any output: none flows on (formulas may assume a defined gradient).
  if (std::none_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.defined(); })) {
    return variable_list(num_outputs());
  }
  // Outputs that received none get zeros, so formulas see every gradient defined.
  variable_list filled = grads;
  for (uint32_t i = 0; i < filled.size() && i < num_inputs(); ++i) {
    const InputMetadata& m = input_metadata(i);
    if (!filled[i].defined() && m.defined) {
      filled[i] = zeros(m.shape, TensorOptions(m.dtype).device(m.device));
    }
  }
  return formula_(*this, filled);
}

void FormulaNode::release_variables() {
  for (SavedVariable& s : saved_) s.reset_data();
  released_ = true;
}

CopySlices::CopySlices(const Tensor& base, const Tensor& view, IntrusivePtr<Node> fn)
    : base_sizes_(base.sizes()),
      base_strides_(base.strides()),
      sizes_(view.sizes()),
      strides_(view.strides()),
      offset_(view.storage_offset() - base.storage_offset()),
      fn_(std::move(fn)) {
  edge_list edges{gradient_edge(base)};
  for (size_t i = 1; i < fn_->num_outputs(); ++i) edges.push_back(fn_->next_edge(i));
  set_next_edges(std::move(edges));
}

void CopySlices::release_variables() {
  if (fn_) fn_->release_variables();
}

variable_list CopySlices::apply(variable_list&& grads) {
  check_not_released();
  variable_list out(num_outputs());
  const Tensor& grad = grads.at(0);
  if (!grad.defined()) return out;
  Tensor result = empty_strided(base_sizes_, base_strides_, grad.options());
  result.copy_(grad);
  Tensor slice = result.as_strided(sizes_, strides_, result.storage_offset() + offset_);
  variable_list res = (*fn_)({slice.clone()});
  if (needs_input_grad(0)) {
    if (!res.empty() && res[0].defined()) {
      slice.copy_(res[0]);
    } else {
      slice.zero_();
    }
    out[0] = std::move(result);
  }
  for (size_t i = 1; i < res.size() && i < out.size(); ++i) out[i] = std::move(res[i]);
  return out;
}

}  // namespace ferry::autograd
