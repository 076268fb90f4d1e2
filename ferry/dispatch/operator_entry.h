// OperatorEntry (internal): one operator's dispatch table and registrations.
// The table has one cell per key, each an atomic pointer to an immutable KernelEntry, recomputed
// under the dispatcher's mutex whenever a kernel or fallback for that key comes or goes; a call
// reads one cell with no lock. Entries are never destroyed (Note [Entries are immortal]).
#pragma once

#include <array>
#include <atomic>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/dispatch/dispatch_key_set.h"
#include "ferry/dispatch/function_schema.h"
#include "ferry/dispatch/kernel_function.h"

namespace ferry {

class Dispatcher;

namespace detail {

// Note [Fallthrough is a mask]
// A fallthrough cell (an operator's fallthrough kernel, or a fallthrough backend fallback such
// as the default for the autograd keys) means "this key has nothing to do here". Instead of
// calling anything, a call ANDs its key set with the operator's non-fallthrough keys before the
// lookup, so a fallthrough costs one AND and no call. The mask and the table are two atomics
// updated one after the other; a call that reads them across an update may land on a
// fallthrough cell, which then hands the call down by itself (the slow path), so every
// interleaving still runs the right kernel.
class OperatorEntry {
 public:
  explicit OperatorEntry(std::string name);
  OperatorEntry(const OperatorEntry&) = delete;
  OperatorEntry& operator=(const OperatorEntry&) = delete;

  // The cell of ks's highest-priority key: an array index and one acquire load.
  const KernelEntry& lookup(DispatchKeySet ks) const {
    return *table_[static_cast<size_t>(ks.highest_priority_key())].load(std::memory_order_acquire);
  }
  const KernelEntry& cell(DispatchKey k) const { return lookup(DispatchKeySet(k)); }
  DispatchKeySet non_fallthrough_keys() const {
    return DispatchKeySet::from_raw(non_fallthrough_.load(std::memory_order_relaxed));
  }
  const std::string& name() const { return name_; }
  // Null when the operator has no definition (never defined, or its def was deregistered).
  const FunctionSchema* schema() const { return schema_.load(std::memory_order_acquire); }

 private:
  friend class ferry::Dispatcher;

  // Hot: read by every call.
  std::array<std::atomic<const KernelEntry*>, kNumDispatchKeys> table_;
  std::atomic<uint64_t> non_fallthrough_{0};
  std::atomic<const FunctionSchema*> schema_{nullptr};
  const std::string name_;

  // Cold: guarded by the dispatcher's mutex.
  struct Registration {
    uint64_t id;
    const KernelEntry* entry;
  };
  std::array<std::list<Registration>, kNumDispatchKeys> kernels_;  // newest first
  std::vector<std::unique_ptr<KernelEntry>> entries_;              // immortal, shared
  std::vector<std::unique_ptr<FunctionSchema>> schemas_;           // immortal
  std::optional<CppSignature> cpp_signature_;  // fixed by the first typed kernel or typed()
  std::string cpp_signature_source_;           // who fixed it, for messages
};

}  // namespace detail
}  // namespace ferry
