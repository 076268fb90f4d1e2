// gradcheck: compares autograd's gradients of a function with finite differences, as
// torch.autograd.gradcheck does. Inputs that require grad should be float64 (on any device:
// perturbed copies are made on the host and moved back); each output element's
// vector-Jacobian product from autograd is compared with the central difference
// (f(x + eps) - f(x - eps)) / 2 eps of every input element.
#pragma once

#include <functional>
#include <string>

#include "ferry/autograd/node.h"

namespace ferry::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool ok = true;
  // The first mismatch: which input and output, the element indices, both values.
  std::string message;
};

// fn maps the inputs to one or more outputs (floating tensors of any shape). Inputs that do not
// require grad are passed unchanged and not checked.
GradcheckResult gradcheck(const std::function<variable_list(const variable_list&)>& fn,
                          const variable_list& inputs, const GradcheckOptions& options = {});

}  // namespace ferry::autograd
