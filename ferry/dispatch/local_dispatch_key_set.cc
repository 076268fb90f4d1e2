// The thread-local include/exclude sets and their guards.
#include "ferry/dispatch/local_dispatch_key_set.h"

namespace ferry {
namespace detail {

thread_local constinit RawLocalDispatchKeySet tls_local_dispatch_key_set{};

}  // namespace detail

IncludeDispatchKeyGuard::IncludeDispatchKeyGuard(DispatchKeySet keys) {
  auto& raw = detail::tls_local_dispatch_key_set;
  added_ = keys - DispatchKeySet::from_raw(raw.included);
  raw.included |= added_.raw();
}

IncludeDispatchKeyGuard::~IncludeDispatchKeyGuard() {
  detail::tls_local_dispatch_key_set.included &= ~added_.raw();
}

ExcludeDispatchKeyGuard::ExcludeDispatchKeyGuard(DispatchKeySet keys) {
  auto& raw = detail::tls_local_dispatch_key_set;
  added_ = keys - DispatchKeySet::from_raw(raw.excluded);
  raw.excluded |= added_.raw();
}

ExcludeDispatchKeyGuard::~ExcludeDispatchKeyGuard() {
  detail::tls_local_dispatch_key_set.excluded &= ~added_.raw();
}

}  // namespace ferry
