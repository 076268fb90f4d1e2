// The tracing fallback and the thread's current trace.
#include "ferry/dispatch/tracing.h"

#include <optional>

#include "ferry/dispatch/library.h"

namespace ferry {
namespace {

thread_local TraceGuard* current_trace = nullptr;

}  // namespace

TraceGuard::TraceGuard(bool nested)
    : include_(DispatchKey::Tracing), nested_(nested), previous_(current_trace) {
  current_trace = this;
}

TraceGuard::~TraceGuard() { current_trace = previous_; }

void tracing_fallback(const OperatorHandle& op, DispatchKeySet ks, Stack* stack) {
  TraceGuard* trace = current_trace;
  if (trace != nullptr) trace->names_.push_back(op.name());
  // Outermost calls only unless asked: the kernels below run with Tracing excluded.
  std::optional<ExcludeDispatchKeyGuard> no_nested;
  if (trace == nullptr || !trace->nested_) no_nested.emplace(DispatchKey::Tracing);
  op.redispatch_boxed(ks.remove_above(DispatchKey::Tracing), stack);
}

FERRY_LIBRARY_IMPL(_, Tracing, m) { m.fallback(&tracing_fallback, "tracing"); }

}  // namespace ferry
