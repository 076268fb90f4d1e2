// torchgpipe's phony dependencies: edges in the autograd graph that carry no data.
// A phony is an empty tensor. fork(x) returns x (as a new handle) and a phony whose backward
// must run before x's history continues backwards; join(x, phony) returns x with the phony's
// node as an extra parent. So with `x1, phony = fork(x1); x2 = join(x2, phony)`, the backward
// of what made x1 runs only after the backward has come down to x2 (the pipeline uses it so
// that micro-batch i's backward on a partition runs after micro-batch i+1's there).
// Without grad mode, or with nothing requiring grad, both are plain pass-throughs.
#pragma once

#include <optional>
#include <utility>

#include "ferry/autograd/variable.h"
#include "ferry/pipeline/stream.h"

namespace ferry::pipeline {

// An empty tensor on `device`; a leaf requiring grad when asked (it then gets a node but never
// a gradient).
Tensor get_phony(Device device, bool requires_grad);

std::pair<Tensor, Tensor> fork(const Tensor& input);
Tensor join(const Tensor& input, const Tensor& phony);
// fork_from's first tensor gets the fork, join_to's first tensor the join (torchgpipe's depend).
// With a stream, the fork (join) is recorded with that stream current, so its backward node, which
// only passes gradients on, runs on it: the engine then queues no wait for it on the stream that
// would be current otherwise (GPipe's fence passes the copy streams that carry the two tensors).
void depend(autograd::variable_list& fork_from, autograd::variable_list& join_to,
            const std::optional<AbstractStream>& fork_on = std::nullopt,
            const std::optional<AbstractStream>& join_on = std::nullopt);

}  // namespace ferry::pipeline
