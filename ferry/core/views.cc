// The view operations' metadata arithmetic (see views.h): sizes, strides and offsets of a view,
// checked against the storage, with PyTorch's messages for bad dims and indices.
#include "ferry/core/views.h"

#include <algorithm>

#include "ferry/core/size_math.h"

namespace ferry::native {

Tensor alias(const Tensor& self) {
  Tensor out(make_intrusive<TensorImpl>(self.storage(), self.dtype(), self.sizes(), self.strides(),
                                        self.storage_offset()));
  out.impl()->set_conj(self.is_conj());
  out.impl()->set_neg(self.is_neg());
  return out;
}

Tensor as_strided(const Tensor& self, IntArrayRef sizes, IntArrayRef strides,
                  std::optional<int64_t> storage_offset) {
  Tensor out = make_tensor(self.storage(), self.dtype(), sizes, strides,
                           storage_offset.value_or(self.storage_offset()));
  out.impl()->set_conj(self.is_conj());
  out.impl()->set_neg(self.is_neg());
  return out;
}

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

Tensor view(const Tensor& self, IntArrayRef sizes) {
  const DimVector new_sizes = infer_sizes(sizes, self.numel(), "view");
  auto new_strides = compute_view_strides(self.sizes(), self.strides(), new_sizes);
  FERRY_CHECK_AS(ShapeError, new_strides.has_value(), "view: shape ", sizes,
                 " is not compatible with the tensor's sizes ", self.sizes(), " and strides ",
                 self.strides(),
                 " (a dimension spans two non-contiguous runs); use reshape instead");
  return as_strided(self, new_sizes, *new_strides);
}

Tensor permute(const Tensor& self, IntArrayRef dims) {
  const int64_t rank = self.dim();
  FERRY_CHECK_AS(ShapeError, static_cast<int64_t>(dims.size()) == rank,
                 "permute: expected as many dims as the tensor's rank ", rank, ", but got ", dims);
  DimVector new_sizes(rank), new_strides(rank);
  SmallVector<bool, kInlineDims> seen(static_cast<size_t>(rank), false);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = wrap_dim(dims[i], rank, "permute dim");
    FERRY_CHECK_AS(IndexError, !seen[d], "permute: expected each dim once, but dim ", d,
                   " repeats in ", dims);
    seen[d] = true;
    new_sizes[i] = self.sizes()[d];
    new_strides[i] = self.strides()[d];
  }
  return as_strided(self, new_sizes, new_strides);
}

Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1) {
  const int64_t rank = self.dim();
  const int64_t a = wrap_dim(dim0, rank, "transpose dim0");
  const int64_t b = wrap_dim(dim1, rank, "transpose dim1");
  if (rank == 0) return alias(self);
  DimVector new_sizes(self.sizes()), new_strides(self.strides());
  std::swap(new_sizes[a], new_sizes[b]);
  std::swap(new_strides[a], new_strides[b]);
  return as_strided(self, new_sizes, new_strides);
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

Tensor slice(const Tensor& self, int64_t dim, std::optional<int64_t> start,
             std::optional<int64_t> end, int64_t step) {
  FERRY_CHECK_AS(ShapeError, self.dim() > 0,
                 "slice: expected a tensor with at least 1 dimension, but got a 0-d tensor");
  const int64_t d = wrap_dim(dim, self.dim(), "slice dim");
  FERRY_CHECK_AS(IndexError, step > 0, "slice: step: expected a positive value, but got ", step);
  const int64_t size = self.sizes()[d];
  auto clamp_index = [size](int64_t i) {
    return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size);
  };
  const int64_t lo = start ? clamp_index(*start) : 0;
  const int64_t hi = std::max(lo, end ? clamp_index(*end) : size);
  DimVector new_sizes(self.sizes()), new_strides(self.strides());
  // Written so that no step, however large, overflows; with at most one element left the
  // stride is never used and stays as it was.
  new_sizes[d] = hi == lo ? 0 : (hi - lo - 1) / step + 1;
  if (new_sizes[d] > 1) new_strides[d] = checked_offset(0, step, self.strides()[d], "slice");
  return as_strided(self, new_sizes, new_strides,
                    checked_offset(self.storage_offset(), lo, self.strides()[d], "slice"));
}

