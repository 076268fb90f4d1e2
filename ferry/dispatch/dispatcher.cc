// The Dispatcher: registration, table recomputation, boxed calls and introspection.
#include "ferry/dispatch/dispatcher.h"

#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "ferry/core/error.h"

namespace ferry {

namespace {

void missing_boxed(const detail::KernelEntry&, const OperatorHandle& op, DispatchKeySet ks,
                   Stack*) {
  detail::report_missing_kernel(op, ks);
}

void fallthrough_boxed(const detail::KernelEntry&, const OperatorHandle& op, DispatchKeySet ks,
                       Stack* stack) {
  if (ks.empty()) detail::report_missing_kernel(op, ks);
  op.redispatch_boxed(ks.remove(ks.highest_priority_key()), stack);
}

void user_boxed(const detail::KernelEntry& e, const OperatorHandle& op, DispatchKeySet ks,
                Stack* stack) {
  reinterpret_cast<BoxedKernelFn>(e.fn)(op, ks, stack);
}

detail::KernelEntry boxed_entry(BoxedKernelFn fn, std::string name, bool is_fallback) {
  detail::KernelEntry e;
  e.kind = detail::KernelKind::Boxed;
  e.is_fallback = is_fallback;
  e.fn = reinterpret_cast<void (*)()>(fn);
  e.boxed = &user_boxed;
  e.name = std::move(name);
  return e;
}

void check_key(DispatchKey key) {
  FERRY_CHECK(key < DispatchKey::EndOfKeys, "expected a dispatch key, but got the value ",
              static_cast<int>(key));
}

}  // namespace

namespace detail {

OperatorEntry::OperatorEntry(std::string name) : name_(std::move(name)) {
  for (auto& cell : table_) cell.store(nullptr, std::memory_order_relaxed);
}

}  // namespace detail

std::string_view DispatchCell::kind_name() const {
  switch (kind) {
    case Kind::None:
      return "—";
    case Kind::Kernel:
      return "kernel";
    case Kind::BoxedKernel:
      return "boxed";
    case Kind::Fallthrough:
    case Kind::FallthroughFallback:
      return "fallthrough";
    case Kind::Fallback:
      return "fallback";
  }
  return "?";
}

Dispatcher& Dispatcher::singleton() {
  static Dispatcher* const dispatcher = new Dispatcher();  // never destroyed, on purpose
  return *dispatcher;
}

Dispatcher::Dispatcher() {
  missing_.kind = detail::KernelKind::Missing;
  missing_.boxed = &missing_boxed;
  fallthrough_kernel_.kind = detail::KernelKind::Fallthrough;
  fallthrough_kernel_.boxed = &fallthrough_boxed;
  fallthrough_kernel_.name = "fallthrough";
  // Note [Default fallthroughs]
  // Operators without an autograd kernel run their backend kernel when tensors require grad
  // (the autograd layer registers kernels where it records graph nodes), and operators
  // without a BackendSelect kernel never see that key. These defaults sit at the bottom of
  // their keys' fallback stacks: a registered fallback shadows them, and its deregistration
  // brings them back.
  detail::KernelEntry ft = fallthrough_kernel_;
  ft.is_fallback = true;
  const detail::KernelEntry* e = intern(fallback_entries_, std::move(ft));
  for (DispatchKey k : DispatchKeySet::autograd() | DispatchKeySet(DispatchKey::BackendSelect)) {
    fallbacks_[static_cast<size_t>(k)].push_back({0, e});
  }
}

std::string Dispatcher::symbol_name(void (*fn)()) {
  Dl_info info{};
  void* address = reinterpret_cast<void*>(fn);
  if (dladdr(address, &info) != 0 && info.dli_sname != nullptr && info.dli_saddr == address) {
    int status = 0;
    char* demangled = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
    std::string name = status == 0 && demangled ? demangled : info.dli_sname;
    std::free(demangled);
    return name;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "kernel@%p", address);
  return buf;
}

detail::OperatorEntry& Dispatcher::entry_for(std::string_view name) {
  auto it = operators_.find(std::string(name));
  if (it != operators_.end()) return *it->second;
  FERRY_CHECK(!name.empty(), "expected an operator name, but got an empty string");
  auto entry = std::make_unique<detail::OperatorEntry>(std::string(name));
  detail::OperatorEntry& op = *entry;
  operators_.emplace(std::string(name), std::move(entry));
  for (int k = 0; k < kNumDispatchKeys; ++k) recompute(op, static_cast<DispatchKey>(k));
  return op;
}

const detail::KernelEntry* Dispatcher::intern(
    std::vector<std::unique_ptr<detail::KernelEntry>>& pool, detail::KernelEntry entry) {
  for (const auto& e : pool) {
    if (e->same_as(entry)) return e.get();
  }
  pool.push_back(std::make_unique<detail::KernelEntry>(std::move(entry)));
  return pool.back().get();
}

void Dispatcher::recompute(detail::OperatorEntry& op, DispatchKey key) {
  const auto k = static_cast<size_t>(key);
  const detail::KernelEntry* e = &missing_;
  if (!op.kernels_[k].empty()) {
    e = op.kernels_[k].front().entry;
  } else if (!fallbacks_[k].empty()) {
    e = fallbacks_[k].back().entry;
  }
  // Table first, then the mask: see Note [Fallthrough is a mask] for why either order of
  // observation is safe.
  op.table_[k].store(e, std::memory_order_release);
  const uint64_t bit = DispatchKeySet(key).raw();
  if (e->kind == detail::KernelKind::Fallthrough) {
    op.non_fallthrough_.fetch_and(~bit, std::memory_order_release);
  } else {
    op.non_fallthrough_.fetch_or(bit, std::memory_order_release);
  }
}

RegistrationHandle Dispatcher::def(std::string_view schema_text) {
  FunctionSchema schema = parse_schema(schema_text);
  const std::string name = schema.qualified_name();
  std::lock_guard lock(mutex_);
  detail::OperatorEntry& op = entry_for(name);
  if (const FunctionSchema* current = op.schema()) {
    FERRY_FAIL_AS(Error, "operator ", name, " is defined already, as ", current->str());
  }
  if (op.cpp_signature_) check_signature_matches_schema(name, *op.cpp_signature_, schema);
  const FunctionSchema* interned = nullptr;
  for (const auto& s : op.schemas_) {
    if (s->str() == schema.str()) interned = s.get();
  }
  if (interned == nullptr) {
    op.schemas_.push_back(std::make_unique<FunctionSchema>(std::move(schema)));
    interned = op.schemas_.back().get();
  }
  op.schema_.store(interned, std::memory_order_release);
  return RegistrationHandle([this, &op, interned] {
    std::lock_guard lock(mutex_);
    if (op.schema() == interned) op.schema_.store(nullptr, std::memory_order_release);
  });
}

RegistrationHandle Dispatcher::register_kernel(std::string_view op_name, DispatchKey key,
                                               detail::KernelEntry entry) {
  check_key(key);
  FERRY_CHECK(key != DispatchKey::Undefined || entry.kind != detail::KernelKind::Fallthrough,
              op_name, ": expected a kernel for the Undefined key, but got a fallthrough (nothing ",
              "lies below Undefined to fall through to)");
  std::lock_guard lock(mutex_);
  detail::OperatorEntry& op = entry_for(op_name);
  if (entry.signature) {
    if (op.cpp_signature_) {
      FERRY_CHECK(*op.cpp_signature_ == *entry.signature, op_name, ": kernel ", entry.name, " for ",
                  key, " has the C++ signature ", entry.signature->name(),
                  ", but the operator's is ", op.cpp_signature_->name(), " (fixed by ",
                  op.cpp_signature_source_, ")");
    } else {
      if (const FunctionSchema* schema = op.schema()) {
        check_signature_matches_schema(op_name, *entry.signature, *schema);
      }
      op.cpp_signature_ = *entry.signature;
      op.cpp_signature_source_ = detail::str_cat("kernel ", entry.name, " for ", key);
    }
  }
  const detail::KernelEntry* e = entry.kind == detail::KernelKind::Fallthrough
                                     ? &fallthrough_kernel_
                                     : intern(op.entries_, std::move(entry));
  const uint64_t id = next_id_++;
  const auto k = static_cast<size_t>(key);
  op.kernels_[k].push_front({id, e});
  recompute(op, key);
  return RegistrationHandle([this, &op, key, k, id] {
    std::lock_guard lock(mutex_);
    op.kernels_[k].remove_if([id](const auto& r) { return r.id == id; });
    recompute(op, key);
  });
}

RegistrationHandle Dispatcher::impl_boxed(std::string_view op, DispatchKey key, BoxedKernelFn fn,
                                          std::string name) {
  FERRY_CHECK(fn != nullptr, op, ": expected a boxed kernel for ", key, ", but got null");
  if (name.empty()) name = symbol_name(reinterpret_cast<void (*)()>(fn));
  return register_kernel(op, key, boxed_entry(fn, std::move(name), false));
}

RegistrationHandle Dispatcher::impl_fallthrough(std::string_view op, DispatchKey key) {
  return register_kernel(op, key, fallthrough_kernel_);
}

RegistrationHandle Dispatcher::register_fallback(DispatchKey key, detail::KernelEntry entry) {
  check_key(key);
  FERRY_CHECK(key != DispatchKey::Undefined || entry.kind != detail::KernelKind::Fallthrough,
              "fallback: expected a kernel for the Undefined key, but got a fallthrough (nothing ",
              "lies below Undefined to fall through to)");
  std::lock_guard lock(mutex_);
  const detail::KernelEntry* e = intern(fallback_entries_, std::move(entry));
  const uint64_t id = next_id_++;
  const auto k = static_cast<size_t>(key);
  fallbacks_[k].push_back({id, e});
  for (auto& [name, op] : operators_) recompute(*op, key);
  return RegistrationHandle([this, key, k, id] {
    std::lock_guard lock(mutex_);
    std::erase_if(fallbacks_[k], [id](const auto& r) { return r.id == id; });
    for (auto& [name, op] : operators_) recompute(*op, key);
  });
}

RegistrationHandle Dispatcher::fallback(DispatchKey key, BoxedKernelFn fn, std::string name) {
  FERRY_CHECK(fn != nullptr, "expected a boxed fallback for ", key, ", but got null");
  if (name.empty()) name = symbol_name(reinterpret_cast<void (*)()>(fn));
  return register_fallback(key, boxed_entry(fn, std::move(name), true));
}

RegistrationHandle Dispatcher::fallback_fallthrough(DispatchKey key) {
  detail::KernelEntry e = fallthrough_kernel_;
  e.is_fallback = true;
  return register_fallback(key, std::move(e));
}

std::optional<OperatorHandle> Dispatcher::try_find(std::string_view name) {
  std::lock_guard lock(mutex_);
  auto it = operators_.find(std::string(name));
  if (it == operators_.end() || it->second->schema() == nullptr) return std::nullopt;
  return OperatorHandle(it->second.get());
}

OperatorHandle Dispatcher::find(std::string_view name) {
  if (auto op = try_find(name)) return *op;
  FERRY_FAIL_AS(Error, "expected a defined operator, but \"", name,
                "\" has no definition (Dispatcher::def or FERRY_LIBRARY registers one)");
}

DispatchCell Dispatcher::describe_cell(const detail::KernelEntry& e) const {
  using Kind = DispatchCell::Kind;
  switch (e.kind) {
    case detail::KernelKind::Missing:
      return {Kind::None, ""};
    case detail::KernelKind::Fallthrough:
      return {e.is_fallback ? Kind::FallthroughFallback : Kind::Fallthrough, e.name};
    case detail::KernelKind::Unboxed:
    case detail::KernelKind::UnboxedWithKeys:
      return {Kind::Kernel, e.name};
    case detail::KernelKind::Boxed:
      return {e.is_fallback ? Kind::Fallback : Kind::BoxedKernel, e.name};
  }
  return {};
}

std::vector<OperatorInfo> Dispatcher::describe() {
  std::lock_guard lock(mutex_);
  std::vector<OperatorInfo> out;
  for (const auto& [name, op] : operators_) {
    bool has_kernels = false;
    for (const auto& list : op->kernels_) has_kernels |= !list.empty();
    if (op->schema() == nullptr && !has_kernels) continue;
    OperatorInfo info;
    info.name = name;
    if (const FunctionSchema* s = op->schema()) info.schema = s->str();
    if (op->cpp_signature_) info.cpp_signature = op->cpp_signature_->name();
    for (int k = 0; k < kNumDispatchKeys; ++k) {
      info.cells[k] = describe_cell(op->cell(static_cast<DispatchKey>(k)));
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(),
            [](const OperatorInfo& a, const OperatorInfo& b) { return a.name < b.name; });
  return out;
}

std::array<DispatchCell, kNumDispatchKeys> Dispatcher::describe_fallbacks() {
  std::lock_guard lock(mutex_);
  std::array<DispatchCell, kNumDispatchKeys> out;
  for (size_t k = 0; k < out.size(); ++k) {
    out[k] = fallbacks_[k].empty() ? DispatchCell{} : describe_cell(*fallbacks_[k].back().entry);
  }
  return out;
}

DispatchKeySet Dispatcher::keys_with_kernels(const OperatorHandle& op) {
  std::lock_guard lock(mutex_);
  DispatchKeySet ks;
  for (size_t k = 0; k < op.entry_->kernels_.size(); ++k) {
    if (!op.entry_->kernels_[k].empty()) ks = ks.add(static_cast<DispatchKey>(k));
  }
  return ks;
}

void Dispatcher::check_and_fix_signature(detail::OperatorEntry& op, const CppSignature& sig) {
  std::lock_guard lock(mutex_);
  if (op.cpp_signature_) {
    FERRY_CHECK(*op.cpp_signature_ == sig, op.name(), ": typed<", sig.name(),
                ">() does not match the operator's C++ signature ", op.cpp_signature_->name(),
                " (fixed by ", op.cpp_signature_source_, ")");
    return;
  }
  if (const FunctionSchema* schema = op.schema()) {
    check_signature_matches_schema(op.name(), sig, *schema);
  }
  op.cpp_signature_ = sig;
  op.cpp_signature_source_ = "typed<" + sig.name() + ">()";
}

// ---- OperatorHandle ---------------------------------------------------------------------------

const FunctionSchema& OperatorHandle::schema() const {
  const FunctionSchema* s = entry_->schema();
  FERRY_CHECK(s != nullptr, name(), ": expected the operator to be defined, but its definition ",
              "was deregistered");
  return *s;
}

bool OperatorHandle::has_kernel(DispatchKey k) const {
  return entry_->cell(k).kind != detail::KernelKind::Missing;
}

void OperatorHandle::check_and_fix_signature(const CppSignature& sig) const {
  Dispatcher::singleton().check_and_fix_signature(*entry_, sig);
}

void OperatorHandle::call_boxed(Stack* stack) const {
  const size_t n = schema().arguments.size();
  if (stack->size() < n) detail::fail_stack_size(*this, n, stack->size());
  DispatchKeySet ks;
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    const IValue& v = (*stack)[i];
    if (v.is_tensor()) {
      ks |= key_set_of(v.to_tensor());
    } else if (v.is_tensor_list()) {
      for (const Tensor& t : v.to_tensor_list()) ks |= key_set_of(t);
    }
  }
  ks = apply_local_key_sets(ks) & entry_->non_fallthrough_keys();
  const detail::KernelEntry& k = entry_->lookup(ks);
  k.boxed(k, *this, ks, stack);
}

void OperatorHandle::redispatch_boxed(DispatchKeySet ks, Stack* stack) const {
  ks = ks & entry_->non_fallthrough_keys();
  const detail::KernelEntry& k = entry_->lookup(ks);
  k.boxed(k, *this, ks, stack);
}

namespace detail {

void report_missing_kernel(const OperatorHandle& op, DispatchKeySet ks) {
  const DispatchKeySet have = Dispatcher::singleton().keys_with_kernels(op);
  std::string listed;
  for (DispatchKey k : have)
    listed += (listed.empty() ? "" : ", ") + std::string(dispatch_key_name(k));
  const DispatchKey key = ks.highest_priority_key();
  const bool empty = key == DispatchKey::Undefined;
  FERRY_FAIL_AS(NotImplementedError, op.name(), ": no kernel for key ", key,
                empty ? " (the call's dispatch key set is empty: no tensor arguments and no "
                        "included key, or all of their keys excluded)"
                      : "",
                have.empty() ? "; no kernels are registered" : "; kernels are registered for ",
                listed, empty ? "" : " (the call's dispatch key set is " + ks.str() + ")");
}

void fail_stack_size(const OperatorHandle& op, size_t want, size_t got) {
  FERRY_FAIL_AS(Error, op.name(), ": expected at least ", want,
                " argument(s) on the stack, but it holds ", got);
}

}  // namespace detail
}  // namespace ferry
