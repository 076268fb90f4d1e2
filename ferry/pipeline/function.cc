// record_function's node (see function.h).
#include "ferry/pipeline/function.h"

#include <unordered_set>
#include <utility>

#include "ferry/autograd/node.h"
#include "ferry/core/error.h"
#include "ferry/ops/factories.h"

namespace ferry::pipeline {
namespace {

class LambdaNode final : public autograd::Node {
 public:
  LambdaNode(std::string name, BackwardFunction backward)
      : name_(std::move(name)), backward_(std::move(backward)) {}
  std::string name() const override { return name_; }

 protected:
  variable_list apply(variable_list&& grads) override {
    FERRY_CHECK(backward_ != nullptr, name_, ": backward ran after the node was released");
    for (uint32_t i = 0; i < grads.size() && i < num_inputs(); ++i) {
      const autograd::InputMetadata& m = input_metadata(i);
      if (!grads[i].defined() && m.defined) {
        grads[i] = zeros(m.shape, TensorOptions(m.dtype).device(m.device));
      }
    }
    variable_list out = backward_(std::move(grads));
    FERRY_CHECK(out.size() == num_outputs(), name_, ": expected backward to return ", num_outputs(),
                " gradients (one per input), but it returned ", out.size());
    return out;
  }
  void release_resources() override {
    backward_ = nullptr;
    Node::release_resources();
  }

 private:
  std::string name_;
  BackwardFunction backward_;
};

}  // namespace

bool record_function(const std::string& name, const variable_list& inputs, variable_list& outputs,
                     BackwardFunction backward, const std::vector<bool>& differentiable) {
  FERRY_CHECK(differentiable.empty() || differentiable.size() == outputs.size(), name,
              ": expected one differentiable flag per output (", outputs.size(), "), but got ",
              differentiable.size());
  if (!autograd::any_requires_grad(inputs)) return false;
  auto node = make_intrusive<LambdaNode>(name, std::move(backward));
  node->set_next_edges(autograd::collect_next_edges(inputs));
  std::unordered_set<const TensorImpl*> input_impls;
  for (const Tensor& t : inputs) {
    if (t.defined()) input_impls.insert(t.impl());
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    Tensor& out = outputs[k];
    if (!out.defined() || (!differentiable.empty() && !differentiable[k])) {
      node->add_undefined_input();
      continue;
    }
    if (input_impls.count(out.impl()) > 0) out = out.detach();
    autograd::set_history(out, node);
  }
  return true;
}

}  // namespace ferry::pipeline