Tensor select(const Tensor& self, int64_t dim, int64_t index) {
  FERRY_CHECK_AS(IndexError, self.dim() > 0,
                 "select: expected a tensor with at least 1 dimension, but got a 0-d tensor");
  const int64_t d = wrap_dim(dim, self.dim(), "select dim");
  const int64_t size = self.sizes()[d];
  FERRY_CHECK_AS(IndexError, index >= -size && index < size, "select: index: expected a value in [",
                 -size, ", ", size - 1, "] for dimension ", d, " of sizes ", self.sizes(),
                 ", but got ", index);
  const int64_t i = index < 0 ? index + size : index;
  DimVector new_sizes(self.sizes()), new_strides(self.strides());
  new_sizes.erase(new_sizes.begin() + d);
  new_strides.erase(new_strides.begin() + d);
  return as_strided(self, new_sizes, new_strides,
                    checked_offset(self.storage_offset(), i, self.strides()[d], "select"));
}

Tensor expand(const Tensor& self, IntArrayRef sizes) {
  const int64_t rank = self.dim();
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
    const int64_t have = self.sizes()[src];
    if (target == -1 || target == have) {
      new_sizes[i] = have;
      new_strides[i] = self.strides()[src];
    } else {
      FERRY_CHECK_AS(ShapeError, have == 1 && target >= 0, "expand: the expanded size (", target,
                     ") must match the existing size (", have, ") at non-singleton dimension ", i,
                     "; target sizes ", sizes, ", tensor sizes ", self.sizes());
      new_sizes[i] = target;
      new_strides[i] = 0;
    }
  }
  return as_strided(self, new_sizes, new_strides);
}

Tensor unsqueeze(const Tensor& self, int64_t dim) {
  // The new dim goes before any of the self.dim() + 1 positions, so the valid range is one wider
  // than wrap_dim's for this tensor: check it here, naming the tensor's own rank.
  const int64_t positions = self.dim() + 1;
  FERRY_CHECK_AS(IndexError, dim >= -positions && dim < positions,
                 "unsqueeze dim: expected a value in [", -positions, ", ", positions - 1,
                 "] for a ", self.dim(), "-d tensor, but got ", dim);
  const int64_t d = dim < 0 ? dim + positions : dim;
  DimVector new_sizes(self.sizes()), new_strides(self.strides());
  // PyTorch's stride for the new size-1 dim; any value would do, so 1 when it (or its byte
  // size) overflows, which only an empty tensor's unbounded strides allow.
  int64_t stride = 1;
  int64_t bytes = 0;
  if (d < self.dim() && !(mul_fits(self.sizes()[d], self.strides()[d], &stride) &&
                          mul_fits(stride, static_cast<int64_t>(self.element_size()), &bytes))) {
    stride = 1;
  }
  new_sizes.insert(new_sizes.begin() + d, 1);
  new_strides.insert(new_strides.begin() + d, stride);
  return as_strided(self, new_sizes, new_strides);
}

Tensor squeeze(const Tensor& self) {
  DimVector new_sizes, new_strides;
  for (int64_t i = 0; i < self.dim(); ++i) {
    if (self.sizes()[i] == 1) continue;
    new_sizes.push_back(self.sizes()[i]);
    new_strides.push_back(self.strides()[i]);
  }
  return as_strided(self, new_sizes, new_strides);
}

Tensor squeeze(const Tensor& self, int64_t dim) {
  const int64_t d = wrap_dim(dim, self.dim(), "squeeze dim");
  if (self.dim() == 0 || self.sizes()[d] != 1) return alias(self);
  DimVector new_sizes(self.sizes()), new_strides(self.strides());
  new_sizes.erase(new_sizes.begin() + d);
  new_strides.erase(new_strides.begin() + d);
  return as_strided(self, new_sizes, new_strides);
}

}  // namespace ferry::native
