// nn::Embedding: the table, its init and lookup (see embedding.h).
#include "ferry/nn/layers/embedding.h"

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/nn/layers/init.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/nn_ops.h"

namespace ferry::nn {

EmbeddingImpl::EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim,
                             std::optional<int64_t> pad)
    : num_embeddings(num_embeddings), embedding_dim(embedding_dim) {
  if (pad) {
    FERRY_CHECK_AS(IndexError, *pad < num_embeddings && *pad >= -num_embeddings,
                   "Embedding: padding_idx must be within num_embeddings (expected in [",
                   -num_embeddings, ", ", num_embeddings, "), given ", *pad, ")");
    padding_idx = *pad < 0 ? *pad + num_embeddings : *pad;
  }
  weight = register_parameter("weight", empty({num_embeddings, embedding_dim}));
  reset_parameters();
}

void EmbeddingImpl::reset_parameters() {
  init::normal_(weight);
  reset_padding_row();
}

void EmbeddingImpl::reset_padding_row() {
  if (padding_idx) {
    NoGradGuard no_grad;
    weight.select(0, *padding_idx).zero_();
  }
}

Tensor EmbeddingImpl::forward(const Tensor& indices) {
  return embedding(weight, indices, padding_idx.value_or(-1));
}

std::string EmbeddingImpl::extra_repr() const {
  std::string s = std::to_string(num_embeddings) + ", " + std::to_string(embedding_dim);
  if (padding_idx) s += ", padding_idx=" + std::to_string(*padding_idx);
  return s;
}

}  // namespace ferry::nn
