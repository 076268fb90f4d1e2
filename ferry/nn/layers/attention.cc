// nn::MultiheadAttention: projections, scaled dot-product attention per head, masks, dropout and
// the output projection (see attention.h). Built from dispatched operators, so it runs on every
// device and is differentiable.
#include "ferry/nn/layers/attention.h"

#include <cmath>
#include <limits>

#include "ferry/core/error.h"
#include "ferry/nn/layers/init.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/linalg.h"
#include "ferry/ops/math.h"
#include "ferry/ops/nn_ops.h"

namespace ferry::nn {

Tensor additive_mask(const Tensor& mask, ScalarType dtype) {
  if (mask.dtype() != kBool) return mask.to(dtype);
  TensorOptions opts = TensorOptions(dtype).device(mask.device());
  return where(mask, full({}, -std::numeric_limits<double>::infinity(), opts), zeros({}, opts));
}

MultiheadAttentionImpl::MultiheadAttentionImpl(int64_t embed_dim, int64_t num_heads,
                                               MultiheadAttentionOptions opts)
    : embed_dim(embed_dim), num_heads(num_heads), options(opts) {
  FERRY_CHECK(num_heads > 0 && embed_dim % num_heads == 0,
              "MultiheadAttention: embed_dim must be divisible by num_heads (given embed_dim=",
              embed_dim, ", num_heads=", num_heads, ")");
  FERRY_CHECK(options.dropout >= 0.0 && options.dropout <= 1.0,
              "MultiheadAttention: expected dropout in [0, 1], given ", options.dropout);
  head_dim = embed_dim / num_heads;
  in_proj_weight = register_parameter("in_proj_weight", empty({3 * embed_dim, embed_dim}));
  in_proj_bias =
      register_parameter("in_proj_bias", options.bias ? empty({3 * embed_dim}) : Tensor());
  out_proj = register_module("out_proj",
                             NonDynamicallyQuantizableLinear(embed_dim, embed_dim, options.bias));
  reset_parameters();
}

void MultiheadAttentionImpl::reset_parameters() {
  init::xavier_uniform_(in_proj_weight);
  if (in_proj_bias.defined()) {
    init::zeros_(in_proj_bias);
    init::zeros_(out_proj->bias);
  }
}

std::pair<Tensor, Tensor> MultiheadAttentionImpl::forward(
    const Tensor& query, const Tensor& key, const Tensor& value,
    const std::optional<Tensor>& key_padding_mask, bool need_weights,
    const std::optional<Tensor>& attn_mask, bool average_attn_weights) {
  for (const Tensor* t : {&query, &key, &value}) {
    FERRY_CHECK_AS(ShapeError, t->dim() == 3 && t->size(2) == embed_dim,
                   "MultiheadAttention: expected query, key and value of shape [L, N, ", embed_dim,
                   "] (batch_first: [N, L, ", embed_dim, "]), given ", t->sizes());
  }
  // Batch first from here on: [N, L, E].
  auto batch_first = [&](const Tensor& t) { return options.batch_first ? t : t.transpose(0, 1); };
  const Tensor q_in = batch_first(query), k_in = batch_first(key), v_in = batch_first(value);
  const int64_t n = q_in.size(0), l = q_in.size(1), s = k_in.size(1);
  FERRY_CHECK_AS(ShapeError, k_in.size(0) == n && v_in.size(0) == n && v_in.size(1) == s,
                 "MultiheadAttention: key and value must share the query's batch and each "
                 "other's length; given query ",
                 query.sizes(), ", key ", key.sizes(), ", value ", value.sizes());

  auto project = [&](const Tensor& x, int64_t part) {
    Tensor w = in_proj_weight.narrow(0, part * embed_dim, embed_dim);
    std::optional<Tensor> b;
    if (in_proj_bias.defined()) b = in_proj_bias.narrow(0, part * embed_dim, embed_dim);
    // [N, T, E] -> [N, H, T, D]
    return linear(x, w, b).view({n, x.size(1), num_heads, head_dim}).permute({0, 2, 1, 3});
  };
  const Tensor q = project(q_in, 0), k = project(k_in, 1), v = project(v_in, 2);

  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  Tensor scores = matmul(q, k.transpose(-2, -1)).mul(scale);  // [N, H, L, S]
  if (attn_mask) {
    const Tensor m = additive_mask(*attn_mask, scores.dtype());
    if (m.dim() == 2) {
      FERRY_CHECK_AS(ShapeError, m.size(0) == l && m.size(1) == s,
                     "MultiheadAttention: expected attn_mask of shape [", l, ", ", s, "], given ",
                     m.sizes());
      scores = scores.add(m);
    } else {
      FERRY_CHECK_AS(ShapeError,
                     m.dim() == 3 && m.size(0) == n * num_heads && m.size(1) == l && m.size(2) == s,
                     "MultiheadAttention: expected attn_mask of shape [", n * num_heads, ", ", l,
                     ", ", s, "], given ", m.sizes());
      scores = scores.add(m.view({n, num_heads, l, s}));
    }
  }
  if (key_padding_mask) {
    FERRY_CHECK_AS(ShapeError,
                   key_padding_mask->dim() == 2 && key_padding_mask->size(0) == n &&
                       key_padding_mask->size(1) == s,
                   "MultiheadAttention: expected key_padding_mask of shape [", n, ", ", s,
                   "], given ", key_padding_mask->sizes());
    scores = scores.add(additive_mask(*key_padding_mask, scores.dtype()).view({n, 1, 1, s}));
  }
  Tensor weights = softmax(scores, -1);
  const Tensor dropped = dropout(weights, options.dropout, is_training());
  Tensor out = matmul(dropped, v).permute({0, 2, 1, 3}).reshape({n, l, embed_dim});
  out = out_proj(out);
  if (!options.batch_first) out = out.transpose(0, 1);
  if (!need_weights) return {out, Tensor()};
  return {out, average_attn_weights ? weights.mean({1}) : weights};
}

}  // namespace ferry::nn
