// nn::Module: the base class of every layer and model, with torch::nn::Module's names (torch::nn
// -> ferry::nn). A module owns named parameters, buffers (persistent or not) and child modules;
// the recursive accessors visit them in registration order, depth first, with dotted names, each
// tensor and each module once even when shared. Moving a module (to, cpu, cuda, to_empty) keeps
// every parameter and buffer the same object (Tensor::set_data) and moves its .grad with it.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/core/scalar_type.h"
#include "ferry/core/tensor.h"
#include "ferry/nn/ordered_dict.h"
#include "ferry/nn/safetensors.h"

namespace ferry::nn {

template <typename Contained>
class ModuleHolder;

// What load_state_dict (and Module::load) did not match; PyTorch's _IncompatibleKeys.
struct LoadStateDictResult {
  std::vector<std::string> missing_keys;     // in the module, not in the state dict
  std::vector<std::string> unexpected_keys;  // in the state dict, not in the module
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  // `name` is what printing shows (name()); by default the class name without its namespaces
  // and without a trailing "Impl" (so MyNetImpl under FERRY_MODULE(MyNet) prints "MyNet").
  explicit Module(std::string name);
  Module();
  Module(const Module&) = default;
  Module& operator=(const Module&) = default;
  Module(Module&&) noexcept = default;
  Module& operator=(Module&&) noexcept = default;
  virtual ~Module() = default;

  const std::string& name() const;

