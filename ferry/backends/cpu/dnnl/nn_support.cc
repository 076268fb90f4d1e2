// Checks, temporaries and merged views shared by the CPU compute kernels (see nn_support.h).
// Temporaries come from the CPU allocator directly (core), not from the ops layer's factories.
#include "ferry/backends/cpu/dnnl/nn_support.h"

#include <algorithm>
#include <sstream>

#include "ferry/core/size_math.h"
#include "ferry/core/storage.h"
#include "ferry/iter/memory_overlap.h"

namespace ferry::cpu::nn {

std::string shape_str(IntArrayRef sizes) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < sizes.size(); ++i) out << (i ? ", " : "") << sizes[i];
  out << ']';
  return out.str();
}

std::string shape_str(const Tensor& t) { return t.defined() ? shape_str(t.sizes()) : "undefined"; }

void check_operand(const Tensor& t, const char* op, const char* name) {
  FERRY_CHECK_AS(ShapeError, t.defined(), op, ": expected ", name,
                 " to be a defined tensor, but got an undefined one");
  FERRY_CHECK_AS(DeviceError, t.is_cpu(), op, ": expected ", name,
                 " on the cpu (the kernels read host memory), but it is on ", t.device());
}

void check_rank(const Tensor& t, int64_t rank, const char* op, const char* name) {
  FERRY_CHECK_AS(ShapeError, t.dim() == rank, op, ": expected ", name, " of rank ", rank,
                 ", but got shape ", shape_str(t));
}

void check_shape(const Tensor& t, IntArrayRef expected, const char* op, const std::string& name,
                 const char* what) {
  const bool same = t.sizes().size() == expected.size() &&
                    std::equal(expected.begin(), expected.end(), t.sizes().begin());
  FERRY_CHECK_AS(ShapeError, same, op, ": expected ", name, " of shape ",
                 what ? std::string(what) + " = " : std::string(), shape_str(expected),
                 ", but got ", shape_str(t));
}

void check_dtype(const Tensor& t, ScalarType expected, const char* op, const char* name) {
  FERRY_CHECK_AS(DTypeError, t.dtype() == expected, op, ": expected ", name, " of dtype ", expected,
                 ", but got ", t.dtype());
}

void check_output(const Tensor& t, const char* op, const char* name) {
  check_operand(t, op, name);
  FERRY_CHECK_AS(ShapeError, has_internal_overlap(t) != MemOverlap::Yes, op, ": expected ", name,
                 " whose elements have memory of their own, but its strides ",
                 shape_str(t.strides()), " (shape ", shape_str(t), ") make elements share it");
  FERRY_CHECK_AS(NotImplementedError, !t.is_neg() && !t.is_conj(), op, ": expected ", name,
                 " without a lazy negation or conjugation bit (resolve it first)");
}

Tensor host_empty(IntArrayRef sizes, ScalarType dtype, MemoryFormat format) {
  const DimVector strides = format == MemoryFormat::Contiguous
                                ? contiguous_strides(sizes)
                                : strides_for_memory_format(sizes, format);
  const auto itemsize = static_cast<size_t>(element_size(dtype));
  const auto nbytes =
      static_cast<size_t>(checked_storage_nbytes(sizes, strides, 0, itemsize, "cpu nn temporary"));
  Storage storage(nbytes, get_allocator(DeviceType::CPU), Device(DeviceType::CPU));
  return make_tensor(std::move(storage), dtype, sizes, strides);
}

Tensor dense_copy(const Tensor& t, ScalarType dtype, MemoryFormat format) {
  Tensor out = host_empty(t.sizes(), dtype, format);
  if (t.numel() > 0) out.copy_(t);
  return out;
}

MemoryFormat layout_of(const Tensor& t) {
  return t.dim() == 4 && t.suggest_memory_format() == MemoryFormat::ChannelsLast
             ? MemoryFormat::ChannelsLast
             : MemoryFormat::Contiguous;
}

bool is_dense_in(const Tensor& t, MemoryFormat format) {
  return !t.is_neg() && !t.is_conj() && t.is_contiguous(format);
}

OutputStage::OutputStage(const Tensor& target, bool in_place, ScalarType dtype, MemoryFormat format,
                         bool keep_values)
    : target_(target) {
  if (in_place) return;
  staged_ =
      keep_values ? dense_copy(target, dtype, format) : host_empty(target.sizes(), dtype, format);
}

void OutputStage::finish() {
  if (staged_.defined() && target_.numel() > 0) target_.copy_(staged_);
}

std::optional<MergedDim> merge_dims(const Tensor& t, int64_t begin, int64_t end) {
  MergedDim merged;
  bool any = false;
  // Walk from the innermost dimension out: each next (outer) dimension must step exactly over
  // the span of those merged so far.
  for (int64_t d = end - 1; d >= begin; --d) {
    const int64_t size = t.size(d);
    if (size == 1) continue;
    if (size == 0) return MergedDim{0, 1};
    if (!any) {
      merged = {size, t.stride(d)};
      any = true;
      continue;
    }
    if (t.stride(d) != merged.stride * merged.size) return std::nullopt;
    merged.size *= size;
  }
  return merged;
}

int64_t product(IntArrayRef sizes, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= sizes[i];
  return p;
}

Tensor f32_vector(const Tensor& t) {
  const bool usable = t.dtype() == kFloat32 && !t.is_neg() && (t.numel() <= 1 || t.stride(0) == 1);
  return usable ? t : dense_copy(t, kFloat32);
}

int64_t grain_for(int64_t work_per_item) {
  constexpr int64_t kChunkWork = int64_t{1} << 15;
  return std::max<int64_t>(1, kChunkWork / std::max<int64_t>(work_per_item, 1));
}

}  // namespace ferry::cpu::nn
