// nn::Sequential and nn::ModuleList (torch::nn's). Sequential chains Tensor -> Tensor modules in
// order; it indexes (negative from the end) and slices into a new Sequential that shares the
// same module objects under the same names (so a pipeline stage built from seq->slice(0, 2) has
// the parameters, and the state_dict names, of the original). ModuleList holds modules of any
// kind, named "0", "1", ..., without a forward. Both print as PyTorch's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/core/tensor.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_holder.h"

namespace ferry::nn {

// A module with a Tensor -> Tensor forward, type-erased (torch's AnyModule, for one signature).
class AnyModule {
 public:
  AnyModule() = default;
  template <typename M>
  requires std::is_base_of_v<Module, M> AnyModule(
      std::shared_ptr<M> module)  // NOLINT(google-explicit-constructor)
      : module_(module),
        forward_([raw = module.get()](const Tensor& x) { return Tensor(raw->forward(x)); }) {
    FERRY_CHECK(module_ != nullptr, "AnyModule: the module is null");
  }
  template <typename M>
  AnyModule(ModuleHolder<M> holder)  // NOLINT(google-explicit-constructor)
      : AnyModule(holder.ptr()) {}

  Tensor forward(const Tensor& x) const { return forward_(x); }
  const std::shared_ptr<Module>& ptr() const { return module_; }

 private:
  std::shared_ptr<Module> module_;
  std::function<Tensor(const Tensor&)> forward_;
};

class SequentialImpl : public Module {
 public:
  SequentialImpl() = default;
  // Modules named "0", "1", ... in order: Sequential(Linear(4, 8), ReLU(), Linear(8, 2)).
  template <typename... Ms>
  requires(sizeof...(Ms) > 0 && (std::is_constructible_v<AnyModule, Ms> &&
                                 ...)) explicit SequentialImpl(Ms&&... modules) {
    (push_back(AnyModule(std::forward<Ms>(modules))), ...);
  }
  // Named modules, in order (names unique, no dots).
  explicit SequentialImpl(std::vector<std::pair<std::string, AnyModule>> named);

  // Appends under the next index as name ("0", "1", ...), or under `name`.
  void push_back(AnyModule module);
  void push_back(std::string name, AnyModule module);

  // Runs each module on the previous one's output (an empty Sequential returns its input).
  Tensor forward(const Tensor& input);

  size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  // The module at `index` (negative counts from the end; IndexError naming index and size).
  std::shared_ptr<Module> operator[](int64_t index) const { return ptr(index); }
  std::shared_ptr<Module> ptr(int64_t index) const;
  // The module at `index` as M (ferry::Error naming both types when it is not one).
  template <typename M>
  M& at(int64_t index) const {
    auto* m = dynamic_cast<M*>(ptr(index).get());
    FERRY_CHECK(m != nullptr, "Sequential::at: the module at index ", index, " is a ",
                ptr(index)->name(), ", not the type asked for");
    return *m;
  }
  // Modules [start, end) as a new Sequential sharing them, names kept; Python slice rules
  // (negative counts from the end, out-of-range clamps, step >= 1).
  std::shared_ptr<SequentialImpl> slice(int64_t start, int64_t end, int64_t step = 1) const;
  const std::vector<AnyModule>& items() const { return modules_; }

  // A slice starts in its original's mode without changing the mode of the modules it shares.
  void train(bool on = true) override {
    training_ = on;
    Module::train(on);
  }
  bool is_training() const override { return training_; }

 private:
  std::vector<AnyModule> modules_;
  std::vector<std::string> names_;
  bool training_ = true;
};

class Sequential : public ModuleHolder<SequentialImpl> {
 public:
  using ModuleHolder<SequentialImpl>::ModuleHolder;
  Sequential() : ModuleHolder<SequentialImpl>(std::make_shared<SequentialImpl>()) {}
  // seq->slice(...) as a holder.
  Sequential slice(int64_t start, int64_t end, int64_t step = 1) const {
    return Sequential(get()->slice(start, end, step));
  }
};

class ModuleListImpl : public Module {
 public:
  ModuleListImpl() = default;
  template <typename... Ms>
  requires(sizeof...(Ms) > 0) explicit ModuleListImpl(Ms&&... modules) {
    (push_back(std::forward<Ms>(modules)), ...);
  }

  template <typename M>
  requires std::is_base_of_v<Module, M>
  void push_back(std::shared_ptr<M> module) {
    FERRY_CHECK(module != nullptr, "ModuleList::push_back: the module is null");
    register_module(std::to_string(modules_.size()), module);
    modules_.push_back(std::move(module));
  }
  template <typename M>
  void push_back(ModuleHolder<M> holder) {
    push_back(holder.ptr());
  }

  size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  std::shared_ptr<Module> operator[](int64_t index) const { return ptr(index); }
  std::shared_ptr<Module> ptr(int64_t index) const;
  template <typename M>
  M& at(int64_t index) const {
    auto* m = dynamic_cast<M*>(ptr(index).get());
    FERRY_CHECK(m != nullptr, "ModuleList::at: the module at index ", index, " is a ",
                ptr(index)->name(), ", not the type asked for");
    return *m;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};
FERRY_MODULE(ModuleList);

}  // namespace ferry::nn
