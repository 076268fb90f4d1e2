// The pipeline's autograd functions are recorded with record_function: a node named `name` whose
// backward is a closure, so it can hold what IValue cannot (streams, shared checkpoint state).
// Semantics of torch.autograd.Function: the forward was run by the caller with grad mode off;
// when grad mode is on and an input requires grad, each floating output gets the node as its
// grad_fn (outputs that are inputs come back as new handles first), the others stay out of the
// graph; backward receives one gradient per output (zeros for a differentiable output nothing
// flowed to, undefined for the others) and returns one per input tensor. The node runs on the
// stream current for its outputs' device when record_function was called (the engine's rule).
#pragma once

#include <functional>
#include <string>

#include "ferry/autograd/variable.h"

namespace ferry::pipeline {

using autograd::variable_list;
using BackwardFunction = std::function<variable_list(variable_list grads)>;

// `differentiable` (empty: all) says which outputs may carry a gradient. Returns whether a node
// was recorded.
bool record_function(const std::string& name, const variable_list& inputs, variable_list& outputs,
                     BackwardFunction backward, const std::vector<bool>& differentiable = {});

}  // namespace ferry::pipeline
