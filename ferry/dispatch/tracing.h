// Tracing: records the operators called on this thread, by name, while a TraceGuard lives.
// The Tracing key's backend fallback is the canonical boxed fallback: it appends the operator's
// name to the thread's trace and redispatches below itself. By default only the outermost calls
// are recorded (calls made by kernels run with Tracing excluded), as PyTorch's tracer does.
#pragma once

#include <string>
#include <vector>

#include "ferry/dispatch/kernel_function.h"
#include "ferry/dispatch/local_dispatch_key_set.h"

namespace ferry {

class TraceGuard {
 public:
  // nested: also record the calls that kernels make while serving a traced call.
  explicit TraceGuard(bool nested = false);
  TraceGuard(const TraceGuard&) = delete;
  TraceGuard& operator=(const TraceGuard&) = delete;
  ~TraceGuard();

  // The names recorded so far, in call order: "ferry::copy_", ...
  const std::vector<std::string>& names() const { return names_; }

 private:
  IncludeDispatchKeyGuard include_;
  std::vector<std::string> names_;
  bool nested_;
  TraceGuard* previous_;

  friend void tracing_fallback(const OperatorHandle&, DispatchKeySet, Stack*);
};

// The fallback registered at DispatchKey::Tracing (ferry/dispatch/tracing.cc).
void tracing_fallback(const OperatorHandle& op, DispatchKeySet ks, Stack* stack);

}  // namespace ferry
