// Tensor metadata queries and views. Views build a new TensorImpl over the same Storage;
// nothing here reads or writes elements.
#include "ferry/core/tensor.h"

#include <algorithm>

#include "ferry/core/size_math.h"

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

Tensor Tensor::alias() const {
  Tensor out(make_intrusive<TensorImpl>(storage(), dtype(), sizes(), strides(), storage_offset()));
  out.mut().set_conj(is_conj());
  out.mut().set_neg(is_neg());
  return out;
}

Tensor Tensor::as_strided(IntArrayRef sizes, IntArrayRef strides,
                          std::optional<int64_t> storage_offset) const {
  Tensor out = make_tensor(storage(), dtype(), sizes, strides,
                           storage_offset.value_or(this->storage_offset()));
  out.mut().set_conj(is_conj());
  out.mut().set_neg(is_neg());
  return out;
}

namespace {

// Replaces a single -1 in `sizes` so that the product is `numel`.
DimVector infer_sizes(IntArrayRef sizes, int64_t numel, const char* op) {
  DimVector out(sizes);
  int64_t known = 1;
  bool zero = false;
  bool overflow = false;
  std::optional<size_t> infer;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      FERRY_CHECK_AS(ShapeError, !infer, op, ": expected at most one -1 in the shape, but got ",
                     sizes);
      infer = i;
    } else {
      FERRY_CHECK_AS(ShapeError, sizes[i] >= 0, op, ": expected sizes >= 0 or -1, but got ", sizes);
      zero = zero || sizes[i] == 0;
      overflow = overflow || !mul_fits(known, sizes[i], &known);
    }
  }
  if (zero) {
    known = 0;
    overflow = false;
  }
  if (overflow) {
    // The given sizes alone hold more elements than int64 counts: only an empty tensor fits,
    // through an inferred 0.
    FERRY_CHECK_AS(ShapeError, infer && numel == 0, op, ": shape ", sizes,
                   " is invalid for a tensor of ", numel,
                   " elements (the product of its sizes overflows int64)");
    out[*infer] = 0;
    return out;
  }
  const bool fits = infer ? (known > 0 && numel % known == 0) : known == numel;
  FERRY_CHECK_AS(ShapeError, fits || (infer && known == 0 && numel == 0), op, ": shape ", sizes,
                 " is invalid for a tensor of ", numel, " elements");
  if (infer) {
    FERRY_CHECK_AS(ShapeError, known > 0, op, ": cannot infer the -1 in shape ", sizes,
                   " for a tensor of 0 elements");
    out[*infer] = numel / known;
  }
  return out;
}

// Strides that let `new_sizes` view memory laid out as (old_sizes, old_strides), if any.
// Walks the old dimensions in chunks that are contiguous among themselves and matches each
// chunk against a run of new dimensions with the same element count (PyTorch's algorithm).
std::optional<DimVector> compute_view_strides(IntArrayRef old_sizes, IntArrayRef old_strides,
                                              IntArrayRef new_sizes) {
  DimVector new_strides(new_sizes.size());
  if (old_sizes.empty()) {
    std::fill(new_strides.begin(), new_strides.end(), 1);
    return new_strides;
  }
  // 0 whenever a size is: an empty tensor's other sizes may multiply past int64.
  const int64_t numel = checked_numel(old_sizes);
  if (numel == 0) {
    if (old_sizes.equals(new_sizes)) return DimVector(old_strides);
    return contiguous_strides(new_sizes);
  }
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = old_strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_sizes[d];  // at most numel
    // A chunk's span that overflows cannot equal any stride: the chunk ends there.
    int64_t span = 0;
    const bool chunk_ends =
        d == 0 || (old_sizes[d - 1] != 1 && (!mul_fits(tensor_numel, chunk_base_stride, &span) ||
                                             old_strides[d - 1] != span));
    if (chunk_ends) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        // Only a size-1 dimension can overflow here (its stride is then never used).
        if (!mul_fits(view_numel, chunk_base_stride, &new_strides[view_d])) {
          new_strides[view_d] = chunk_base_stride;
        }
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

}  // namespace

Tensor Tensor::view(IntArrayRef sizes) const {
  const DimVector new_sizes = infer_sizes(sizes, numel(), "view");
  auto new_strides = compute_view_strides(this->sizes(), strides(), new_sizes);
  FERRY_CHECK_AS(ShapeError, new_strides.has_value(), "view: shape ", sizes,
                 " is not compatible with the tensor's sizes ", this->sizes(), " and strides ",
                 strides(), " (a dimension spans two non-contiguous runs); use reshape instead");
  return as_strided(new_sizes, *new_strides);
}

Tensor Tensor::reshape(IntArrayRef sizes) const {
  const DimVector new_sizes = infer_sizes(sizes, numel(), "reshape");
  if (auto new_strides = compute_view_strides(this->sizes(), strides(), new_sizes)) {
    return as_strided(new_sizes, *new_strides);
  }
  return clone(MemoryFormat::Contiguous).view(new_sizes);
}

