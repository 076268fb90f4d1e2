// Custom autograd functions, with the shape of PyTorch's C++ torch::autograd::Function<T>:
//   struct Scale : Function<Scale> {
//     static Tensor forward(AutogradContext* ctx, const Tensor& x, double k) {
//       ctx->saved_data["k"] = k;
//       return x * k;
//     }
//     static variable_list backward(AutogradContext* ctx, variable_list grads) {
//       return {grads[0] * ctx->saved_data["k"].to_double(), Tensor()};
//     }
//   };
//   Tensor y = Scale::apply(x, 2.0);
// forward runs with grad mode off; its outputs get a node whose backward is T::backward, which
// returns one gradient per forward argument (undefined for non-tensor arguments and for tensors
// that need none). The node runs on the stream current for its outputs' device when apply()
// returned, like every node (PyTorch's rule). (ferry/pipeline records its Copy, Wait and checkpoint
// nodes with pipeline::record_function instead, because saved_data cannot hold streams.)
#pragma once

#include <cxxabi.h>

#include <cstdlib>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ferry/autograd/grad_mode.h"
#include "ferry/autograd/saved_variable.h"
#include "ferry/autograd/variable.h"
#include "ferry/core/error.h"
#include "ferry/dispatch/ivalue.h"
#include "ferry/ops/factories.h"

namespace ferry::autograd {

class AutogradContext {
 public:
  // Tensors the backward needs; kept as SavedVariables (version-checked, released after a
  // backward without retain_graph).
  void save_for_backward(variable_list to_save) { to_save_ = std::move(to_save); }
  // The saved tensors, in order. Raises if one was modified in place since, or released.
  variable_list get_saved_variables() const;
  // Anything else the backward needs.
  std::unordered_map<std::string, IValue> saved_data;

  // Inputs forward modified in place: they become outputs of this node.
  void mark_dirty(const variable_list& inputs);
  // Outputs that carry no gradient (indices, masks): they do not require grad.
  void mark_non_differentiable(const variable_list& outputs);
  // Whether undefined output gradients reach backward as zeros (default) or undefined.
  void set_materialize_grads(bool value) { materialize_grads_ = value; }
  // Whether forward argument i (a tensor) needs a gradient.
  bool needs_input_grad(size_t i) const {
    return i < needs_input_grad_.size() && needs_input_grad_[i];
  }

 private:
  template <class T>
  friend struct Function;
  template <class T>
  friend class CppNode;

  variable_list to_save_;
  std::vector<SavedVariable> saved_;
  std::unordered_set<const TensorImpl*> dirty_;
  std::unordered_set<const TensorImpl*> non_differentiable_;
  std::vector<bool> needs_input_grad_;  // per forward argument
  bool materialize_grads_ = true;
  const Node* node_ = nullptr;
};

namespace detail {

std::string demangle(const char* name);

// Calls f(tensor, argument_index) for every Tensor (and every element of a tensor list) among
// the arguments.
template <typename F, typename... Args>
void for_each_tensor(F&& f, const Args&... args) {
  size_t index = 0;
  auto visit = [&](const auto& a) {
    using A = std::remove_cvref_t<decltype(a)>;
    if constexpr (std::is_same_v<A, Tensor>) {
      f(a, index);
    } else if constexpr (std::is_same_v<A, variable_list>) {
      for (const Tensor& t : a) f(t, index);
    }
    ++index;
  };
  (visit(args), ...);
}

}  // namespace detail

template <class T>
class CppNode final : public Node {
 public:
  std::string name() const override { return detail::demangle(typeid(T).name()) + "Backward"; }
  void release_variables() override {
    for (SavedVariable& s : ctx_.saved_) s.reset_data();
    released_ = true;
  }

  AutogradContext ctx_;
  // For each forward argument: how many tensors it holds (0 for non-tensors).
  std::vector<size_t> arg_tensor_counts_;

