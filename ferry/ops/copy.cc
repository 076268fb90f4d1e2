// The copy_ operator: Tensor::copy_ dispatches to copy_impl, which acts on copy_route: the early
// exits, the refusal of self-aliasing destinations, a partly overlapping source copied through a
// temporary, then the iterator handed to the device type's copy_stub kernel. Same-sized
// row-major CPU copies skip the iterator: their CopyProblem is one run, known without building
// anything, which copy_problem_stub runs on the CPU engine.
#include "ferry/ops/copy.h"

#include "ferry/dispatch/library.h"
#include "ferry/iter/copy_stub.h"
#include "ferry/iter/memory_overlap.h"
#include "ferry/ops/factories.h"

namespace ferry {
namespace {

void check_defined(const Tensor& self, const Tensor& src) {
  FERRY_CHECK(self.defined() && src.defined(), "copy_: expected defined tensors, but the ",
              self.defined() ? "source" : "destination", " is undefined");
}

// Views of the same elements with the same meaning: nothing to do (PyTorch's is_same_data).
bool is_same_data(const Tensor& self, const Tensor& src) {
  return self.is_same(src) ||
         (self.is_alias_of(src) && self.storage_offset() == src.storage_offset() &&
          self.sizes().equals(src.sizes()) && self.strides().equals(src.strides()) &&
          self.dtype() == src.dtype() && self.is_conj() == src.is_conj() &&
          self.is_neg() == src.is_neg());
}

// Both on the CPU, same sizes, both row-major, and either disjoint or the same bytes element
// for element (in place). Checked on every copy, so it reads the impls' cached flags only.
bool dense_cpu_applies(const TensorImpl& d, const TensorImpl& s) {
  if (d.device().type() != DeviceType::CPU || s.device().type() != DeviceType::CPU) return false;
  if (!d.is_contiguous() || !s.is_contiguous() || !d.sizes().equals(s.sizes())) return false;
  const int64_t n = d.numel();
  const auto* dst = static_cast<const char*>(d.data());
  const auto* src = static_cast<const char*>(s.data());
  const auto dsize = static_cast<int64_t>(d.itemsize());
  const auto ssize = static_cast<int64_t>(s.itemsize());
  const bool disjoint = n == 0 || dst + n * dsize <= src || src + n * ssize <= dst;
  return disjoint || (dst == src && dsize == ssize);
}

void check_no_internal_overlap(const Tensor& self) {
  FERRY_CHECK(has_internal_overlap(self) != MemOverlap::Yes, "copy_: the destination (sizes ",
              self.sizes(), ", strides ", self.strides(),
              ") has elements that share memory (a dimension of size > 1 with stride 0, as "
              "expand() makes), so the copy would write them more than once; copy into a "
              "clone() of it instead");
}

}  // namespace

const char* copy_route_name(CopyRoute route) {
  switch (route) {
    case CopyRoute::kNothing:
      return "nothing to do";
    case CopyRoute::kDenseCpu:
      return "dense fast path (one run, no iterator)";
    case CopyRoute::kIterator:
      return "iterator, then copy_stub";
    case CopyRoute::kIteratorViaCopy:
      return "source copied to a temporary (partial overlap), then iterator and copy_stub";
  }
  return "?";
}

CopyRoute copy_route(const Tensor& self, const Tensor& src) {
  check_defined(self, src);
  if (is_same_data(self, src)) return CopyRoute::kNothing;
  if (dense_cpu_applies(*self.impl(), *src.impl())) {
    return self.numel() == 0 ? CopyRoute::kNothing : CopyRoute::kDenseCpu;
  }
  check_no_internal_overlap(self);
  return get_overlap_status(self, src) == MemOverlapStatus::Partial ? CopyRoute::kIteratorViaCopy
                                                                    : CopyRoute::kIterator;
}

TensorIterator build_copy_iterator(const Tensor& self, const Tensor& src, IterBuildTrace* trace) {
  return TensorIteratorConfig()
      .add_output(self)
      .add_input(src)
      .resize_outputs(false)
      .check_all_same_dtype(false)
      .check_all_same_device(false)
      .check_mem_overlap(false)  // copy_impl has handled overlap, with its own messages
      .trace(trace)
      .build();
}

CopyProblem dense_copy_problem(const Tensor& self, const Tensor& src) {
  const TensorImpl& d = *self.impl();
  const TensorImpl& s = *src.impl();
  CopyProblem p;
  p.sizes.assign(1, d.numel());
  p.dst_strides.assign(1, static_cast<int64_t>(d.itemsize()));
  p.src_strides.assign(1, static_cast<int64_t>(s.itemsize()));
  p.dst = static_cast<char*>(d.data());
  p.src = static_cast<const char*>(s.data());
  p.dst_dtype = d.dtype();
  p.src_dtype = s.dtype();
  const CopyLazyBits bits =
      copy_lazy_bits(d.dtype(), d.is_conj(), d.is_neg(), s.is_conj(), s.is_neg());
  p.conj = bits.conj;
  p.neg = bits.neg;
  return p;
}

Tensor compact_broadcast(const Tensor& t) {
  DimVector sizes(t.sizes());
  bool broadcast = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (t.strides()[d] == 0 && sizes[d] > 1) {
      sizes[d] = 1;
      broadcast = true;
    }
  }
  return broadcast ? t.as_strided(sizes, t.strides()) : t;
}

