// ModuleHolder and FERRY_MODULE: torch::nn::ModuleHolder and TORCH_MODULE for ferry. A holder is
// a std::shared_ptr to a module with pointer syntax, so `auto net = MyNet(3, 4); net->to(dev);
// net(x);` reads as PyTorch's C++ frontend. Copying a holder shares the module. A holder is
// empty only when built from nullptr; the default constructor builds the module with its
// default constructor.
#pragma once

#include <cstddef>
#include <memory>
#include <ostream>
#include <type_traits>
#include <utility>

#include "ferry/core/error.h"
#include "ferry/nn/module.h"

namespace ferry::nn {

template <typename Contained>
class ModuleHolder {
 public:
  using ContainedType = Contained;

  // Builds Contained() (only for default-constructible modules).
  ModuleHolder() requires std::is_default_constructible_v<Contained>
      : impl_(std::make_shared<Contained>()) {}
  // An empty holder, to be assigned later.
  ModuleHolder(std::nullptr_t) {}  // NOLINT(google-explicit-constructor)
  // Forwards the arguments to Contained's constructor.
  template <typename Head, typename... Tail>
  requires(!std::is_same_v<std::decay_t<Head>, ModuleHolder> &&
           !std::is_same_v<std::decay_t<Head>, std::nullptr_t> &&
           !std::is_convertible_v<Head, std::shared_ptr<Contained>> &&
           std::is_constructible_v<Contained, Head, Tail...>) explicit ModuleHolder(Head&& head,
                                                                                    Tail&&... tail)
      : impl_(std::make_shared<Contained>(std::forward<Head>(head), std::forward<Tail>(tail)...)) {}
  // Adopts an existing module.
  ModuleHolder(std::shared_ptr<Contained> module)  // NOLINT(google-explicit-constructor)
      : impl_(std::move(module)) {}

  explicit operator bool() const noexcept { return !is_empty(); }
  bool is_empty() const noexcept { return impl_ == nullptr; }

  Contained* operator->() { return get(); }
  const Contained* operator->() const { return get(); }
  Contained& operator*() { return *get(); }
  const Contained& operator*() const { return *get(); }
  const std::shared_ptr<Contained>& ptr() const {
    check();
    return impl_;
  }
  Contained* get() {
    check();
    return impl_.get();
  }
  const Contained* get() const {
    check();
    return impl_.get();
  }

  // Calls the module's forward.
  template <typename... Args>
  decltype(auto) operator()(Args&&... args) {
    return get()->forward(std::forward<Args>(args)...);
  }
  // Indexes the module (Sequential, ModuleList).
  template <typename Arg>
  decltype(auto) operator[](Arg&& arg) {
    return (*get())[std::forward<Arg>(arg)];
  }

 private:
  void check() const {
    FERRY_CHECK(impl_ != nullptr,
                "Accessing empty ModuleHolder (a holder built from nullptr and "
                "not assigned a module)");
  }

  std::shared_ptr<Contained> impl_;
};

template <typename Contained>
std::ostream& operator<<(std::ostream& stream, const ModuleHolder<Contained>& holder) {
  return stream << *holder;
}

}  // namespace ferry::nn

// FERRY_MODULE(Linear) declares `class Linear`, a ModuleHolder of `LinearImpl` (TORCH_MODULE).
// (The implicit default constructor builds the module when ImplType has a default constructor.)
#define FERRY_MODULE_IMPL(Name, ImplType)                    \
  class Name : public ::ferry::nn::ModuleHolder<ImplType> {  \
   public:                                                   \
    using ::ferry::nn::ModuleHolder<ImplType>::ModuleHolder; \
    using Impl = ImplType;                                   \
  }
#define FERRY_MODULE(Name) FERRY_MODULE_IMPL(Name, Name##Impl)
