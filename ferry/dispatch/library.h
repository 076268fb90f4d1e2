// Library: registrations grouped by operator namespace (and dispatch key), and the macros that
// make them from a .cc file at load time, like TORCH_LIBRARY / TORCH_LIBRARY_IMPL:
//   FERRY_LIBRARY(ferry, m) { m.def("copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) ->
//   Tensor(a!)"); } FERRY_LIBRARY_IMPL(ferry, CPU, m) { m.impl("copy_", &copy_cpu); }
//   FERRY_LIBRARY_IMPL(_, Tracing, m) { m.fallback(&tracing_fallback, "tracing"); }
// A Library owns its handles (destroying it deregisters everything it registered); the
// macros' libraries keep theirs for the life of the program.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/dispatch/dispatcher.h"

namespace ferry {

class Library {
 public:
  // `ns` qualifies the operator names given to def/impl ("copy_" -> "ferry::copy_"); "_" is for
  // libraries that register only fallbacks. `key` is where impl(name, fn) and fallback(fn)
  // register.
  explicit Library(std::string ns, std::optional<DispatchKey> key = std::nullopt);
  Library(Library&&) = default;
  Library& operator=(Library&&) = default;

  // A schema with or without the namespace; with it, the namespace must be this library's.
  Library& def(std::string_view schema);

  template <typename F>
  Library& impl(std::string_view op, F fn, std::string name = {}) {
    return impl(op, required_key("impl"), fn, std::move(name));
  }
  template <typename F>
  Library& impl(std::string_view op, DispatchKey key, F fn, std::string name = {}) {
    handles_.push_back(Dispatcher::singleton().impl(qualify(op), key, fn, std::move(name)));
    return *this;
  }
  Library& impl_boxed(std::string_view op, BoxedKernelFn fn, std::string name = {});
  Library& impl_boxed(std::string_view op, DispatchKey key, BoxedKernelFn fn,
                      std::string name = {});
  Library& impl_fallthrough(std::string_view op);

  Library& fallback(BoxedKernelFn fn, std::string name);
  Library& fallback_fallthrough();

  const std::string& ns() const { return ns_; }
  std::optional<DispatchKey> key() const { return key_; }
  // How many registrations this library holds.
  size_t size() const { return handles_.size(); }
  // Deregisters everything, newest first.
  void reset();
  // Keeps every registration for the life of the program.
  void release();

 private:
  std::string qualify(std::string_view op) const;
  DispatchKey required_key(const char* what) const;

  std::string ns_;
  std::optional<DispatchKey> key_;
  std::vector<RegistrationHandle> handles_;
};

namespace detail {

// Runs `init` on a fresh Library at load time and keeps its registrations. A registration that
// fails prints the error with the macro's file and line and aborts: it is a bug in the build,
// and no later call could work.
class StaticLibrary {
 public:
  StaticLibrary(const char* ns, std::optional<DispatchKey> key, void (*init)(Library&),
                const char* file, int line);
};

}  // namespace detail
}  // namespace ferry

#define FERRY_DISPATCH_CONCAT_INNER(a, b) a##b
#define FERRY_DISPATCH_CONCAT(a, b) FERRY_DISPATCH_CONCAT_INNER(a, b)

// Defines the operators of namespace `ns`; `m` is the Library. Several blocks may define
// operators of one namespace.
#define FERRY_LIBRARY(ns, m) FERRY_LIBRARY_UID_(ns, m, __COUNTER__)
#define FERRY_LIBRARY_UID_(ns, m, uid) FERRY_LIBRARY_UID2_(ns, m, uid)
#define FERRY_LIBRARY_UID2_(ns, m, uid)                                                           \
  static void FERRY_DISPATCH_CONCAT(ferry_library_init_##ns##_, uid)(::ferry::Library&);          \
  static const ::ferry::detail::StaticLibrary FERRY_DISPATCH_CONCAT(                              \
      ferry_library_static_##ns##_, uid)(#ns, std::nullopt,                                       \
                                         &FERRY_DISPATCH_CONCAT(ferry_library_init_##ns##_, uid), \
                                         __FILE__, __LINE__);                                     \
  static void FERRY_DISPATCH_CONCAT(ferry_library_init_##ns##_, uid)(::ferry::Library & m)

// Registers kernels of namespace `ns` (or, with ns `_`, fallbacks) at DispatchKey::key.
#define FERRY_LIBRARY_IMPL(ns, key, m) FERRY_LIBRARY_IMPL_UID_(ns, key, m, __COUNTER__)
#define FERRY_LIBRARY_IMPL_UID_(ns, key, m, uid) FERRY_LIBRARY_IMPL_UID2_(ns, key, m, uid)
#define FERRY_LIBRARY_IMPL_UID2_(ns, key, m, uid)                                                \
  static void FERRY_DISPATCH_CONCAT(ferry_library_impl_init_##ns##_##key##_,                     \
                                    uid)(::ferry::Library&);                                     \
  static const ::ferry::detail::StaticLibrary FERRY_DISPATCH_CONCAT(                             \
      ferry_library_impl_static_##ns##_##key##_, uid)(                                           \
      #ns, ::ferry::DispatchKey::key,                                                            \
      &FERRY_DISPATCH_CONCAT(ferry_library_impl_init_##ns##_##key##_, uid), __FILE__, __LINE__); \
  static void FERRY_DISPATCH_CONCAT(ferry_library_impl_init_##ns##_##key##_,                     \
                                    uid)(::ferry::Library & m)
