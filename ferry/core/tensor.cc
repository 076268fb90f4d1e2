// Tensor metadata queries and views. Views build a new TensorImpl over the same Storage;
// nothing here reads or writes elements.
#include "ferry/core/tensor.h"

#include <algorithm>

#include "ferry/core/size_math.h"
#include "ferry/core/views.h"

namespace ferry {

int64_t wrap_dim(int64_t dim, int64_t rank, const char* what) {
  const int64_t r = std::max<int64_t>(rank, 1);
  FERRY_CHECK_AS(IndexError, dim >= -r && dim < r, what, ": expected a value in [", -r, ", ", r - 1,
                 "] for a ", rank, "-d tensor, but got ", dim);
  return dim < 0 ? dim + r : dim;
}

DimVector broadcast_shapes(IntArrayRef a, IntArrayRef b) {
  const size_t rank = std::max(a.size(), b.size());
  DimVector out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const size_t from_end = rank - 1 - i;
    const int64_t sa = from_end < a.size() ? a[a.size() - 1 - from_end] : 1;
    const int64_t sb = from_end < b.size() ? b[b.size() - 1 - from_end] : 1;
    FERRY_CHECK_AS(ShapeError, sa == sb || sa == 1 || sb == 1, "the size of tensor a (", sa,
                   ") must match the size of tensor b (", sb, ") at non-singleton dimension ", i,
                   " (sizes ", a, " and ", b, ")");
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

Tensor make_tensor(Storage storage, ScalarType dtype, IntArrayRef sizes, IntArrayRef strides,
                   int64_t storage_offset) {
  FERRY_CHECK_AS(ShapeError, sizes.size() == strides.size(), "expected as many strides as sizes, ",
                 "but got sizes ", sizes, " and strides ", strides);
  for (size_t i = 0; i < sizes.size(); ++i) {
    FERRY_CHECK_AS(ShapeError, sizes[i] >= 0, "expected non-negative sizes, but got ", sizes);
    FERRY_CHECK_AS(ShapeError, strides[i] >= 0, "expected non-negative strides, but got ", strides);
  }
  FERRY_CHECK_AS(IndexError, storage_offset >= 0, "storage_offset: expected a value >= 0, but got ",
                 storage_offset);
  // Byte strides and byte offsets are what the iterator and data() compute, for every
  // dimension (a size-1 dimension's stride included), so each must fit int64 on its own.
  const auto itemsize = static_cast<int64_t>(element_size(dtype));
  int64_t bytes = 0;
  for (int64_t stride : strides) {
    const bool fits = mul_fits(stride, itemsize, &bytes);
    FERRY_CHECK_AS(ShapeError, fits, "storage size calculation overflowed: expected strides whose ",
                   "byte size fits int64, but got strides ", strides, " of ", itemsize,
                   "-byte elements");
  }
  const bool offset_fits = mul_fits(storage_offset, itemsize, &bytes);
  FERRY_CHECK_AS(ShapeError, offset_fits,
                 "storage size calculation overflowed: expected a storage offset whose byte size ",
                 "fits int64, but got ", storage_offset, " of ", itemsize, "-byte elements");
  const int64_t needed =
      checked_storage_nbytes(sizes, strides, storage_offset, static_cast<size_t>(itemsize));
  if (needed > 0 && storage.defined()) {
    FERRY_CHECK_AS(ShapeError, static_cast<size_t>(needed) <= storage.nbytes(), "sizes ", sizes,
                   ", strides ", strides, " and storage offset ", storage_offset, " reach ", needed,
                   " bytes, but the storage holds ", storage.nbytes(), " bytes");
  }
  return Tensor(
      make_intrusive<TensorImpl>(std::move(storage), dtype, sizes, strides, storage_offset));
}

namespace {

// Raises IndexError unless `t` has a dimension to index (wrap_dim lets 0-d tensors pass dims
// 0 and -1, as PyTorch does for ops that treat a scalar as one element, but size(d) and
// stride(d) would then read past the empty sizes).
void check_has_dims(const Tensor& t, const char* op, int64_t dim) {
  FERRY_CHECK_AS(IndexError, t.dim() > 0, op, ": expected a tensor with at least 1 dimension, ",
                 "but got a 0-d tensor (dim ", dim, ")");
}

}  // namespace

int64_t Tensor::size(int64_t dim) const {
  check_has_dims(*this, "size", dim);
  return sizes()[wrap_dim(dim, this->dim())];
}

int64_t Tensor::stride(int64_t dim) const {
  check_has_dims(*this, "stride", dim);
  return strides()[wrap_dim(dim, this->dim())];
}

bool Tensor::is_contiguous(MemoryFormat format) const {
  switch (format) {
    case MemoryFormat::Contiguous:
      return impl_->is_contiguous();
    case MemoryFormat::ChannelsLast:
      return compute_channels_last_contiguous(sizes(), strides(), 4);
    case MemoryFormat::ChannelsLast3d:
      return compute_channels_last_contiguous(sizes(), strides(), 5);
    case MemoryFormat::Preserve:
      break;
  }
  FERRY_FAIL_AS(Error, "is_contiguous: expected a concrete memory format, but got ", format);
}

bool Tensor::is_non_overlapping_and_dense() const {
  return impl_->is_contiguous() || compute_non_overlapping_and_dense(sizes(), strides());
}

MemoryFormat Tensor::suggest_memory_format() const {
  if (strides_like_channels_last(sizes(), strides(), 4)) return MemoryFormat::ChannelsLast;
  if (strides_like_channels_last(sizes(), strides(), 5)) return MemoryFormat::ChannelsLast3d;
  return MemoryFormat::Contiguous;
}

bool Tensor::is_alias_of(const Tensor& other) const {
  return defined() && other.defined() && storage().is_alias_of(other.storage());
}

Tensor Tensor::conj() const {
  if (!is_complex()) return *this;
  Tensor out = native::alias(*this);
  out.mut().set_conj(!is_conj());
  return out;
}

Tensor Tensor::_neg_view() const {
  Tensor out = native::alias(*this);
  out.mut().set_neg(!is_neg());
  return out;
}

}  // namespace ferry
