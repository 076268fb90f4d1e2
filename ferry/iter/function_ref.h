// FunctionRef<R(Args...)>: a non-owning reference to a callable, two words wide, as LLVM's and
// c10's function_ref. Loops take their body this way so that handing a lambda to for_each never
// allocates. The referenced callable must outlive the FunctionRef (pass it down, never store it).
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace ferry {

template <typename Fn>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<
                            !std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
                            std::is_invocable_r_v<R, std::remove_reference_t<F>&, Args...>>>
  FunctionRef(F&& f)  // NOLINT: implicit, so that a lambda can be passed directly
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_(&invoke<std::remove_reference_t<F>>) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  template <typename F>
  static R invoke(void* object, Args... args) {
    return (*static_cast<F*>(object))(std::forward<Args>(args)...);
  }

  void* object_;
  R (*call_)(void*, Args...);
};

}  // namespace ferry
