// The engine's own node types: AccumulateGrad (a leaf's sink: adds the gradient into .grad),
// GraphRoot (feeds the initial gradients), and FormulaNode, the node of every operator's
// backward formula: a named function of the output gradients over the node's saved tensors.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ferry/autograd/node.h"
#include "ferry/autograd/saved_variable.h"

namespace ferry::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  std::string name() const override { return "AccumulateGrad"; }
  const Tensor& variable() const { return variable_; }

 protected:
  variable_list apply(variable_list&& grads) override;
  void release_resources() override {
    variable_ = Tensor();
    Node::release_resources();
  }

 private:
  Tensor variable_;
};

class GraphRoot final : public Node {
 public:
  GraphRoot(edge_list roots, variable_list grads);
  std::string name() const override { return "GraphRoot"; }

 protected:
  variable_list apply(variable_list&&) override { return grads_; }

 private:
  variable_list grads_;
};

// A backward formula. The forward kernel creates the node with the input edges, saves what the
// formula needs with save(), sets the formula and records the outputs. The formula returns one
// gradient per input edge (undefined where needs_input_grad is false or nothing flows);
// broadcasting and dtype differences are reduced by the engine (sum_to, cast).
class FormulaNode final : public Node {
 public:
  using Formula = std::function<variable_list(FormulaNode& node, const variable_list& grads)>;

  FormulaNode(std::string name, edge_list next_edges)
      : Node(std::move(next_edges)), name_(std::move(name)) {}
  std::string name() const override { return name_; }

  // Saves `t` (is_output: t is an output of this node) and returns its index for saved().
  size_t save(const Tensor& t, bool is_output = false) {
    saved_.emplace_back(t, is_output);
    return saved_.size() - 1;
  }
  Tensor saved(size_t i) const { return saved_.at(i).unpack(this); }
  void set_formula(Formula f) { formula_ = std::move(f); }
  void release_variables() override;

 protected:
  variable_list apply(variable_list&& grads) override;
  void release_resources() override {
    saved_.clear();
    formula_ = nullptr;
    Node::release_resources();
  }

 private:
  std::string name_;
  std::vector<SavedVariable> saved_;
  Formula formula_;
};

// Note [In-place on views] in variable.cc: the base's history after an in-place operation on
// one of its views. The base's gradient goes to the base's old history with the view's part
// replaced by what the operation's node (fn) gives for the view's old values (zero where it
// gives none, as for copy_); fn's other gradients go to its other inputs.
class CopySlices final : public Node {
 public:
  CopySlices(const Tensor& base, const Tensor& view, IntrusivePtr<Node> fn);
  std::string name() const override { return "CopySlices"; }
  void release_variables() override;

 protected:
  variable_list apply(variable_list&& grads) override;
  void release_resources() override {
    fn_.reset();
    Node::release_resources();
  }

 private:
  DimVector base_sizes_, base_strides_, sizes_, strides_;
  int64_t offset_ = 0;  // the view's storage offset from the base's
  IntrusivePtr<Node> fn_;
};

}  // namespace ferry::autograd