 protected:
  void release_resources() override {
    ctx_.saved_.clear();
    ctx_.to_save_.clear();
    ctx_.saved_data.clear();
    Node::release_resources();
  }
  variable_list apply(variable_list&& grads) override {
    if (ctx_.materialize_grads_) {
      for (uint32_t i = 0; i < grads.size() && i < num_inputs(); ++i) {
        const InputMetadata& m = input_metadata(i);
        if (!grads[i].defined() && m.defined) {
          grads[i] = zeros(m.shape, TensorOptions(m.dtype).device(m.device));
        }
      }
    }
    variable_list out = T::backward(&ctx_, std::move(grads));
    // One gradient per forward argument: keep those of the tensor arguments, in edge order.
    variable_list per_edge;
    const bool per_argument = out.size() == arg_tensor_counts_.size();
    size_t pos = 0;
    for (size_t a = 0; a < arg_tensor_counts_.size(); ++a) {
      const size_t n = arg_tensor_counts_[a];
      if (per_argument) {
        FERRY_CHECK(n <= 1 || !out[a].defined(), name(), ": a tensor-list argument's gradients ",
                    "must be returned one per tensor, not one per argument");
        if (n == 1) per_edge.push_back(out[a]);
        for (size_t k = 1; k < n; ++k) per_edge.emplace_back();
        if (n == 0) {
          FERRY_CHECK(!out[a].defined(), name(), ": backward returned a gradient for argument ", a,
                      ", which is not a tensor");
        }
      } else {
        for (size_t k = 0; k < n; ++k) {
          per_edge.push_back(pos < out.size() ? out[pos] : Tensor());
          ++pos;
        }
      }
    }
    FERRY_CHECK(per_argument || out.size() == per_edge.size(), name(), ": backward returned ",
                out.size(), " gradients, but forward took ", arg_tensor_counts_.size(),
                " arguments holding ", per_edge.size(), " tensors");
    return per_edge;
  }
};

template <class T>
struct Function {
  template <typename... Args>
  static auto apply(Args&&... args) {
    auto node = make_intrusive<CppNode<T>>();
    AutogradContext& ctx = node->ctx_;
    ctx.node_ = node.get();
    variable_list inputs;
    std::vector<size_t> counts(sizeof...(Args), 0);
    detail::for_each_tensor(
        [&](const Tensor& t, size_t arg) {
          inputs.push_back(t);
          ++counts[arg];
        },
        args...);
    node->arg_tensor_counts_ = counts;
    const bool requires_grad = any_requires_grad(inputs);
    if (requires_grad) {
      node->set_next_edges(collect_next_edges(inputs));
      ctx.needs_input_grad_.assign(sizeof...(Args), false);
      size_t edge = 0;
      for (size_t a = 0; a < counts.size(); ++a) {
        for (size_t k = 0; k < counts[a]; ++k) {
          if (node->needs_input_grad(edge++)) ctx.needs_input_grad_[a] = true;
        }
      }
    }
    using Result = decltype(T::forward(&ctx, std::forward<Args>(args)...));
    Result result = [&] {
      AutoGradMode no_grad(false);
      return T::forward(&ctx, std::forward<Args>(args)...);
    }();
    if constexpr (std::is_same_v<Result, Tensor>) {
      variable_list outputs{result};
      wrap_outputs(node, inputs, outputs, requires_grad);
      return outputs[0];
    } else {
      static_assert(std::is_same_v<Result, variable_list>,
                    "Function<T>::forward must return a Tensor or a variable_list");
      wrap_outputs(node, inputs, result, requires_grad);
      return result;
    }
  }

 private:
  // Gives each output its history (or none), then turns the tensors forward asked to save into
  // SavedVariables, knowing which of them are outputs.
  static void wrap_outputs(const IntrusivePtr<CppNode<T>>& node, const variable_list& inputs,
                           variable_list& outputs, bool requires_grad) {
    AutogradContext& ctx = node->ctx_;
    std::unordered_set<const TensorImpl*> input_impls;
    for (const Tensor& t : inputs) input_impls.insert(t.impl());
    for (Tensor& out : outputs) {
      if (!out.defined()) {
        if (requires_grad) node->add_undefined_input();
        continue;
      }
      const bool non_differentiable = ctx.non_differentiable_.count(out.impl()) > 0;
      if (!requires_grad || non_differentiable) {
        if (requires_grad) node->add_undefined_input();
        continue;
      }
      if (ctx.dirty_.count(out.impl()) > 0) {
        // Note [In-place on views]: CopySlices takes the node's first input as the view written.
        FERRY_CHECK_AS(
            NotImplementedError,
            !view_base_of(out).defined() || (!inputs.empty() && inputs[0].impl() == out.impl()),
            "mark_dirty: an input that is a view and was modified in place must be "
            "forward's first input");
        rebase_history(out, node);
        continue;
      }
      // An input returned as it is comes back as a new handle with this node's history.
      if (input_impls.count(out.impl()) > 0) out = out.detach();
      set_history(out, node);
    }
    std::unordered_set<const TensorImpl*> output_impls;
    for (const Tensor& out : outputs) {
      if (out.defined()) output_impls.insert(out.impl());
    }
    for (const Tensor& t : ctx.to_save_) {
      ctx.saved_.emplace_back(t, t.defined() && output_impls.count(t.impl()) > 0 && requires_grad);
    }
    ctx.to_save_.clear();
  }
};

}  // namespace ferry::autograd
