// TensorIterator's build: operands, overlap checks, broadcast shape, dtypes and devices, byte
// strides, dimension order, output allocation, coalescing. Follows PyTorch's TensorIterator
// step for step (see the seeds), with its postconditions written down in tensor_iterator.h.
#include "ferry/iter/tensor_iterator.h"

#include <algorithm>

#include "ferry/core/size_math.h"
#include "ferry/core/storage.h"
#include "ferry/iter/memory_overlap.h"
#include "ferry/iter/parallel.h"
#include "ferry/iter/stride_order.h"

namespace ferry {

// ---- config ------------------------------------------------------------------------------

TensorIteratorConfig& TensorIteratorConfig::add_output(const Tensor& output) {
  FERRY_CHECK(num_inputs_ == 0, "TensorIteratorConfig: expected every output to be added before ",
              "the first input, but an output was added after ", num_inputs_, " input(s)");
  FERRY_CHECK(num_outputs_ < kMaxIterOperands, "TensorIteratorConfig: expected at most ",
              kMaxIterOperands, " operands");
  tensors_[num_outputs_++] = &output;
  return *this;
}

TensorIteratorConfig& TensorIteratorConfig::add_input(const Tensor& input) {
  FERRY_CHECK(num_outputs_ + num_inputs_ < kMaxIterOperands,
              "TensorIteratorConfig: expected at most ", kMaxIterOperands, " operands");
  tensors_[num_outputs_ + num_inputs_++] = &input;
  return *this;
}

TensorIteratorConfig& TensorIteratorConfig::output_dtype(ScalarType dtype) {
  has_output_dtype_ = true;
  output_dtype_ = dtype;
  return *this;
}

void TensorIterator::release_tensors() {
  for (int i = 0; i < num_operands_; ++i) {
    operands_[i].borrowed = nullptr;
    operands_[i].owned = Tensor();
  }
}

TensorIteratorConfig& TensorIteratorConfig::check_all_same_dtype(bool on) {
  check_all_same_dtype_ = on;
  return *this;
}
TensorIteratorConfig& TensorIteratorConfig::check_all_same_device(bool on) {
  check_all_same_device_ = on;
  return *this;
}
TensorIteratorConfig& TensorIteratorConfig::resize_outputs(bool on) {
  resize_outputs_ = on;
  return *this;
}
TensorIteratorConfig& TensorIteratorConfig::check_mem_overlap(bool on) {
  check_mem_overlap_ = on;
  return *this;
}
TensorIteratorConfig& TensorIteratorConfig::trace(IterBuildTrace* trace) {
  trace_ = trace;
  return *this;
}

TensorIterator TensorIteratorConfig::build() {
  TensorIterator iter;
  iter.build(*this);
  return iter;
}

// ---- build -------------------------------------------------------------------------------

void TensorIterator::build(const TensorIteratorConfig& config) {
  populate_operands(config);
  if (config.check_mem_overlap_) check_mem_overlaps();
  compute_shape(config);
  compute_types(config);
  if (config.trace_ == nullptr && fast_set_up()) return;
  compute_strides();
  record_stage(config.trace_, false);
  reorder_dimensions();
  allocate_outputs();
  record_stage(config.trace_, true);
  coalesce_dimensions();
}

void TensorIterator::populate_operands(const TensorIteratorConfig& config) {
  num_outputs_ = config.num_outputs_;
  num_operands_ = config.num_outputs_ + config.num_inputs_;
  FERRY_CHECK(num_operands_ > 0, "TensorIterator: expected at least one operand");
  for (int i = 0; i < num_operands_; ++i) {
    OperandInfo& o = operands_[i];
    const Tensor& t = *config.tensors_[i];
    o.is_output = i < num_outputs_;
    if (t.defined()) {
      o.borrowed = &t;
      o.data = static_cast<char*>(t.data_ptr());
      o.dtype = t.dtype();
      o.device = t.device();
      continue;
    }
    FERRY_CHECK(o.is_output, "TensorIterator: input ", i - num_outputs_, " is undefined");
    FERRY_CHECK(config.resize_outputs_, "TensorIterator: output ", i,
                " is undefined, but resize_outputs(false) needs every output defined");
    o.allocate = true;
  }
}

void TensorIterator::check_mem_overlaps() const {
  for (int o = 0; o < num_outputs_; ++o) {
    if (operands_[o].allocate) continue;
    const Tensor& out = tensor(o);
    FERRY_CHECK(has_internal_overlap(out) != MemOverlap::Yes, "unsupported operation: output ", o,
                " (sizes ", out.sizes(), ", strides ", out.strides(),
                ") has elements that share memory (a dimension of size > 1 with stride 0, as "
                "expand() makes); write into a clone() of it instead");
    for (int i = num_outputs_; i < num_operands_; ++i) {
      const Tensor& in = tensor(i);
      FERRY_CHECK(get_overlap_status(out, in) != MemOverlapStatus::Partial,
                  "unsupported operation: input ", i - num_outputs_, " (sizes ", in.sizes(),
                  ", strides ", in.strides(), ") partly overlaps output ", o, " (sizes ",
                  out.sizes(), ", strides ", out.strides(), "); clone() the input first");
    }
  }
}

void TensorIterator::compute_shape(const TensorIteratorConfig& config) {
  bool have_shape = false;
  for (int i = 0; i < num_operands_; ++i) {
    const OperandInfo& o = operands_[i];
    // With resizing on, outputs follow the inputs' shape instead of constraining it.
    if (o.allocate || (o.is_output && config.resize_outputs_)) continue;
    const IntArrayRef sizes = tensor(i).sizes();
    if (!have_shape) {
      shape_ = DimVector(sizes);
      have_shape = true;
    } else if (!sizes.equals(shape_)) {
      all_same_shape_ = false;
      shape_ = broadcast_shapes(shape_, sizes);
    }
  }
  FERRY_CHECK(have_shape,
              "TensorIterator: expected an input or a defined output to take the "
              "shape from, but every operand is an output to allocate");
  for (int o = 0; o < num_outputs_; ++o) {
    if (operands_[o].allocate) continue;
    const IntArrayRef sizes = tensor(o).sizes();
    if (sizes.equals(shape_)) continue;
    FERRY_CHECK_AS(ShapeError, !config.resize_outputs_, "TensorIterator: output ", o, " has shape ",
                   sizes, ", not the broadcast shape ", IntArrayRef(shape_),
                   "; ferry does not resize defined outputs (their storage cannot grow), so "
                   "pass an undefined output to have it allocated");
    FERRY_FAIL_AS(ShapeError, "output with shape ", sizes, " doesn't match the broadcast shape ",
                  IntArrayRef(shape_));
  }
  // Every operand's own count fits, but a broadcast of two may not ([N, 1] with [1, N]).
  numel_ = checked_numel(shape_, "TensorIterator");
}

void TensorIterator::compute_types(const TensorIteratorConfig& config) {
  common_device_ = Device(DeviceType::CPU);
  int first_defined = -1;
  for (int i = 0; i < num_operands_; ++i) {
    const OperandInfo& o = operands_[i];
    if (o.allocate) continue;
    if (first_defined < 0) first_defined = i;
    if (common_device_.is_cpu() && !o.device.is_cpu()) common_device_ = o.device;
    const OperandInfo& f = operands_[first_defined];
    auto name = [&](int k) { return k < num_outputs_ ? "output " : "input "; };
    auto index = [&](int k) { return k < num_outputs_ ? k : k - num_outputs_; };
    FERRY_CHECK_AS(DTypeError, !config.check_all_same_dtype_ || o.dtype == f.dtype,
                   "TensorIterator: expected all operands to have the same dtype, but ",
                   name(first_defined), index(first_defined), " is ", f.dtype, " and ", name(i),
                   index(i), " is ", o.dtype);
    FERRY_CHECK_AS(DeviceError, !config.check_all_same_device_ || o.device == f.device,
                   "TensorIterator: expected all operands on the same device, but ",
                   name(first_defined), index(first_defined), " is on ", f.device, " and ", name(i),
                   index(i), " is on ", o.device);
  }
  // Outputs to allocate take the first input's dtype: with check_all_same_dtype that is every
  // input's; without it, PyTorch's non-promoting iterators do the same.
  for (int o = 0; o < num_outputs_; ++o) {
    if (!operands_[o].allocate) continue;
    FERRY_CHECK(num_outputs_ < num_operands_, "TensorIterator: output ", o,
                " is undefined and there is no input to take its dtype from");
    operands_[o].dtype =
        config.has_output_dtype_ ? config.output_dtype_ : operands_[num_outputs_].dtype;
    operands_[o].device = common_device_;
  }
}

bool TensorIterator::fast_set_up() {
  // Same shape and the same dense layout everywhere: the iteration is one run in memory order.
  // This is what reordering and coalescing would produce, without computing it.
  if (!all_same_shape_) return false;
  bool all_contiguous = true;
  bool allocates = false;
  int first_defined = -1;
  for (int i = 0; i < num_operands_; ++i) {
    if (operands_[i].allocate) {
      allocates = true;
      continue;
    }
    if (first_defined < 0) first_defined = i;
    all_contiguous = all_contiguous && tensor(i).is_contiguous();
  }
  // Outputs to allocate follow contiguous inputs as a contiguous tensor (what reordering would
  // give them); other layouts take the full path.
  if (allocates && (!all_contiguous || numel_ == 0)) return false;
  for (int i = 0; i < num_outputs_; ++i) {
    OperandInfo& o = operands_[i];
    if (!o.allocate) continue;
    const Tensor& like = tensor(first_defined);
    o.owned = make_tensor(Storage(static_cast<size_t>(numel_) * ferry::element_size(o.dtype),
                                  get_allocator(o.device.type()), o.device),
                          o.dtype, like.sizes(), like.strides());
    o.data = static_cast<char*>(o.owned.data_ptr());
  }
  if (!all_contiguous) {
    const Tensor& first = tensor(0);
    if (!first.is_non_overlapping_and_dense()) return false;
    for (int i = 1; i < num_operands_; ++i) {
      if (!tensor(i).strides().equals(first.strides())) return false;
    }
  }
  if (!shape_.empty()) shape_.assign(1, numel_);
  for (int i = 0; i < num_operands_; ++i) {
    operands_[i].stride_bytes.assign(shape_.size(), element_size(i));
  }
  return true;
}

void TensorIterator::compute_strides() {
  const auto ndim = static_cast<int64_t>(shape_.size());
  for (int i = 0; i < num_operands_; ++i) {
    OperandInfo& o = operands_[i];
    if (o.allocate) continue;
    const Tensor& t = tensor(i);
    const int64_t offset = ndim - t.dim();
    const auto itemsize = static_cast<int64_t>(t.element_size());
    o.stride_bytes.assign(static_cast<size_t>(ndim), 0);
    for (int64_t d = 0; d < t.dim(); ++d) {
      const bool broadcast = t.sizes()[d] == 1 && shape_[offset + d] != 1;
      o.stride_bytes[offset + d] = broadcast ? 0 : t.strides()[d] * itemsize;
    }
  }
}

void TensorIterator::reorder_dimensions() {
  const auto ndim = static_cast<int64_t>(shape_.size());
  // Outputs are asked first, so their layout wins; an operand broadcast along either
  // dimension, or tied on both, defers to the next operand.
  perm_ = order_dims_fastest_first(ndim, [&](int64_t a, int64_t b) {
    for (int i = 0; i < num_operands_; ++i) {
      const OperandInfo& o = operands_[i];
      if (o.allocate) continue;
      const int c = compare_dim_strides(o.stride_bytes[a], o.stride_bytes[b], shape_[a], shape_[b]);
      if (c != 0) return c;
    }
    return 0;
  });
  const DimVector old_shape = shape_;
  for (int64_t d = 0; d < ndim; ++d) shape_[d] = old_shape[perm_[d]];
  for (int i = 0; i < num_operands_; ++i) {
    OperandInfo& o = operands_[i];
    if (o.allocate) continue;
    const DimVector old = o.stride_bytes;
    for (int64_t d = 0; d < ndim; ++d) o.stride_bytes[d] = old[perm_[d]];
  }
}

void TensorIterator::allocate_outputs() {
  const auto ndim = static_cast<int64_t>(shape_.size());
  for (int i = 0; i < num_outputs_; ++i) {
    OperandInfo& o = operands_[i];
    if (!o.allocate) continue;
    // Dense in the chosen order, so the new output is laid out like the inputs it follows.
    const int64_t itemsize = element_size(i);
    o.stride_bytes.assign(static_cast<size_t>(ndim), 0);
    DimVector sizes(static_cast<size_t>(ndim)), strides(static_cast<size_t>(ndim));
    int64_t next = itemsize;
    for (int64_t d = 0; d < ndim; ++d) {
      o.stride_bytes[d] = next;
      sizes[perm_[d]] = shape_[d];
      strides[perm_[d]] = next / itemsize;
      // An empty shape's other sizes are not bounded by numel_, so this product can overflow.
      const bool fits = d + 1 == ndim || mul_fits(next, std::max<int64_t>(shape_[d], 1), &next);
      FERRY_CHECK_AS(ShapeError, fits, "TensorIterator: storage size calculation overflowed: ",
                     "expected an output shape whose dense strides fit int64, but got ",
                     IntArrayRef(shape_), " (reordered) of ", itemsize, "-byte elements");
    }
    const auto nbytes = static_cast<size_t>(
        checked_storage_nbytes(sizes, strides, 0, static_cast<size_t>(itemsize), "TensorIterator"));
    Storage storage(nbytes, get_allocator(o.device.type()), o.device);
    o.owned = make_tensor(std::move(storage), o.dtype, sizes, strides);
    o.data = static_cast<char*>(o.owned.data_ptr());
  }
}

void TensorIterator::coalesce_dimensions() {
  const auto ndim = static_cast<int64_t>(shape_.size());
  if (ndim <= 1) return;
  // Dimensions d and d+1 merge when one has size 1 (its stride never matters) or when, for
  // every operand, stepping through all of d lands exactly on the next step of d+1.
  // Products that overflow int64 (possible only when another dimension is empty, which leaves
  // the sizes and strides unbounded) never match, and such a pair stays apart.
  auto can_merge = [&](int64_t d0, int64_t d1) {
    if (shape_[d0] == 1 || shape_[d1] == 1) return true;
    int64_t merged = 0;
    if (!mul_fits(shape_[d0], shape_[d1], &merged)) return false;
    for (int i = 0; i < num_operands_; ++i) {
      const DimVector& s = operands_[i].stride_bytes;
      int64_t span = 0;
      if (!mul_fits(shape_[d0], s[d0], &span) || span != s[d1]) return false;
    }
    return true;
  };
  auto take_stride = [&](int64_t to, int64_t from) {
    for (int i = 0; i < num_operands_; ++i) {
      operands_[i].stride_bytes[to] = operands_[i].stride_bytes[from];
    }
  };
  // `last` is the merged dimension being grown; each d either joins it or starts the next one.
  int64_t last = 0;
  for (int64_t d = 1; d < ndim; ++d) {
    if (can_merge(last, d)) {
      // A size-1 run has no meaningful stride: take the one of the dimension that joins it.
      if (shape_[last] == 1) take_stride(last, d);
      shape_[last] *= shape_[d];
    } else {
      ++last;
      if (last != d) {
        take_stride(last, d);
        shape_[last] = shape_[d];
      }
    }
  }
  shape_.resize(static_cast<size_t>(last + 1));
  for (int i = 0; i < num_operands_; ++i) operands_[i].stride_bytes.resize(shape_.size());
  // @post the product of shape_ is unchanged, and so is every operand's offset for every
  //       linear index: a merged pair (d0, d1) maps index i0 + n0*i1 to i0*s0 + i1*s1 =
  //       (i0 + n0*i1)*s0 because s1 == n0*s0, and a size-1 dimension contributes nothing.
  // @post ndim() == 1, or no dimension has size 1 (each was merged into a neighbour).
  // @post no adjacent pair can merge: a pair that failed keeps the strides it failed with,
  //       since only the later dimension of a run grows and its stride stays its first one's.
}

void TensorIterator::record_stage(IterBuildTrace* trace, bool reordered) const {
  if (trace == nullptr) return;
  std::vector<DimVector> strides;
  for (int i = 0; i < num_operands_; ++i) strides.push_back(operands_[i].stride_bytes);
  if (reordered) {
    trace->perm = perm_;
    trace->reordered_shape = shape_;
    trace->reordered_strides = std::move(strides);
  } else {
    trace->broadcast_shape = shape_;
    trace->broadcast_strides = std::move(strides);
  }
}

// ---- queries and loops -------------------------------------------------------------------

bool TensorIterator::has_contiguous_first_dim() const {
  if (shape_.empty()) return true;
  for (int i = 0; i < num_operands_; ++i) {
    if (operands_[i].stride_bytes[0] != element_size(i)) return false;
  }
  return true;
}

bool TensorIterator::is_contiguous() const {
  if (numel_ == 1) return true;
  return shape_.size() == 1 && has_contiguous_first_dim();
}

void TensorIterator::serial_for_each(Loop2d loop, Range range) const {
  if (range.size() <= 0) return;
  const size_t ndim = std::max<size_t>(shape_.size(), 2);
  const auto nt = static_cast<size_t>(num_operands_);
  // Inline up to 4 operands x 6 dimensions: no heap on the copy path.
  SmallVector<int64_t, 4 * kInlineDims> strides(nt * ndim, 0);
  char* base[kMaxIterOperands];
  for (size_t a = 0; a < nt; ++a) {
    base[a] = operands_[a].data;
    for (size_t d = 0; d < shape_.size(); ++d) strides[d * nt + a] = operands_[a].stride_bytes[d];
  }
  serial_for_each_2d(shape_, strides.data(), base, num_operands_, loop, range);
}

void TensorIterator::for_each(Loop2d loop, int64_t grain_size) const {
  if (numel_ == 0) return;
  if (numel_ < grain_size || get_num_threads() == 1 || in_parallel_region()) {
    serial_for_each(loop, {0, numel_});
    return;
  }
  parallel_for(0, numel_, grain_size, [&](int64_t begin, int64_t end) {
    serial_for_each(loop, {begin, end});
  });
}

}  // namespace ferry
