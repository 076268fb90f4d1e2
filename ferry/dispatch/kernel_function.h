// What a dispatch table cell holds. A KernelEntry is immutable once published: the table swaps
// pointers to entries, never edits one, and entries are never freed while the dispatcher lives
// (Note [Entries are immortal]), so a call racing with registration sees an old entry or a new
// one, both whole. Also: CppSignature, the checked C++ type of an operator's typed calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

#include "ferry/dispatch/boxing.h"
#include "ferry/dispatch/dispatch_key_set.h"
#include "ferry/dispatch/function_schema.h"
#include "ferry/dispatch/ivalue.h"

namespace ferry {

class OperatorHandle;

// A boxed kernel or fallback. Its arguments are the last N values of the stack (N = the
// operator's argument count); it pops them and pushes its results. `ks` is the call's key set,
// for redispatching: op.redispatch_boxed(ks.remove_above(my_key), stack).
using BoxedKernelFn = void (*)(const OperatorHandle& op, DispatchKeySet ks, Stack* stack);

// The C++ function type of an operator's typed calls, with the leading DispatchKeySet of a
// kernel that takes one stripped: "ferry::Tensor& (ferry::Tensor&, ferry::Tensor const&, bool)".
class CppSignature {
 public:
  struct Type {
    std::string schema_type;   // what the schema must say: "Tensor", "int[]", "Scalar?"
    bool mutable_ref = false;  // Tensor&
  };

  template <typename Fn>
  static CppSignature of() {
    return of_impl(static_cast<Fn*>(nullptr));
  }

  const std::string& name() const { return name_; }
  const std::vector<Type>& arguments() const { return arguments_; }
  const std::vector<Type>& results() const { return results_; }
  friend bool operator==(const CppSignature& a, const CppSignature& b) {
    return a.type_ == b.type_;
  }

 private:
  template <typename R, typename... Args>
  static CppSignature of_impl(R (*)(Args...)) {
    CppSignature s;
    s.type_ = typeid(R(Args...));
    s.name_ = demangled_name(typeid(R(Args...)).name());
    (s.arguments_.push_back({detail::IValueTraits<std::remove_cvref_t<Args>>::schema_type(),
                             std::is_same_v<Args, Tensor&>}),
     ...);
    std::vector<std::string> results;
    detail::ResultTraits<R>::schema_types(results);
    for (auto& r : results) s.results_.push_back({std::move(r), false});
    if constexpr (std::is_same_v<R, Tensor&>) s.results_[0].mutable_ref = true;
    return s;
  }
  static std::string demangled_name(const char* mangled);

  std::type_index type_ = typeid(void);
  std::string name_;
  std::vector<Type> arguments_;
  std::vector<Type> results_;
};

// Raises ferry::Error unless a typed call with `sig` can implement `schema`: same argument and
// result counts, each C++ type the schema's type, Tensor& exactly where the schema writes
// (Tensor(a!)), a Tensor& result only for an aliased result. The message names `op`, both
// signatures and the first difference.
void check_signature_matches_schema(std::string_view op, const CppSignature& sig,
                                    const FunctionSchema& schema);

// Function pointer types a kernel may have, and what they say about it.
template <typename F>
struct KernelTraits {
  static_assert(sizeof(F) == 0,
                "ferry dispatcher: a kernel is a function pointer (or a captureless lambda), "
                "R(Args...) or R(DispatchKeySet, Args...)");
};
template <typename R, typename... Args>
struct KernelTraits<R (*)(Args...)> {
  using Signature = R(Args...);
  using Pointer = R (*)(Args...);
  static constexpr bool takes_keys = false;
};
template <typename R, typename... Args>
struct KernelTraits<R (*)(DispatchKeySet, Args...)> {
  using Signature = R(Args...);
  using Pointer = R (*)(DispatchKeySet, Args...);
  static constexpr bool takes_keys = true;
};
template <typename R, typename... Args>
struct KernelTraits<R (*)(Args...) noexcept> : KernelTraits<R (*)(Args...)> {};

// A function, function pointer or captureless lambda as a plain function pointer.
template <typename F>
auto as_function_pointer(F f) {
  if constexpr (std::is_pointer_v<F>) {
    return f;
  } else {
    return +f;  // a captureless lambda converts; a capturing one fails to compile here
  }
}

namespace detail {

enum class KernelKind : uint8_t {
  Missing,          // nothing registered: calling raises NotImplementedError
  Fallthrough,      // skip this key: go on with the next one down
  Unboxed,          // typed kernel R(Args...)
  UnboxedWithKeys,  // typed kernel R(DispatchKeySet, Args...)
  Boxed,            // BoxedKernelFn (a boxed kernel, or a backend fallback)
};

struct KernelEntry;
using InternalBoxedFn = void (*)(const KernelEntry& e, const OperatorHandle& op, DispatchKeySet ks,
                                 Stack* stack);

// Note [Entries are immortal]
// A call loads a table cell and then reads the entry it points to, with no lock; the entry
// must outlive any call that may have loaded it. Registration is rare and an entry is small,
// so entries are kept for the dispatcher's lifetime, and identical ones (same function, same
// kind) are shared, which bounds the memory of register/deregister cycles.
struct KernelEntry {
  KernelKind kind = KernelKind::Missing;
  bool is_fallback = false;         // a backend fallback rather than this operator's own kernel
  void (*fn)() = nullptr;           // the registered function, type-erased (Unboxed*, Boxed)
  InternalBoxedFn boxed = nullptr;  // runs this entry on a stack; set for every kind
  std::optional<CppSignature> signature;  // Unboxed*: the kernel's (normalized) signature
  std::string name;                       // for messages and `ferry ops`

