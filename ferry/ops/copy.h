// copy_impl: the backend kernel of the ferry::copy_ operator, shared by every device type (the
// device choice happens below it, in copy_stub). Tensor::copy_ reaches it through the
// Dispatcher; call it directly only from another copy_ kernel that has handled its own concern
// (autograd, a device policy) and hands the plain copy down. The other functions expose
// copy_impl's decisions, without copying, for `ferry explain` and for tests.
#pragma once

#include "ferry/core/tensor.h"
#include "ferry/iter/copy_problem.h"
#include "ferry/iter/tensor_iterator.h"

namespace ferry {

// The schema ferry::copy_ is defined with.
inline constexpr const char* kCopySchema =
    "ferry::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)";

// Copies src into self: early exits, overlap handling, the iterator, copy_stub. See
// docs/copy.md for the semantics.
Tensor& copy_impl(Tensor& self, const Tensor& src, bool non_blocking);

// How copy_impl handles self.copy_(src).
enum class CopyRoute {
  kNothing,          // the same tensor, or views of the same data with the same meaning
  kDenseCpu,         // both on the CPU, same sizes, both row-major: one run, no iterator
  kIterator,         // the iterator, then the device type's copy_stub kernel
  kIteratorViaCopy,  // src partly overlaps self: src is copied to a temporary first
};
const char* copy_route_name(CopyRoute route);

// The route copy_impl takes. Raises, as copy_impl does, for undefined tensors and for a
// destination whose elements share memory.
CopyRoute copy_route(const Tensor& self, const Tensor& src);

// The iterator copy_impl builds (self as output, src as input; dtypes and devices may differ;
// no resizing), with its stages recorded into *trace when given.
TensorIterator build_copy_iterator(const Tensor& self, const Tensor& src,
                                   IterBuildTrace* trace = nullptr);

// The one-run problem of the kDenseCpu route, which copy_problem_stub runs on the CPU engine.
CopyProblem dense_copy_problem(const Tensor& self, const Tensor& src);

// A view of `t` with every broadcast (stride-0) dimension of size above 1 cut to size 1: the
// elements a copy from it actually has to read. Expanding it back to t's sizes gives t.
Tensor compact_broadcast(const Tensor& t);

// The temporary the kIteratorViaCopy route reads from: src's stored values in new memory with
// src's sizes, dtype and lazy bits, broadcast dimensions stored once.
Tensor copy_of_source(const Tensor& src);

}  // namespace ferry