  // ---- registration ----------------------------------------------------------------------------
  // Names are non-empty, contain no '.', and are unique across this module's parameters,
  // buffers and children (ferry::Error otherwise). An undefined tensor registers a slot that the
  // accessors skip (PyTorch's None). A parameter must be a leaf; requires_grad_ is set on it.
  Tensor& register_parameter(std::string name, Tensor tensor, bool requires_grad = true);
  // A non-persistent buffer moves with the module but is left out of state_dict.
  Tensor& register_buffer(std::string name, Tensor tensor, bool persistent = true);
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module) {
    static_assert(std::is_base_of_v<Module, M>, "register_module: M must derive from nn::Module");
    add_child(std::move(name), module);
    return module;
  }
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, ModuleHolder<M> holder) {
    return register_module(std::move(name), holder.ptr());
  }
  // Replaces a registered child (same name), returning the new one.
  template <typename M>
  std::shared_ptr<M> replace_module(const std::string& name, std::shared_ptr<M> module) {
    replace_child(name, module);
    return module;
  }
  template <typename M>
  std::shared_ptr<M> replace_module(const std::string& name, ModuleHolder<M> holder) {
    return replace_module(name, holder.ptr());
  }

  // ---- accessors (recursive by default) ---------------------------------------------------------
  std::vector<Tensor> parameters(bool recurse = true) const;
  OrderedDict<std::string, Tensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  OrderedDict<std::string, Tensor> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  OrderedDict<std::string, std::shared_ptr<Module>> named_children() const;
  // Every module of the tree, this one first (when include_self), depth first. include_self
  // needs this module to be owned by a std::shared_ptr (a ModuleHolder or make_shared).
  std::vector<std::shared_ptr<Module>> modules(bool include_self = true) const;
  OrderedDict<std::string, std::shared_ptr<Module>> named_modules(
      const std::string& name_prefix = "", bool include_self = true) const;
  // This module's own entries, registration order (undefined slots included).
  const OrderedDict<std::string, Tensor>& own_parameters() const { return parameters_; }
  const OrderedDict<std::string, Tensor>& own_buffers() const { return buffers_; }
  bool is_persistent_buffer(const std::string& name) const;

  // Calls fn on this module and every descendant, depth first, this module first.
  void apply(const std::function<void(Module&)>& fn);
  void apply(const std::function<void(const std::string&, Module&)>& fn,
             const std::string& name_prefix = "");

  // ---- moving (see docs/nn.md, "Moving a module") -----------------------------------------------
  // Every parameter, buffer and .grad to `device`, as one planned transfer on the device's
  // current stream (small host tensors packed into one pinned buffer and one copy). Blocking
  // calls synchronize once at the end; non_blocking ones return once everything is queued (copies
  // from pinned memory may still be running) and the module may be used on that stream at once.
  virtual void to(Device device, bool non_blocking = false);
  // Floating-point and complex parameters and buffers (and their .grad) to `dtype`; integer and
  // bool buffers keep theirs. `dtype` must be floating or complex (DTypeError otherwise).
  virtual void to(ScalarType dtype, bool non_blocking = false);
  virtual void to(Device device, ScalarType dtype, bool non_blocking = false);
  void cpu();
  void cuda(DeviceIndex index = 0);
  // Uninitialized memory on `device` with each tensor's shape and dtype (no copy): for modules
  // whose weights are loaded next.
  void to_empty(Device device);

  // ---- modes and gradients ----------------------------------------------------------------------
  virtual void train(bool on = true);
  void eval() { train(false); }
  virtual bool is_training() const { return is_training_; }
  // Clears every parameter's .grad (set_to_none), or zeroes it in place.
  virtual void zero_grad(bool set_to_none = true);

  // ---- state ------------------------------------------------------------------------------------
  // Parameters and persistent buffers, detached, under dotted names: this module's own first,
  // then each child's (PyTorch's order). Shared tensors appear under every name.
  TensorDict state_dict(const std::string& prefix = "") const;
  // Copies each entry into the module's tensor of that name (converting dtype and device), as one
  // planned transfer. Raises, copying nothing, with PyTorch's message ("Error(s) in loading
  // state_dict for Net: Missing key(s) ... Unexpected key(s) ... size mismatch for ...") when
  // shapes differ, or when strict and keys are missing or unexpected.
  LoadStateDictResult load_state_dict(const TensorDict& state_dict, bool strict = true);
  // Loads a safetensors file into the module by name (load_state_dict's rules). With a device,
  // the module is placed there first and the file's bytes go straight into its tensors through
  // pinned staging (no copy of the old values; non-persistent buffers and missing entries are
  // moved). `options` sets reading, staging, non_blocking and progress.
  LoadStateDictResult load(const std::string& path, std::optional<Device> device = std::nullopt,
                           bool strict = true, safetensors::LoadOptions options = {});

  // ---- printing ---------------------------------------------------------------------------------
  // The text inside this module's parentheses when printed (PyTorch's extra_repr), e.g.
  // "in_features=3, out_features=4, bias=True". Layers override it.
  virtual std::string extra_repr() const { return ""; }
  // PyTorch's repr: "Name(extra)" for a module without children, else "Name(\n  extra\n
  // (child): ...\n)". Override to print a module differently; parents indent whatever it prints.
  virtual void pretty_print(std::ostream& stream) const;

 protected:
  // The tensors a move visits, once each: every parameter, its defined .grad, and every buffer of
  // the tree (no names: a move of a 900-tensor model should not build 900 strings).
  std::vector<Tensor> entries() const;

 private:
  void add_child(std::string name, std::shared_ptr<Module> module);
  void replace_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name, const char* what) const;
  // Parameters and persistent buffers under dotted names (every name of a shared tensor).
  void state_into(const std::string& prefix, TensorDict& out, bool detached) const;
  // The moves: every entry to `device` / `dtype` as one batched_copy, then set_data. Entries for
  // which `no_copy` says true get new, uninitialized memory instead of a copy.
  void move(std::optional<Device> device, std::optional<ScalarType> dtype, bool non_blocking,
            const std::function<bool(const Tensor&)>& no_copy = nullptr);

  mutable std::string name_;
  OrderedDict<std::string, Tensor> parameters_{"Parameter"};
  OrderedDict<std::string, Tensor> buffers_{"Buffer"};
  std::unordered_set<std::string> non_persistent_;
  OrderedDict<std::string, std::shared_ptr<Module>> children_{"Submodule"};
  bool is_training_ = true;
};

std::ostream& operator<<(std::ostream& stream, const Module& module);

}  // namespace ferry::nn