Tensor Tensor::permute(IntArrayRef dims) const {
  const int64_t rank = dim();
  FERRY_CHECK_AS(ShapeError, static_cast<int64_t>(dims.size()) == rank,
                 "permute: expected as many dims as the tensor's rank ", rank, ", but got ", dims);
  DimVector new_sizes(rank), new_strides(rank);
  SmallVector<bool, kInlineDims> seen(static_cast<size_t>(rank), false);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = wrap_dim(dims[i], rank, "permute dim");
    FERRY_CHECK_AS(IndexError, !seen[d], "permute: expected each dim once, but dim ", d,
                   " repeats in ", dims);
    seen[d] = true;
    new_sizes[i] = sizes()[d];
    new_strides[i] = strides()[d];
  }
  return as_strided(new_sizes, new_strides);
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  const int64_t rank = dim();
  const int64_t a = wrap_dim(dim0, rank, "transpose dim0");
  const int64_t b = wrap_dim(dim1, rank, "transpose dim1");
  if (rank == 0) return alias();
  DimVector new_sizes(sizes()), new_strides(strides());
  std::swap(new_sizes[a], new_sizes[b]);
  std::swap(new_strides[a], new_strides[b]);
  return as_strided(new_sizes, new_strides);
}

Tensor Tensor::t() const {
  FERRY_CHECK_AS(ShapeError, dim() <= 2, "t: expected a tensor with at most 2 dimensions, but got ",
                 dim(), " dimensions");
  return dim() < 2 ? alias() : transpose(0, 1);
}

namespace {

// base + index * stride, the start of a view that moves along a dimension. It fits int64 for
// any element the tensor has; an index at the end of a dimension (an empty slice) of an empty
// tensor, whose strides no storage bounds, may not, and then this raises ShapeError.
int64_t checked_offset(int64_t base, int64_t index, int64_t stride, const char* op) {
  int64_t step = 0;
  int64_t out = 0;
  const bool fits = mul_fits(index, stride, &step) && add_fits(base, step, &out);
  FERRY_CHECK_AS(ShapeError, fits, op, ": storage offset calculation overflowed: expected ", base,
                 " + ", index, " * ", stride, " to fit int64");
  return out;
}

}  // namespace

Tensor Tensor::slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  FERRY_CHECK_AS(ShapeError, this->dim() > 0,
                 "slice: expected a tensor with at least 1 dimension, but got a 0-d tensor");
  const int64_t d = wrap_dim(dim, this->dim(), "slice dim");
  FERRY_CHECK_AS(IndexError, step > 0, "slice: step: expected a positive value, but got ", step);
  const int64_t size = sizes()[d];
  auto clamp_index = [size](int64_t i) {
    return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size);
  };
  const int64_t lo = start ? clamp_index(*start) : 0;
  const int64_t hi = std::max(lo, end ? clamp_index(*end) : size);
  DimVector new_sizes(sizes()), new_strides(strides());
  // Written so that no step, however large, overflows; with at most one element left the
  // stride is never used and stays as it was.
  new_sizes[d] = hi == lo ? 0 : (hi - lo - 1) / step + 1;
  if (new_sizes[d] > 1) new_strides[d] = checked_offset(0, step, strides()[d], "slice");
  return as_strided(new_sizes, new_strides,
                    checked_offset(storage_offset(), lo, strides()[d], "slice"));
}

Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const {
  FERRY_CHECK_AS(ShapeError, this->dim() > 0,
                 "narrow: expected a tensor with at least 1 dimension, but got a 0-d tensor");
  const int64_t d = wrap_dim(dim, this->dim(), "narrow dim");
  const int64_t size = sizes()[d];
  FERRY_CHECK_AS(IndexError, start >= -size && start <= size,
                 "narrow: start: expected a value in [", -size, ", ", size, "], but got ", start);
  const int64_t s = start < 0 ? start + size : start;
  FERRY_CHECK_AS(IndexError, length >= 0 && s + length <= size,
                 "narrow: length: expected a value in [0, ", size - s, "] for start ", start,
                 " in a dimension of size ", size, ", but got ", length);
  return slice(d, s, s + length, 1);
}

Tensor Tensor::select(int64_t dim, int64_t index) const {
  FERRY_CHECK_AS(IndexError, this->dim() > 0,
                 "select: expected a tensor with at least 1 dimension, but got a 0-d tensor");
  const int64_t d = wrap_dim(dim, this->dim(), "select dim");
  const int64_t size = sizes()[d];
  FERRY_CHECK_AS(IndexError, index >= -size && index < size, "select: index: expected a value in [",
                 -size, ", ", size - 1, "] for dimension ", d, " of sizes ", sizes(), ", but got ",
                 index);
  const int64_t i = index < 0 ? index + size : index;
  DimVector new_sizes(sizes()), new_strides(strides());
  new_sizes.erase(new_sizes.begin() + d);
  new_strides.erase(new_strides.begin() + d);
  return as_strided(new_sizes, new_strides,
                    checked_offset(storage_offset(), i, strides()[d], "select"));
}