Tensor copy_of_source(const Tensor& src) {
  const Tensor compact = compact_broadcast(src);
  // Equal lazy bits make this copy move the stored values as they are, which keeps the final
  // copy's order "convert, then conj/neg" (resolving neg first would differ, e.g. uint8 -> f32).
  Tensor tmp = empty(compact.sizes(), TensorOptions(src.dtype()).device(src.device()));
  if (src.is_conj()) tmp = tmp.conj();
  if (src.is_neg()) tmp = tmp._neg_view();
  copy_impl(tmp, compact, /*non_blocking=*/false);
  return tmp.expand(src.sizes());
}

// Acts on the route copy_route gives (which `ferry explain` prints), so the two cannot drift.
Tensor& copy_impl(Tensor& self, const Tensor& src, bool non_blocking) {
  const CopyRoute route = copy_route(self, src);  // raises for undefined or self-aliasing dst
  self.impl()->bump_version();
  switch (route) {
    case CopyRoute::kNothing:
      return self;
    case CopyRoute::kDenseCpu:
      copy_problem_stub(DeviceType::CPU, dense_copy_problem(self, src));
      return self;
    case CopyRoute::kIterator:
    case CopyRoute::kIteratorViaCopy:
      break;
  }
  // PyTorch refuses a partly overlapping source; reading it from a copy gives the result a
  // user means (the source's values before the copy) at the cost of one temporary.
  const Tensor source = route == CopyRoute::kIteratorViaCopy ? copy_of_source(src) : src;
  TensorIterator iter = build_copy_iterator(self, source);
  if (iter.numel() == 0) return self;
  // A non-CPU side wins: its kernel knows how to reach host memory, not the other way round.
  DeviceType type = iter.device_type(0);
  if (iter.device_type(1) != DeviceType::CPU) type = iter.device_type(1);
  copy_stub(type, iter, non_blocking);
  return self;
}

Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) {
  check_defined(*this, src);
  static const auto op =
      Dispatcher::singleton().find("ferry::copy_").typed<Tensor&(Tensor&, const Tensor&, bool)>();
  return op.call(*this, src, non_blocking);
}

// copy_impl is generic: the device type only matters in copy_stub, so every backend key serves
// it, and a device with no copy_stub kernel yet says so from copy_stub. The device work may
// register its own kernels at Sim/CUDA; a newer registration shadows these.
FERRY_LIBRARY(ferry, m) { m.def(kCopySchema); }
FERRY_LIBRARY_IMPL(ferry, CPU, m) { m.impl("copy_", &copy_impl, "copy_impl"); }
FERRY_LIBRARY_IMPL(ferry, Sim, m) { m.impl("copy_", &copy_impl, "copy_impl"); }
FERRY_LIBRARY_IMPL(ferry, CUDA, m) { m.impl("copy_", &copy_impl, "copy_impl"); }

Tensor& Tensor::operator=(const Tensor& src) && {
  copy_(src);
  return *this;
}

Tensor& Tensor::operator=(const Scalar& value) && {
  fill_(value);
  return *this;
}

}  // namespace ferry
