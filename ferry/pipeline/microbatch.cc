// scatter and gather (see microbatch.h).
#include "ferry/pipeline/microbatch.h"

#include "ferry/core/error.h"
#include "ferry/ops/nn_ops.h"

namespace ferry::pipeline {

std::vector<Batch> scatter(const Batch& inputs, int64_t chunks) {
  FERRY_CHECK(chunks >= 1, "scatter: expected chunks >= 1, but got ", chunks);
  FERRY_CHECK(!inputs.empty(), "scatter: expected at least one tensor, but got none");
  for (size_t k = 0; k < inputs.size(); ++k) {
    FERRY_CHECK_AS(ShapeError, inputs[k].defined() && inputs[k].dim() >= 1,
                   "scatter: expected tensors with a batch dimension, but tensor ", k, " is ",
                   inputs[k].defined() ? "0-d" : "undefined");
    FERRY_CHECK_AS(ShapeError, inputs[k].size(0) == inputs[0].size(0),
                   "scatter: expected every tensor to have ", inputs[0].size(0),
                   " rows (tensor 0's), but tensor ", k, " has ", inputs[k].size(0));
  }
  std::vector<Batch> batches;
  for (size_t k = 0; k < inputs.size(); ++k) {
    std::vector<Tensor> pieces = chunk(inputs[k], chunks, 0);
    if (batches.empty()) batches.resize(pieces.size());
    for (size_t i = 0; i < pieces.size(); ++i) batches[i].push_back(std::move(pieces[i]));
  }
  return batches;
}

Batch gather(const std::vector<Batch>& outputs) {
  FERRY_CHECK(!outputs.empty(), "gather: expected at least one micro-batch, but got none");
  const size_t width = outputs[0].size();
  Batch joined;
  for (size_t k = 0; k < width; ++k) {
    std::vector<Tensor> pieces;
    for (size_t i = 0; i < outputs.size(); ++i) {
      FERRY_CHECK(outputs[i].size() == width, "gather: expected ", width,
                  " tensors per micro-batch (micro-batch 0's), but micro-batch ", i, " has ",
                  outputs[i].size());
      pieces.push_back(outputs[i][k]);
    }
    joined.push_back(cat(pieces, 0));
  }
  return joined;
}

}  // namespace ferry::pipeline