Tensor Tensor::expand(IntArrayRef sizes) const {
  const int64_t rank = dim();
  const auto new_rank = static_cast<int64_t>(sizes.size());
  FERRY_CHECK_AS(ShapeError, new_rank >= rank, "expand: expected at least as many sizes as the ",
                 "tensor's ", rank, " dimensions, but got ", sizes);
  DimVector new_sizes(new_rank), new_strides(new_rank);
  for (int64_t i = new_rank - 1; i >= 0; --i) {
    const int64_t src = i - (new_rank - rank);
    const int64_t target = sizes[i];
    if (src < 0) {
      FERRY_CHECK_AS(ShapeError, target >= 0, "expand: expected a size >= 0 for the new leading ",
                     "dimension ", i, ", but got ", target, " (target sizes ", sizes, ")");
      new_sizes[i] = target;
      new_strides[i] = 0;
      continue;
    }
    const int64_t have = this->sizes()[src];
    if (target == -1 || target == have) {
      new_sizes[i] = have;
      new_strides[i] = strides()[src];
    } else {
      FERRY_CHECK_AS(ShapeError, have == 1 && target >= 0, "expand: the expanded size (", target,
                     ") must match the existing size (", have, ") at non-singleton dimension ", i,
                     "; target sizes ", sizes, ", tensor sizes ", this->sizes());
      new_sizes[i] = target;
      new_strides[i] = 0;
    }
  }
  return as_strided(new_sizes, new_strides);
}

Tensor Tensor::unsqueeze(int64_t dim) const {
  // The new dim goes before any of the dim() + 1 positions, so the valid range is one wider
  // than wrap_dim's for this tensor: check it here, naming the tensor's own rank.
  const int64_t positions = this->dim() + 1;
  FERRY_CHECK_AS(IndexError, dim >= -positions && dim < positions,
                 "unsqueeze dim: expected a value in [", -positions, ", ", positions - 1,
                 "] for a ", this->dim(), "-d tensor, but got ", dim);
  const int64_t d = dim < 0 ? dim + positions : dim;
  DimVector new_sizes(sizes()), new_strides(strides());
  // PyTorch's stride for the new size-1 dim; any value would do, so 1 when it (or its byte
  // size) overflows, which only an empty tensor's unbounded strides allow.
  int64_t stride = 1;
  int64_t bytes = 0;
  if (d < this->dim() && !(mul_fits(sizes()[d], strides()[d], &stride) &&
                           mul_fits(stride, static_cast<int64_t>(element_size()), &bytes))) {
    stride = 1;
  }
  new_sizes.insert(new_sizes.begin() + d, 1);
  new_strides.insert(new_strides.begin() + d, stride);
  return as_strided(new_sizes, new_strides);
}

Tensor Tensor::squeeze() const {
  DimVector new_sizes, new_strides;
  for (int64_t i = 0; i < dim(); ++i) {
    if (sizes()[i] == 1) continue;
    new_sizes.push_back(sizes()[i]);
    new_strides.push_back(strides()[i]);
  }
  return as_strided(new_sizes, new_strides);
}

Tensor Tensor::squeeze(int64_t dim) const {
  const int64_t d = wrap_dim(dim, this->dim(), "squeeze dim");
  if (this->dim() == 0 || sizes()[d] != 1) return alias();
  DimVector new_sizes(sizes()), new_strides(strides());
  new_sizes.erase(new_sizes.begin() + d);
  new_strides.erase(new_strides.begin() + d);
  return as_strided(new_sizes, new_strides);
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t s = wrap_dim(start_dim, dim(), "flatten start_dim");
  const int64_t e = wrap_dim(end_dim, dim(), "flatten end_dim");
  FERRY_CHECK_AS(IndexError, s <= e, "flatten: expected start_dim <= end_dim, but got start_dim ",
                 start_dim, " and end_dim ", end_dim);
  if (s == e) return alias();
  DimVector new_sizes;
  for (int64_t i = 0; i < s; ++i) new_sizes.push_back(sizes()[i]);
  new_sizes.push_back(checked_numel(sizes().slice(s, e - s + 1), "flatten"));
  for (int64_t i = e + 1; i < dim(); ++i) new_sizes.push_back(sizes()[i]);
  return reshape(new_sizes);
}

Tensor Tensor::conj() const {
  if (!is_complex()) return *this;
  Tensor out = alias();
  out.mut().set_conj(!is_conj());
  return out;
}

Tensor Tensor::_neg_view() const {
  Tensor out = alias();
  out.mut().set_neg(!is_neg());
  return out;
}

}  // namespace ferry
