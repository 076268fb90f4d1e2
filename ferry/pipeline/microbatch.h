// Micro-batches (torchgpipe's microbatch.py): a Batch is the tensors of one micro-batch.
// scatter cuts every input tensor along dim 0 into the same `chunks` pieces (views; the last may
// be smaller, and fewer pieces come back when dim 0 is shorter than `chunks`, as torch.chunk);
// gather joins the pieces back along dim 0, tensor by tensor.
#pragma once

#include <cstdint>
#include <vector>

#include "ferry/autograd/variable.h"

namespace ferry::pipeline {

using Batch = autograd::variable_list;

// Raises ShapeError when a tensor is 0-d or the tensors' dim 0 sizes differ (expected vs
// given), and Error when chunks < 1 or `inputs` is empty.
std::vector<Batch> scatter(const Batch& inputs, int64_t chunks);
// Raises Error when the batches hold different numbers of tensors.
Batch gather(const std::vector<Batch>& outputs);

}  // namespace ferry::pipeline
