// The thread-local include and exclude sets, and the RAII guards that change them.
// Invariant: a call's key set is (tensor keys | always-included | included) - excluded, so a key
// in both local sets is excluded. Guards change only the keys they added or removed and put
// exactly those back on exit (also when unwinding), so they nest in any order.
#pragma once

#include <cstdint>

#include "ferry/dispatch/dispatch_key_set.h"

namespace ferry {

struct LocalDispatchKeySet {
  DispatchKeySet included;
  DispatchKeySet excluded;
  friend bool operator==(const LocalDispatchKeySet&, const LocalDispatchKeySet&) = default;
};

namespace detail {

// Plain words, zero-initialized, so that reading them needs no thread_local init guard: every
// dispatched call reads both.
struct RawLocalDispatchKeySet {
  uint64_t included = 0;
  uint64_t excluded = 0;
};
// Note [Local key sets and the TLS model]
// libferry is also dlopen'ed (by the Python module), so its thread-locals must not be
// initial-exec: that marks the whole library STATIC_TLS, and its TLS block then takes most of
// glibc's small static TLS surplus, so that a library loaded after it (torch's libGLdispatch)
// fails with "cannot allocate memory in static TLS block". Instead ferry's PIC code is built with
// TLS descriptors (-mtls-dialect=gnu2, cmake/FerryOptions.cmake): for a library loaded at start
// a read is a call that returns a constant offset, not a __tls_get_addr lookup, and a dlopen'ed
// one gets dynamic TLS.
extern thread_local constinit RawLocalDispatchKeySet tls_local_dispatch_key_set;

}  // namespace detail

inline LocalDispatchKeySet local_dispatch_key_set() {
  const auto& raw = detail::tls_local_dispatch_key_set;
  return {DispatchKeySet::from_raw(raw.included), DispatchKeySet::from_raw(raw.excluded)};
}
// Replaces this thread's sets; for propagating dispatch state to a worker thread.
inline void set_local_dispatch_key_set(LocalDispatchKeySet s) {
  detail::tls_local_dispatch_key_set = {s.included.raw(), s.excluded.raw()};
}

// Adds keys to this thread's include set for the guard's lifetime. Tracing is turned on this
// way: nothing on a tensor says "trace me", so the thread says it.
class IncludeDispatchKeyGuard {
 public:
  explicit IncludeDispatchKeyGuard(DispatchKey k) : IncludeDispatchKeyGuard(DispatchKeySet(k)) {}
  explicit IncludeDispatchKeyGuard(DispatchKeySet keys);
  IncludeDispatchKeyGuard(const IncludeDispatchKeyGuard&) = delete;
  IncludeDispatchKeyGuard& operator=(const IncludeDispatchKeyGuard&) = delete;
  ~IncludeDispatchKeyGuard();

 private:
  DispatchKeySet added_;  // the keys this guard added (not those already present)
};

// Adds keys to this thread's exclude set for the guard's lifetime: how a kernel keeps the
// calls it makes from coming back to its own key (autograd inside autograd, tracing inside
// tracing).
class ExcludeDispatchKeyGuard {
 public:
  explicit ExcludeDispatchKeyGuard(DispatchKey k) : ExcludeDispatchKeyGuard(DispatchKeySet(k)) {}
  explicit ExcludeDispatchKeyGuard(DispatchKeySet keys);
  ExcludeDispatchKeyGuard(const ExcludeDispatchKeyGuard&) = delete;
  ExcludeDispatchKeyGuard& operator=(const ExcludeDispatchKeyGuard&) = delete;
  ~ExcludeDispatchKeyGuard();

 private:
  DispatchKeySet added_;
};

// Sets both local sets for the guard's lifetime and restores the previous ones exactly: for
// running work on behalf of another thread with that thread's dispatch state.
class ForceDispatchKeyGuard {
 public:
  explicit ForceDispatchKeyGuard(LocalDispatchKeySet s) : saved_(local_dispatch_key_set()) {
    set_local_dispatch_key_set(s);
  }
  ForceDispatchKeyGuard(const ForceDispatchKeyGuard&) = delete;
  ForceDispatchKeyGuard& operator=(const ForceDispatchKeyGuard&) = delete;
  ~ForceDispatchKeyGuard() { set_local_dispatch_key_set(saved_); }

 private:
  LocalDispatchKeySet saved_;
};

}  // namespace ferry
