// Helpers for defining operators: registering one kernel at every backend key, and calling an
// operator by name from a typed front-end with its handle looked up once per call site.
//   FERRY_LIBRARY(ferry, m) {
//     m.def("relu(Tensor self) -> Tensor");
//     impl_backends(m, "relu", &relu_kernel);
//   }
//   Tensor relu(const Tensor& self) { return FERRY_OP("ferry::relu", Tensor(const
//   Tensor&)).call(self); }
#pragma once

#include <string>
#include <string_view>

#include "ferry/dispatch/dispatcher.h"
#include "ferry/dispatch/library.h"

namespace ferry {

// Registers `fn` at CPU, Sim and CUDA: the device-generic kernel of an operator whose device
// work goes through DispatchStubs (or that only does metadata).
template <typename F>
void impl_backends(Library& m, std::string_view op, F fn, std::string name = {}) {
  for (DispatchKey k : {DispatchKey::CPU, DispatchKey::Sim, DispatchKey::CUDA}) {
    m.impl(op, k, fn, name);
  }
}

}  // namespace ferry

// The typed handle of operator `name` (a string literal) with C++ signature `...`, found once.
#define FERRY_OP(name, ...)                                               \
  ([]() -> const ::ferry::TypedOperatorHandle<__VA_ARGS__>& {             \
    static const ::ferry::TypedOperatorHandle<__VA_ARGS__> handle =       \
        ::ferry::Dispatcher::singleton().find(name).typed<__VA_ARGS__>(); \
    return handle;                                                        \
  }())
