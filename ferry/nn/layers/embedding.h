// nn::Embedding (torch::nn::Embedding): a lookup table weight [num_embeddings, embedding_dim],
// initialized N(0, 1) with the padding_idx row zeroed (that row also gets no gradient); repr
// "Embedding(30522, 768, padding_idx=0)".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ferry/core/tensor.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_holder.h"

namespace ferry::nn {

class EmbeddingImpl : public Module {
 public:
  // A negative padding_idx counts from the end, as PyTorch's.
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim,
                std::optional<int64_t> padding_idx = std::nullopt);
  void reset_parameters();
  // Zeroes the padding_idx row (when there is one).
  void reset_padding_row();
  // indices: int64 or int32, any shape -> indices.sizes() + [embedding_dim].
  Tensor forward(const Tensor& indices);
  std::string extra_repr() const override;

  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;  // normalized to [0, num_embeddings)
  Tensor weight;
};
FERRY_MODULE(Embedding);

}  // namespace ferry::nn
