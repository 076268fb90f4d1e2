// cat and stack as dispatched operators (each input copied with copy_ into its slice of a new
// output, so every device and dtype conversion the copy engine knows works here), and split /
// chunk as views (narrow) of their input, whose gradients come from the view operators.
#include <algorithm>
#include <string>

#include "ferry/core/views.h"
#include "ferry/ops/factories.h"
#include "ferry/ops/nn_ops.h"
#include "ferry/ops/op_registration.h"
#include "ferry/ops/type_promotion.h"

namespace ferry {
namespace {

// PyTorch skips 1-d empty tensors in cat whatever their other sizes would have to be.
bool skipped_in_cat(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }

Tensor cat_kernel(ArrayRef<Tensor> tensors, int64_t dim) {
  FERRY_CHECK_AS(ShapeError, !tensors.empty(), "cat: expected a non-empty list of Tensors");
  ResultType promotion;
  const Tensor* ref = nullptr;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    FERRY_CHECK(t.defined(), "cat: expected a defined tensor at position ", i);
    FERRY_CHECK_AS(DeviceError, t.device() == tensors[0].device(),
                   "cat: Expected all tensors to be on the same device, but found at least two "
                   "devices, ",
                   tensors[0].device(), " and ", t.device(), "!");
    promotion.add(t);
    if (skipped_in_cat(t)) continue;
    FERRY_CHECK_AS(ShapeError, t.dim() > 0, "cat: zero-dimensional tensor (at position ", i,
                   ") cannot be concatenated");
    if (ref == nullptr) ref = &t;
  }
  const ScalarType dtype = promotion.result();
  const TensorOptions options = TensorOptions(dtype).device(tensors[0].device());
  if (ref == nullptr) return empty({0}, options);
  const int64_t rank = ref->dim();
  const int64_t d = wrap_dim(dim, rank, "cat dim");
  DimVector sizes(ref->sizes());
  sizes[static_cast<size_t>(d)] = 0;
  std::optional<MemoryFormat> format;
  bool same_format = true;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped_in_cat(t)) continue;
    FERRY_CHECK_AS(ShapeError, t.dim() == rank,
                   "cat: Tensors must have same number of dimensions: got ", rank, " and ",
                   t.dim());
    for (int64_t k = 0; k < rank; ++k) {
      FERRY_CHECK_AS(ShapeError, k == d || t.size(k) == ref->size(k),
                     "cat: Sizes of tensors must match except in dimension ", d, ". Expected size ",
                     ref->size(k), " but got size ", t.size(k), " for tensor number ", i,
                     " in the list.");
    }
    sizes[static_cast<size_t>(d)] += t.size(d);
    const MemoryFormat f = t.suggest_memory_format();
    if (format && *format != f) same_format = false;
    format = f;
  }
  Tensor out =
      empty(sizes, options.memory_format(same_format ? *format : MemoryFormat::Contiguous));
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (skipped_in_cat(t)) continue;
    const int64_t n = t.size(d);
    if (n > 0 && t.numel() > 0) native::slice(out, d, offset, offset + n, 1).copy_(t);
    offset += n;
  }
  return out;
}

Tensor stack_kernel(ArrayRef<Tensor> tensors, int64_t dim) {
  FERRY_CHECK_AS(ShapeError, !tensors.empty(), "stack: expects a non-empty TensorList");
  for (size_t i = 0; i < tensors.size(); ++i) {
    FERRY_CHECK(tensors[i].defined(), "stack: expected a defined tensor at position ", i);
    FERRY_CHECK_AS(ShapeError, tensors[i].sizes().equals(tensors[0].sizes()),
                   "stack expects each tensor to be equal size, but got ", tensors[0].sizes(),
                   " at entry 0 and ", tensors[i].sizes(), " at entry ", i);
  }
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack dim");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(native::unsqueeze(t, d));
  return cat(parts, d);
}

}  // namespace

