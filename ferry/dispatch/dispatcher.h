// Dispatcher: the process-wide registry of operators, their kernels per dispatch key and the
// backend fallbacks per key. Registration is thread-safe (one mutex) and returns handles that
// deregister; calls never take the mutex (see operator_handle.h). For each (operator, key) the
// cell is the newest kernel registered there, else the newest fallback for the key, else none.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ferry/dispatch/dispatch_key.h"
#include "ferry/dispatch/dispatch_key_set.h"
#include "ferry/dispatch/function_schema.h"
#include "ferry/dispatch/kernel_function.h"
#include "ferry/dispatch/operator_entry.h"
#include "ferry/dispatch/operator_handle.h"
#include "ferry/dispatch/registration_handle.h"

namespace ferry {

// What serves one (operator, key) cell; for `ferry ops` and tests.
struct DispatchCell {
  enum class Kind {
    None,                 // nothing: a call that lands here raises NotImplementedError
    Kernel,               // the operator's typed kernel
    BoxedKernel,          // the operator's boxed kernel
    Fallthrough,          // the operator's fallthrough kernel
    Fallback,             // the key's boxed backend fallback
    FallthroughFallback,  // the key's fallthrough fallback
  };
  Kind kind = Kind::None;
  std::string name;  // the kernel's or fallback's name; empty for None

  // "kernel", "boxed", "fallthrough", "fallback", "fallthrough", "—" (None)
  std::string_view kind_name() const;
};

struct OperatorInfo {
  std::string name;
  std::optional<std::string> schema;         // none while undefined (kernels may come first)
  std::optional<std::string> cpp_signature;  // once fixed by a typed kernel or typed()
  std::array<DispatchCell, kNumDispatchKeys> cells;
};

class Dispatcher {
 public:
  // The process's dispatcher. It is never destroyed, so static registrations and handles may
  // outlive main().
  static Dispatcher& singleton();

  // Defines an operator from its schema (which must be qualified: "ferry::copy_(...) -> ...").
  // Raises ferry::Error when the schema is malformed, the name is defined already, or kernels
  // registered before it have a signature the schema does not fit.
  RegistrationHandle def(std::string_view schema);

  // Registers a typed kernel for `op` at `key`: a function pointer or captureless lambda,
  // R(Args...) or R(DispatchKeySet, Args...). The name shows in `ferry ops` and errors (default:
  // the function's symbol when the dynamic linker knows it). Raises ferry::Error naming both
  // signatures when the C++ signature differs from the operator's or does not fit its schema.
  // A newer registration at the same (op, key) shadows an older one until it is deregistered.
  template <typename F>
  RegistrationHandle impl(std::string_view op, DispatchKey key, F fn, std::string name = {}) {
    auto p = as_function_pointer(fn);
    if (name.empty()) name = symbol_name(reinterpret_cast<void (*)()>(p));
    return register_kernel(op, key, detail::make_unboxed_entry(p, std::move(name)));
  }
  // A boxed kernel for one operator: it works on the stack (see BoxedKernelFn).
  RegistrationHandle impl_boxed(std::string_view op, DispatchKey key, BoxedKernelFn fn,
                                std::string name = {});
  // Makes `key` a fallthrough for `op`: calls skip it, as if the key were not in their set.
  RegistrationHandle impl_fallthrough(std::string_view op, DispatchKey key);

  // A backend fallback: serves `key` for every operator without a kernel of its own there.
  RegistrationHandle fallback(DispatchKey key, BoxedKernelFn fn, std::string name);
  // A fallthrough fallback: operators without a kernel at `key` skip it. The autograd keys and
  // BackendSelect have one by default (at the bottom of their stacks, never deregistered).
  RegistrationHandle fallback_fallthrough(DispatchKey key);

  // The operator called `name` ("ferry::copy_"); raises ferry::Error when it is not defined.
  OperatorHandle find(std::string_view name);
  std::optional<OperatorHandle> try_find(std::string_view name);

  // Every operator that has a definition or a kernel, sorted by name.
  std::vector<OperatorInfo> describe();
  // What serves each key for an operator that has no kernel there.
  std::array<DispatchCell, kNumDispatchKeys> describe_fallbacks();

  // The keys at which `op` has a kernel of its own (fallthrough kernels included).
  DispatchKeySet keys_with_kernels(const OperatorHandle& op);

 private:
  friend class OperatorHandle;

  Dispatcher();
  static std::string symbol_name(void (*fn)());

  RegistrationHandle register_kernel(std::string_view op, DispatchKey key,
                                     detail::KernelEntry entry);
  RegistrationHandle register_fallback(DispatchKey key, detail::KernelEntry entry);
  detail::OperatorEntry& entry_for(std::string_view name);  // creates; mutex held
  const detail::KernelEntry* intern(std::vector<std::unique_ptr<detail::KernelEntry>>& pool,
                                    detail::KernelEntry entry);
  void recompute(detail::OperatorEntry& op, DispatchKey key);  // mutex held
  void check_and_fix_signature(detail::OperatorEntry& op, const CppSignature& sig);
  DispatchCell describe_cell(const detail::KernelEntry& e) const;

  std::mutex mutex_;
  std::unordered_map<std::string, std::unique_ptr<detail::OperatorEntry>> operators_;
  struct FallbackRegistration {
    uint64_t id;
    const detail::KernelEntry* entry;
  };
  std::array<std::vector<FallbackRegistration>, kNumDispatchKeys> fallbacks_;  // newest last
  std::vector<std::unique_ptr<detail::KernelEntry>> fallback_entries_;         // immortal
  detail::KernelEntry missing_;
  detail::KernelEntry fallthrough_kernel_;
  uint64_t next_id_ = 1;
};

}  // namespace ferry
