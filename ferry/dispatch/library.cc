// Library: namespaced registration, and the load-time registration behind the macros.
#include "ferry/dispatch/library.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "ferry/core/error.h"

namespace ferry {

Library::Library(std::string ns, std::optional<DispatchKey> key) : ns_(std::move(ns)), key_(key) {
  FERRY_CHECK(!ns_.empty(),
              "expected a library namespace such as \"ferry\" (or \"_\"), but got "
              "an empty string");
}

std::string Library::qualify(std::string_view op) const {
  FERRY_CHECK(ns_ != "_", "library \"_\" registers only fallbacks, but was asked about operator ",
              op);
  const size_t colons = op.find("::");
  if (colons == std::string_view::npos) return ns_ + "::" + std::string(op);
  FERRY_CHECK(op.substr(0, colons) == ns_, "expected an operator of namespace ", ns_,
              " in library ", ns_, ", but got ", op);
  return std::string(op);
}

DispatchKey Library::required_key(const char* what) const {
  FERRY_CHECK(key_.has_value(), "library ", ns_, ": ", what,
              "() without a key needs a library with a key (FERRY_LIBRARY_IMPL(ns, key, m))");
  return *key_;
}

Library& Library::def(std::string_view schema) {
  const size_t paren = schema.find('(');
  const bool qualified = schema.substr(0, paren).find("::") != std::string_view::npos;
  const std::string text = qualified ? std::string(schema) : ns_ + "::" + std::string(schema);
  if (qualified) qualify(schema.substr(0, paren));  // checks the namespace
  FERRY_CHECK(ns_ != "_", "library \"_\" registers only fallbacks, but was asked to define ",
              schema);
  handles_.push_back(Dispatcher::singleton().def(text));
  return *this;
}

Library& Library::impl_boxed(std::string_view op, BoxedKernelFn fn, std::string name) {
  handles_.push_back(Dispatcher::singleton().impl_boxed(qualify(op), required_key("impl_boxed"), fn,
                                                        std::move(name)));
  return *this;
}

Library& Library::impl_boxed(std::string_view op, DispatchKey key, BoxedKernelFn fn,
                             std::string name) {
  handles_.push_back(Dispatcher::singleton().impl_boxed(qualify(op), key, fn, std::move(name)));
  return *this;
}

Library& Library::impl_fallthrough(std::string_view op) {
  handles_.push_back(
      Dispatcher::singleton().impl_fallthrough(qualify(op), required_key("impl_fallthrough")));
  return *this;
}

Library& Library::fallback(BoxedKernelFn fn, std::string name) {
  handles_.push_back(
      Dispatcher::singleton().fallback(required_key("fallback"), fn, std::move(name)));
  return *this;
}

Library& Library::fallback_fallthrough() {
  handles_.push_back(
      Dispatcher::singleton().fallback_fallthrough(required_key("fallback_fallthrough")));
  return *this;
}

void Library::reset() {
  while (!handles_.empty()) handles_.pop_back();
}

void Library::release() {
  for (auto& h : handles_) h.release();
  handles_.clear();
}

namespace detail {

StaticLibrary::StaticLibrary(const char* ns, std::optional<DispatchKey> key, void (*init)(Library&),
                             const char* file, int line) {
  try {
    Library library(ns, key);
    init(library);
    library.release();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry: static registration at %s:%d failed: %s\n", file, line, e.what());
    std::abort();
  }
}

}  // namespace detail
}  // namespace ferry