  bool same_as(const KernelEntry& o) const {
    return kind == o.kind && is_fallback == o.is_fallback && fn == o.fn && boxed == o.boxed &&
           name == o.name;
  }
};

[[noreturn]] void fail_stack_size(const OperatorHandle& op, size_t want, size_t got);

// The boxed form of a typed kernel, so that a boxed fallback can redispatch into it.
template <bool WithKeys, typename R, typename... Args>
void boxed_wrapper(const KernelEntry& e, const OperatorHandle& op, DispatchKeySet ks,
                   Stack* stack) {
  constexpr size_t n = sizeof...(Args);
  if (stack->size() < n) fail_stack_size(op, n, stack->size());
  IValue* base = stack->data() + (stack->size() - n);
  auto invoke = [&]<size_t... I>(std::index_sequence<I...>)->R {
    if constexpr (WithKeys) {
      return reinterpret_cast<R (*)(DispatchKeySet, Args...)>(e.fn)(ks,
                                                                    unbox_param<Args>(base[I])...);
    } else {
      return reinterpret_cast<R (*)(Args...)>(e.fn)(unbox_param<Args>(base[I])...);
    }
  };
  (void)base;
  (void)ks;
  if constexpr (std::is_void_v<R>) {
    invoke(std::index_sequence_for<Args...>());
    stack->resize(stack->size() - n);
  } else {
    typename ResultTraits<R>::Held result = invoke(std::index_sequence_for<Args...>());
    stack->resize(stack->size() - n);
    ResultTraits<R>::push(*stack, result);
  }
}

template <bool WithKeys, typename Signature>
struct BoxedWrapperOf;
template <bool WithKeys, typename R, typename... Args>
struct BoxedWrapperOf<WithKeys, R(Args...)> {
  static constexpr InternalBoxedFn value = &boxed_wrapper<WithKeys, R, Args...>;
};

// An entry for a typed kernel F (function pointer type, with or without leading keys).
template <typename F>
KernelEntry make_unboxed_entry(F fn, std::string name) {
  using Traits = KernelTraits<F>;
  typename Traits::Pointer p = fn;
  KernelEntry e;
  e.kind = Traits::takes_keys ? KernelKind::UnboxedWithKeys : KernelKind::Unboxed;
  e.fn = reinterpret_cast<void (*)()>(p);
  e.boxed = BoxedWrapperOf<Traits::takes_keys, typename Traits::Signature>::value;
  e.signature = CppSignature::of<typename Traits::Signature>();
  e.name = std::move(name);
  return e;
}

}  // namespace detail
}  // namespace ferry
