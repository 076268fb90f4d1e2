// The key set of a call: derived from its tensor arguments, never stored on them, so that
// ferry/core knows nothing about dispatch. A tensor's keys are its device's backend key, plus
// that backend's autograd key when it requires grad; undefined tensors and non-tensor
// arguments contribute nothing. All of it is inline: it runs on every dispatched call.
#pragma once

#include <array>
#include <optional>
#include <type_traits>
#include <vector>

#include "ferry/core/array_ref.h"
#include "ferry/core/tensor.h"
#include "ferry/dispatch/dispatch_key_set.h"
#include "ferry/dispatch/local_dispatch_key_set.h"

namespace ferry {

namespace detail {

// [requires_grad][device type] -> raw key bits: one indexed load per tensor.
inline constexpr auto kTensorKeyBits = [] {
  std::array<std::array<uint64_t, kNumDeviceTypes>, 2> table{};
  for (int d = 0; d < kNumDeviceTypes; ++d) {
    const auto type = static_cast<DeviceType>(d);
    table[0][d] = DispatchKeySet(backend_key(type)).raw();
    table[1][d] = DispatchKeySet({backend_key(type), autograd_key(type)}).raw();
  }
  return table;
}();

}  // namespace detail

inline DispatchKeySet key_set_of(const Tensor& t) {
  if (!t.defined()) return DispatchKeySet();
  const TensorImpl& impl = *t.impl();
  return DispatchKeySet::from_raw(
      detail::kTensorKeyBits[impl.requires_grad()][static_cast<int>(impl.device().type())]);
}

namespace detail {

// What one argument of type T contributes. T is the argument's decayed type.
template <typename T>
struct ArgKeySet {
  static DispatchKeySet get(const T&) { return DispatchKeySet(); }
};
template <>
struct ArgKeySet<Tensor> {
  static DispatchKeySet get(const Tensor& t) { return key_set_of(t); }
};
template <>
struct ArgKeySet<std::optional<Tensor>> {
  static DispatchKeySet get(const std::optional<Tensor>& t) {
    return t.has_value() ? key_set_of(*t) : DispatchKeySet();
  }
};
template <>
struct ArgKeySet<ArrayRef<Tensor>> {
  static DispatchKeySet get(ArrayRef<Tensor> ts) {
    DispatchKeySet ks;
    for (const Tensor& t : ts) ks |= key_set_of(t);
    return ks;
  }
};
template <>
struct ArgKeySet<std::vector<Tensor>> {
  static DispatchKeySet get(const std::vector<Tensor>& ts) {
    return ArgKeySet<ArrayRef<Tensor>>::get(ts);
  }
};

}  // namespace detail

// The union of the arguments' keys (tensors only), before the thread-local sets apply.
template <typename... Args>
DispatchKeySet key_set_of_args(const Args&... args) {
  return (DispatchKeySet() | ... | detail::ArgKeySet<std::remove_cvref_t<Args>>::get(args));
}

// Note [A call's key set]
//   ks = ((tensor keys | kAlwaysIncludedKeys | local included) - local excluded) & mask
// where mask holds the operator's keys that are not fallthrough (Note [Fallthrough is a mask]).
// The kernel at ks.highest_priority_key() runs and receives ks.
inline DispatchKeySet apply_local_key_sets(DispatchKeySet tensor_keys) {
  const auto& local = detail::tls_local_dispatch_key_set;
  return DispatchKeySet::from_raw((tensor_keys.raw() | kAlwaysIncludedKeys.raw() | local.included) &
                                  ~local.excluded);
}

// The key set a call with these arguments starts from on this thread.
template <typename... Args>
DispatchKeySet dispatch_key_set_of(const Args&... args) {
  return apply_local_key_sets(key_set_of_args(args...));
}

}  // namespace ferry
