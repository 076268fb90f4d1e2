// SavedVariable: a tensor a node keeps for its backward, with the version of its storage at the
// time it was saved. unpack() refuses a tensor that was modified in place since (PyTorch's
// "one of the variables needed for gradient computation has been modified by an inplace
// operation" error, naming the node and both versions). A saved output is kept without its
// grad_fn (which is the saving node: holding it would be a cycle) and reconnected on unpack.
#pragma once

#include <cstdint>

#include "ferry/core/intrusive_ptr.h"
#include "ferry/core/tensor.h"

namespace ferry::autograd {

class Node;

class SavedVariable {
 public:
  SavedVariable() = default;
  // is_output: `t` is an output of the node that saves it.
  SavedVariable(const Tensor& t, bool is_output);

  // The saved tensor (undefined if an undefined tensor was saved). `saved_for` is the node
  // that saved it; a saved output comes back with saved_for as its grad_fn. Raises when the
  // tensor was modified in place, or when the saved data was released by an earlier backward.
  Tensor unpack(const Node* saved_for = nullptr) const;
  // Drops the tensor (after a backward without retain_graph).
  void reset_data();
  bool defined() const { return defined_; }

 private:
  Tensor data_;
  uint32_t saved_version_ = 0;
  uint32_t output_nr_ = 0;
  bool defined_ = false;
  bool is_output_ = false;
  bool requires_grad_ = false;
  bool released_ = false;
};

}  // namespace ferry::autograd