FERRY_LIBRARY(ferry, m) {
  m.def("cat(Tensor[] tensors, int dim=0) -> Tensor");
  m.def("stack(Tensor[] tensors, int dim=0) -> Tensor");
  impl_backends(m, "cat", &cat_kernel, "cat");
  impl_backends(m, "stack", &stack_kernel, "stack");
}

Tensor cat(ArrayRef<Tensor> tensors, int64_t dim) {
  // Checked before dispatching: an empty list has no device to dispatch on.
  FERRY_CHECK_AS(ShapeError, !tensors.empty(), "cat: expected a non-empty list of Tensors");
  return FERRY_OP("ferry::cat", Tensor(ArrayRef<Tensor>, int64_t)).call(tensors, dim);
}

Tensor stack(ArrayRef<Tensor> tensors, int64_t dim) {
  FERRY_CHECK_AS(ShapeError, !tensors.empty(), "stack: expects a non-empty TensorList");
  return FERRY_OP("ferry::stack", Tensor(ArrayRef<Tensor>, int64_t)).call(tensors, dim);
}

std::vector<Tensor> split(const Tensor& self, int64_t split_size, int64_t dim) {
  FERRY_CHECK_AS(ShapeError, self.dim() != 0, "split: expects at least a 1-dimensional tensor");
  FERRY_CHECK_AS(ShapeError, split_size >= 0,
                 "split: expects split_size be non-negative, but got split_size=", split_size);
  const int64_t d = wrap_dim(dim, self.dim(), "split dim");
  const int64_t size = self.size(d);
  FERRY_CHECK_AS(ShapeError, split_size > 0 || size == 0,
                 "split: split_size can only be 0 if dimension size is 0, but got dimension size "
                 "of ",
                 size);
  // PyTorch returns one (empty) piece for an empty dim.
  const int64_t pieces =
      split_size == 0 ? 1 : std::max<int64_t>((size + split_size - 1) / split_size, 1);
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(pieces));
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t start = i * split_size;
    out.push_back(self.narrow(d, start, std::min(split_size, size - start)));
  }
  return out;
}

std::vector<Tensor> split_with_sizes(const Tensor& self, IntArrayRef split_sizes, int64_t dim) {
  FERRY_CHECK_AS(ShapeError, self.dim() != 0,
                 "split_with_sizes: expects at least a 1-dimensional tensor");
  const int64_t d = wrap_dim(dim, self.dim(), "split dim");
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    FERRY_CHECK_AS(ShapeError, s >= 0,
                   "split_with_sizes: expects split_sizes have only non-negative entries, but got "
                   "split_sizes=",
                   split_sizes);
    total += s;
  }
  FERRY_CHECK_AS(ShapeError, total == self.size(d),
                 "split_with_sizes: expects split_sizes to sum exactly to ", self.size(d),
                 " (input tensor's size at dimension ", d, "), but got split_sizes=", split_sizes);
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : split_sizes) {
    out.push_back(self.narrow(d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& self, int64_t chunks, int64_t dim) {
  FERRY_CHECK_AS(ShapeError, self.dim() != 0, "chunk: expects at least a 1-dimensional tensor");
  FERRY_CHECK_AS(ShapeError, chunks > 0,
                 "chunk: expects `chunks` to be greater than 0, got: ", chunks);
  const int64_t d = wrap_dim(dim, self.dim(), "chunk dim");
  const int64_t size = self.size(d);
  const int64_t split_size = (size + chunks - 1) / chunks;
  // An empty dim with chunks > 1 gives `chunks` empty pieces, as PyTorch.
  if (split_size == 0 && size == 0) {
    std::vector<int64_t> sizes(static_cast<size_t>(chunks), 0);
    return split_with_sizes(self, sizes, d);
  }
  return split(self, split_size, d);
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const {
  return ferry::split(*this, split_size, dim);
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const {
  return ferry::chunk(*this, chunks, dim);
}

}  // namespace ferry
