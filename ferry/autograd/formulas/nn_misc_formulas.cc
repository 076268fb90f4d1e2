// Backward formulas of nll_loss_forward, embedding, cat and stack (and the double backwards of
// nll_loss_backward and embedding_dense_backward, which are linear in the gradient). Class
// targets, indices and nll's total_weight are not differentiable; cat and stack hand each input
// its slice of the gradient (the engine casts it back to the input's dtype).
#include <vector>

#include "ferry/autograd/record.h"
#include "ferry/ops/math.h"
#include "ferry/ops/nn_ops.h"

namespace ferry::autograd {
namespace {

using Grads = const variable_list&;

std::tuple<Tensor, Tensor> nll_loss_forward_autograd(const Tensor& self, const Tensor& target,
                                                     const std::optional<Tensor>& weight,
                                                     int64_t reduction, int64_t ignore_index) {
  const Tensor w = weight.value_or(Tensor());
  Recorder rec("NllLossBackward0", {&self, &w});
  auto result = below_autograd(
      [&] { return nll_loss_forward(self, target, weight, reduction, ignore_index); });
  if (rec) {
    const size_t sx = rec.save(self), st = rec.save(target), sw = rec.save(w);
    const size_t stw = rec.save(std::get<1>(result));
    rec.record(std::get<0>(result), [=](FormulaNode& n, Grads g) -> variable_list {
      // As PyTorch: a weight that requires grad is an error, not a silent zero.
      FERRY_CHECK_AS(NotImplementedError, !n.needs_input_grad(1),
                     "nll_loss: the derivative for 'weight' is not implemented.");
      return {nll_loss_backward(g[0], n.saved(sx), n.saved(st), n.saved(sw), reduction,
                                ignore_index, n.saved(stw)),
              Tensor()};
    });
  }
  return result;
}

// nll_loss_backward is linear in grad_output and does not depend on self's values: its adjoint
// is the loss itself applied to the incoming gradient.
Tensor nll_loss_backward_autograd(const Tensor& grad_output, const Tensor& self,
                                  const Tensor& target, const std::optional<Tensor>& weight,
                                  int64_t reduction, int64_t ignore_index,
                                  const Tensor& total_weight) {
  Recorder rec("NllLossBackwardBackward0", {&grad_output, &self});
  Tensor out = below_autograd([&] {
    return nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index,
                             total_weight);
  });
  if (rec) {
    const size_t st = rec.save(target), sw = rec.save(weight.value_or(Tensor()));
    rec.record(out, [=](FormulaNode& n, Grads g) -> variable_list {
      return {
          std::get<0>(nll_loss_forward(g[0], n.saved(st), n.saved(sw), reduction, ignore_index)),
          Tensor()};
    });
  }
  return out;
}

Tensor embedding_autograd(const Tensor& weight, const Tensor& indices, int64_t padding_idx,
                          bool scale_grad_by_freq, bool sparse) {
  Recorder rec("EmbeddingBackward0", {&weight});
  Tensor out = below_autograd(
      [&] { return embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse); });
  if (rec) {
    const size_t si = rec.save(indices);
    const int64_t num_weights = weight.size(0);
    rec.record(out, [=](FormulaNode& n, Grads g) -> variable_list {
      return {embedding_dense_backward(g[0], n.saved(si), num_weights, padding_idx,
                                       scale_grad_by_freq)};
    });
  }
  return out;
}

Tensor embedding_dense_backward_autograd(const Tensor& grad_output, const Tensor& indices,
                                         int64_t num_weights, int64_t padding_idx,
                                         bool scale_grad_by_freq) {
  Recorder rec("EmbeddingDenseBackwardBackward0", {&grad_output});
  Tensor out = below_autograd([&] {
    return embedding_dense_backward(grad_output, indices, num_weights, padding_idx,
                                    scale_grad_by_freq);
  });
  if (rec) {
    FERRY_CHECK_AS(NotImplementedError, !scale_grad_by_freq,
                   "embedding_dense_backward: the double backward with scale_grad_by_freq is not "
                   "supported");
    const size_t si = rec.save(indices);
    rec.record(out, [si, padding_idx](FormulaNode& n, Grads g) -> variable_list {
      const Tensor idx = n.saved(si);
      Tensor rows = embedding(g[0], idx);
      if (padding_idx >= 0) rows = rows * idx.ne(padding_idx).unsqueeze(-1).to(rows.dtype());
      return {rows};
    });
  }
  return out;
}

Tensor cat_autograd(ArrayRef<Tensor> tensors, int64_t dim) {
  const variable_list inputs = tensors.vec();
  Recorder rec("CatBackward0", inputs);
  Tensor out = below_autograd([&] { return cat(tensors, dim); });
  if (rec) {
    // Each input's extent along the dim (-1: skipped, as cat skips 1-d empty tensors).
    std::vector<int64_t> extents;
    int64_t d = 0;
    for (const Tensor& t : tensors) {
      const bool skipped = t.dim() == 1 && t.numel() == 0;
      extents.push_back(skipped ? -1 : 0);
      if (!skipped) d = wrap_dim(dim, t.dim(), "cat dim");
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (extents[i] == 0) extents[i] = tensors[i].size(d);
    }
    rec.record(out, [extents, d](FormulaNode& n, Grads g) -> variable_list {
      variable_list grads;
      int64_t offset = 0;
      for (size_t i = 0; i < extents.size(); ++i) {
        if (extents[i] < 0 || !n.needs_input_grad(i)) {
          grads.emplace_back();
        } else {
          grads.push_back(g[0].narrow(d, offset, extents[i]));
        }
        offset += extents[i] < 0 ? 0 : extents[i];
      }
      return grads;
    });
  }
  return out;
}

Tensor stack_autograd(ArrayRef<Tensor> tensors, int64_t dim) {
  const variable_list inputs = tensors.vec();
  Recorder rec("StackBackward0", inputs);
  Tensor out = below_autograd([&] { return stack(tensors, dim); });
  if (rec) {
    const int64_t d = wrap_dim(dim, out.dim(), "stack dim");
    const size_t count = tensors.size();
    rec.record(out, [d, count](FormulaNode& n, Grads g) -> variable_list {
      variable_list grads;
      for (size_t i = 0; i < count; ++i) {
        grads.push_back(n.needs_input_grad(i) ? g[0].select(d, static_cast<int64_t>(i)) : Tensor());
      }
      return grads;
    });
  }
  return out;
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  impl_autograd(m, "nll_loss_forward", &nll_loss_forward_autograd, "NllLossBackward0");
  impl_autograd(m, "nll_loss_backward", &nll_loss_backward_autograd, "NllLossBackwardBackward0");
  impl_autograd(m, "embedding", &embedding_autograd, "EmbeddingBackward0");
  impl_autograd(m, "embedding_dense_backward", &embedding_dense_backward_autograd,
                "EmbeddingDenseBackwardBackward0");
  impl_autograd(m, "cat", &cat_autograd, "CatBackward0");
  impl_autograd(m, "stack", &stack_autograd, "StackBackward0");
}

}  // namespace ferry::autograd
