// Boxing: moving typed arguments and results onto an IValue Stack and back, for every C++ type
// an operator signature may use. IValueTraits<T> gives a type's schema name (checked against
// the operator's schema at registration), how to push it and how to read it back. A type
// without traits is a compile error at registration, never a run-time surprise.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/dispatch/ivalue.h"

namespace ferry::detail {

template <typename T>
struct IValueTraits {
  static_assert(sizeof(T) == 0,
                "ferry dispatcher: this type cannot be an operator argument or result; use "
                "Tensor, int64_t, double, bool, Scalar, ScalarType, Device, MemoryFormat, "
                "IntArrayRef, std::vector<int64_t>, ArrayRef<Tensor>, std::vector<Tensor>, "
                "std::string, std::string_view, or std::optional of one of these");
};

#define FERRY_IVALUE_TRAITS(Type, schema_name, read)                 \
  template <>                                                        \
  struct IValueTraits<Type> {                                        \
    static std::string schema_type() { return schema_name; }         \
    static void push(Stack& s, const Type& v) { s.emplace_back(v); } \
    static decltype(auto) get(IValue& v) { return read; }            \
  };
FERRY_IVALUE_TRAITS(Tensor, "Tensor", v.to_tensor())
FERRY_IVALUE_TRAITS(int64_t, "int", v.to_int())
FERRY_IVALUE_TRAITS(double, "float", v.to_double())
FERRY_IVALUE_TRAITS(bool, "bool", v.to_bool())
FERRY_IVALUE_TRAITS(Scalar, "Scalar", v.to_scalar())
FERRY_IVALUE_TRAITS(ScalarType, "ScalarType", v.to_scalar_type())
FERRY_IVALUE_TRAITS(Device, "Device", v.to_device())
FERRY_IVALUE_TRAITS(MemoryFormat, "MemoryFormat", v.to_memory_format())
FERRY_IVALUE_TRAITS(IntArrayRef, "int[]", IntArrayRef(v.to_int_list()))
FERRY_IVALUE_TRAITS(std::vector<int64_t>, "int[]", v.to_int_list())
FERRY_IVALUE_TRAITS(ArrayRef<Tensor>, "Tensor[]", ArrayRef<Tensor>(v.to_tensor_list()))
FERRY_IVALUE_TRAITS(std::vector<Tensor>, "Tensor[]", v.to_tensor_list())
FERRY_IVALUE_TRAITS(std::string, "str", v.to_string())
FERRY_IVALUE_TRAITS(std::string_view, "str", std::string_view(v.to_string()))
#undef FERRY_IVALUE_TRAITS

template <typename T>
struct IValueTraits<std::optional<T>> {
  static std::string schema_type() { return IValueTraits<T>::schema_type() + "?"; }
  static void push(Stack& s, const std::optional<T>& v) {
    if (v.has_value()) {
      IValueTraits<T>::push(s, *v);
    } else {
      s.emplace_back();
    }
  }
  static std::optional<T> get(IValue& v) {
    if (v.is_none()) return std::nullopt;
    return std::optional<T>(IValueTraits<T>::get(v));
  }
};

// ---- parameters ---------------------------------------------------------------------------

// Note [Tensor& round-trips]
// Tensor& is the only non-const reference a signature may take (in-place and out= operators).
// Boxed, it is a copy of the handle (same TensorImpl); a typed kernel called from a stack gets
// a reference to the stack's copy, and a typed caller whose call went through a boxed kernel
// gets back a reference to *its own* argument: the result is matched by identity against the
// caller's Tensor& arguments (pop_result below). So `Tensor& r = op.call(self, ...)` has
// &r == &self whichever way the call went.
template <typename Param>
inline constexpr bool is_boxable_param_v =
    !std::is_lvalue_reference_v<Param> || std::is_const_v<std::remove_reference_t<Param>> ||
    std::is_same_v<Param, Tensor&>;

template <typename Param>
decltype(auto) unbox_param(IValue& v) {
  static_assert(is_boxable_param_v<Param>,
                "ferry dispatcher: only Tensor& may be a non-const reference parameter");
  static_assert(!std::is_rvalue_reference_v<Param>,
                "ferry dispatcher: parameters are values, const references or Tensor&");
  if constexpr (std::is_same_v<Param, Tensor&>) {
    return v.to_tensor_ref();
  } else {
    return IValueTraits<std::remove_cvref_t<Param>>::get(v);
  }
}

template <typename Param>
void push_param(Stack& s, const std::remove_reference_t<Param>& v) {
  IValueTraits<std::remove_cvref_t<Param>>::push(s, v);
}

// ---- results ------------------------------------------------------------------------------

template <typename R>
struct ResultTraits {  // one value
  static constexpr size_t count = 1;
  static_assert(!std::is_reference_v<R> || std::is_same_v<R, Tensor&>,
                "ferry dispatcher: the only reference an operator may return is Tensor&");
  using Held = std::remove_cvref_t<R>;  // what a boxed wrapper keeps while it pops arguments
  static void push(Stack& s, const Held& v) { IValueTraits<Held>::push(s, v); }
  static void schema_types(std::vector<std::string>& out) {
    out.push_back(IValueTraits<Held>::schema_type());
  }
};
template <>
struct ResultTraits<void> {
  static constexpr size_t count = 0;
  static void schema_types(std::vector<std::string>&) {}
};
template <typename... Rs>
struct ResultTraits<std::tuple<Rs...>> {
  static constexpr size_t count = sizeof...(Rs);
  using Held = std::tuple<std::remove_cvref_t<Rs>...>;
  static void push(Stack& s, const Held& v) {
    std::apply([&](const auto&... x) { (ResultTraits<Rs>::push(s, x), ...); }, v);
  }
  static void schema_types(std::vector<std::string>& out) {
    (ResultTraits<Rs>::schema_types(out), ...);
  }
};

[[noreturn]] void fail_result_count(std::string_view op, size_t want, size_t got);
[[noreturn]] void fail_result_alias(std::string_view op, size_t index);

// The caller's Tensor& arguments, in order, for Note [Tensor& round-trips].
template <typename... Args>
auto mutable_tensor_args(Args&... args) {
  std::array<Tensor*, (0 + ... + (std::is_same_v<Args, Tensor&> ? 1 : 0))> out{};
  size_t i = 0;
  auto add = [&]<typename A>(A& a) {
    if constexpr (std::is_same_v<A, Tensor&>) out[i++] = &a;
  };
  (add.template operator()<Args>(args), ...);
  (void)i;
  return out;
}

template <typename R, typename Refs>
R read_result(std::string_view op, IValue& v, size_t index, const Refs& refs) {
  if constexpr (std::is_same_v<R, Tensor&>) {
    const Tensor& got = v.to_tensor();
    for (Tensor* t : refs) {
      if (t->is_same(got)) return *t;
    }
    fail_result_alias(op, index);
  } else {
    return std::remove_cvref_t<R>(IValueTraits<std::remove_cvref_t<R>>::get(v));
  }
}

// Reads a boxed call's results (the whole stack) as R, for a typed caller whose arguments were
// `args`.
template <typename R, typename... Args>
R pop_result(std::string_view op, Stack& stack, Args&... args) {
  constexpr size_t n = ResultTraits<R>::count;
  if (stack.size() != n) fail_result_count(op, n, stack.size());
  if constexpr (std::is_void_v<R>) {
    return;
  } else {
    const auto refs = mutable_tensor_args<Args...>(args...);
    if constexpr (n == 1 && !requires { typename std::tuple_size<R>::type; }) {
      return read_result<R>(op, stack[0], 0, refs);
    } else {
      return [&]<size_t... I>(std::index_sequence<I...>) {
        return R(read_result<std::tuple_element_t<I, R>>(op, stack[I], I, refs)...);
      }
      (std::make_index_sequence<n>());
    }
  }
}

}  // namespace ferry::detail
