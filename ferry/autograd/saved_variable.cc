// SavedVariable: version-checked saved tensors; saved outputs are reconnected on unpack.
#include "ferry/autograd/saved_variable.h"

#include "ferry/autograd/node.h"
#include "ferry/autograd/variable.h"
#include "ferry/core/error.h"
#include "ferry/core/views.h"

namespace ferry::autograd {

SavedVariable::SavedVariable(const Tensor& t, bool is_output) {
  if (!t.defined()) return;
  defined_ = true;
  is_output_ = is_output;
  saved_version_ = t._version();
  requires_grad_ = t.requires_grad();
  if (is_output) {
    // A plain alias: no autograd meta, so no reference back to the node that saves it.
    data_ = native::alias(t);
    output_nr_ = autograd_meta(t) != nullptr ? autograd_meta(t)->output_nr : 0;
  } else {
    data_ = t;
  }
}

Tensor SavedVariable::unpack(const Node* saved_for) const {
  if (!defined_) return Tensor();
  if (released_) {
    FERRY_FAIL_AS(Error, "Trying to backward through the graph a second time (or directly access ",
                  "saved tensors after they have already been freed): the saved tensors of ",
                  saved_for != nullptr ? saved_for->name() : std::string("a node"),
                  " were freed by the first backward. Specify retain_graph=true on the first "
                  "backward call if you need to backward twice.");
  }
  const uint32_t now = data_._version();
  if (now != saved_version_) {
    FERRY_FAIL_AS(Error,
                  "one of the variables needed for gradient computation has been modified by an "
                  "inplace operation: [",
                  dtype_name(data_.dtype()), " ", data_.sizes(), "], which is ",
                  is_output_ ? "output " : "an input of ",
                  is_output_ ? std::to_string(output_nr_) + " of " : std::string(),
                  saved_for != nullptr ? saved_for->name() : std::string("its node"),
                  ", is at version ", now, "; expected version ", saved_version_, " instead.");
  }
  if (!is_output_ || !requires_grad_ || saved_for == nullptr) return data_;
  // Reconnect the saved output to the node that made it, for higher-order gradients.
  Tensor out = native::alias(data_);
  AutogradMeta& meta = materialize_autograd_meta(out);
  meta.grad_fn = IntrusivePtr<Node>(const_cast<Node*>(saved_for));
  meta.output_nr = output_nr_;
  out.impl()->set_requires_grad(true);
  return out;
}

void SavedVariable::reset_data() {
  if (!defined_) return;
  data_ = Tensor();
  released_ = true;
}

}  // namespace ferry::autograd
