// OperatorHandle: a registered operator, found by name, and TypedOperatorHandle<Sig>, its typed
// form that computes a call's key set and runs the kernel. The typed call path is inline and
// takes no lock, allocates nothing and hashes nothing: one key-set computation, one masked
// table index, one indirect call (Note [The hot path]). A handle stays valid for the life of
// the process; a typed handle is valid while its operator's signature is the one it checked.
#pragma once

#include <string>
#include <utility>

#include "ferry/dispatch/dispatch_key_extractor.h"
#include "ferry/dispatch/ivalue.h"
#include "ferry/dispatch/kernel_function.h"
#include "ferry/dispatch/operator_entry.h"

namespace ferry {

template <typename Signature>
class TypedOperatorHandle;

class OperatorHandle {
 public:
  // "ferry::copy_"
  const std::string& name() const { return entry_->name(); }
  bool has_schema() const { return entry_->schema() != nullptr; }
  // Raises ferry::Error when the operator has no definition (its def was deregistered).
  const FunctionSchema& schema() const;

  // The typed form. Raises ferry::Error naming both signatures when Signature differs from the
  // C++ signature of the operator's kernels (or of an earlier typed()), or does not fit the
  // schema; the first typed() or typed kernel fixes the operator's C++ signature for good.
  template <typename Signature>
  TypedOperatorHandle<Signature> typed() const {
    check_and_fix_signature(CppSignature::of<Signature>());
    return TypedOperatorHandle<Signature>(entry_);
  }

  // Boxed calls: the arguments are the last N values on the stack (N from the schema); they
  // are replaced by the results.
  void call_boxed(Stack* stack) const;
  // Runs the kernel for `ks` as given (masked only by the operator's fallthrough keys): what a
  // boxed fallback does to hand the call down, with ks.remove_above(its key).
  void redispatch_boxed(DispatchKeySet ks, Stack* stack) const;

  // The cell that serves key k now (for tests and introspection).
  bool has_kernel(DispatchKey k) const;

  friend bool operator==(const OperatorHandle& a, const OperatorHandle& b) {
    return a.entry_ == b.entry_;
  }

 protected:
  explicit OperatorHandle(detail::OperatorEntry* entry) : entry_(entry) {}
  void check_and_fix_signature(const CppSignature& sig) const;

  detail::OperatorEntry* entry_;

  friend class Dispatcher;
};

namespace detail {

// Raises NotImplementedError: "<op>: no kernel for key Sim; kernels are registered for CPU".
[[noreturn]] void report_missing_kernel(const OperatorHandle& op, DispatchKeySet ks);

template <typename R, typename... Args>
R call_kernel(const OperatorHandle& op, const OperatorEntry& e, DispatchKeySet ks, Args&&... args);

// Everything but a typed kernel: fallthrough (go on below), missing (raise), boxed (box the
// arguments, run, unbox the results). Out of line so that the fast path stays small.
template <typename R, typename... Args>
[[gnu::noinline]] R call_kernel_slow(const OperatorHandle& op, const OperatorEntry& e,
                                     const KernelEntry& k, DispatchKeySet ks, Args&&... args) {
  switch (k.kind) {
    case KernelKind::Fallthrough:
      if (!ks.empty()) {
        return call_kernel<R, Args...>(op, e, ks.remove(ks.highest_priority_key()),
                                       std::forward<Args>(args)...);
      }
      report_missing_kernel(op, ks);
    case KernelKind::Missing:
      report_missing_kernel(op, ks);
    case KernelKind::Unboxed:
      return reinterpret_cast<R (*)(Args...)>(k.fn)(std::forward<Args>(args)...);
    case KernelKind::UnboxedWithKeys:
      return reinterpret_cast<R (*)(DispatchKeySet, Args...)>(k.fn)(ks,
                                                                    std::forward<Args>(args)...);
    case KernelKind::Boxed:
      break;
  }
  Stack stack;
  stack.reserve(sizeof...(Args));
  (push_param<Args>(stack, args), ...);
  k.boxed(k, op, ks, &stack);
  return pop_result<R, Args...>(op.name(), stack, args...);
}

// Note [The hot path]
// A typed call with a typed kernel is: the tensors' keys (an indexed load each), OR the
// thread's include set, AND NOT its exclude set, AND the operator's non-fallthrough mask,
// count-leading-zeros, one acquire load of the table cell, a compare on the cell's kind and an
// indirect call. Kernels taking a DispatchKeySet receive ks; others do not, and cost the same.
template <typename R, typename... Args>
inline R call_kernel(const OperatorHandle& op, const OperatorEntry& e, DispatchKeySet ks,
                     Args&&... args) {
  const KernelEntry& k = e.lookup(ks);
  if (k.kind == KernelKind::Unboxed) [[likely]] {
    return reinterpret_cast<R (*)(Args...)>(k.fn)(std::forward<Args>(args)...);
  }
  if (k.kind == KernelKind::UnboxedWithKeys) [[likely]] {
    return reinterpret_cast<R (*)(DispatchKeySet, Args...)>(k.fn)(ks, std::forward<Args>(args)...);
  }
  return call_kernel_slow<R, Args...>(op, e, k, ks, std::forward<Args>(args)...);
}

}  // namespace detail

template <typename R, typename... Args>
class TypedOperatorHandle<R(Args...)> : public OperatorHandle {
 public:
  // Computes the call's key set from the arguments and this thread's local sets, and runs the
  // kernel of its highest-priority key.
  R call(Args... args) const {
    const DispatchKeySet ks = dispatch_key_set_of(args...) & entry_->non_fallthrough_keys();
    return detail::call_kernel<R, Args...>(*this, *entry_, ks, std::forward<Args>(args)...);
  }
  // Runs the kernel for `ks`, ignoring the arguments' keys and the local sets: how a kernel at
  // key K hands the call down, op.redispatch(ks.remove_above(K), ...).
  R redispatch(DispatchKeySet ks, Args... args) const {
    return detail::call_kernel<R, Args...>(*this, *entry_, ks & entry_->non_fallthrough_keys(),
                                           std::forward<Args>(args)...);
  }

 private:
  friend class OperatorHandle;
  explicit TypedOperatorHandle(detail::OperatorEntry* entry) : OperatorHandle(entry) {}
};

}  // namespace ferry
