// Tensor: a reference-counted handle to a TensorImpl, with PyTorch's C++ API.
// Copying a Tensor shares the data (like torch::Tensor); views share the storage and differ
// only in sizes, strides, offset and the conj/neg bits. Methods that move bytes (copy_, to,
// contiguous, clone, fill_, ...) are declared here and defined in ferry/ops, which runs them
// through the dispatcher; everything else here is metadata and never touches device memory.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/core/array_ref.h"
#include "ferry/core/error.h"
#include "ferry/core/intrusive_ptr.h"
#include "ferry/core/memory_format.h"
#include "ferry/core/scalar.h"
#include "ferry/core/scalar_type.h"
#include "ferry/core/tensor_impl.h"
#include "ferry/core/tensor_options.h"

namespace ferry {

class Stream;  // ferry/device/stream.h
namespace autograd {
class Node;  // ferry/autograd/node.h
}

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(IntrusivePtr<TensorImpl> impl) : impl_(std::move(impl)) {}
  Tensor(const Tensor&) = default;
  Tensor(Tensor&&) noexcept = default;
  ~Tensor() = default;

  // Note [Assigning to a temporary]: on a named tensor, `=` rebinds the handle; on a temporary
  // (`x[0] = y`, `x.select(1, 2) = 0`) it writes into the elements, as in PyTorch: copy_ for a
  // tensor, fill_ for a number.
  Tensor& operator=(const Tensor& other) & = default;
  Tensor& operator=(Tensor&& other) & noexcept = default;
  Tensor& operator=(const Tensor& src) &&;
  Tensor& operator=(const Scalar& value) &&;

  bool defined() const { return static_cast<bool>(impl_); }
  TensorImpl* impl() const { return impl_.get(); }
  // Same TensorImpl (not merely the same data): what `a is b` means in Python.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  int64_t use_count() const { return impl_.use_count(); }

  // ---- metadata --------------------------------------------------------------------------
  IntArrayRef sizes() const { return impl_->sizes(); }
  IntArrayRef strides() const { return impl_->strides(); }
  // size(d) / stride(d) accept negative d, as in PyTorch.
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const { return impl_->dim(); }
  int64_t ndimension() const { return dim(); }
  int64_t numel() const { return impl_->numel(); }
  ScalarType dtype() const { return impl_->dtype(); }
  ScalarType scalar_type() const { return impl_->dtype(); }
  Device device() const { return impl_->device(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_sim() const { return device().is_sim(); }
  bool is_cuda() const { return device().is_cuda(); }
  int64_t storage_offset() const { return impl_->storage_offset(); }
  size_t element_size() const { return impl_->itemsize(); }
  size_t itemsize() const { return impl_->itemsize(); }
  // numel() * element_size(): the bytes the elements occupy if laid out densely.
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  const Storage& storage() const { return impl_->storage(); }
  TensorOptions options() const { return TensorOptions(dtype()).device(device()); }

  bool is_conj() const { return impl_->is_conj(); }
  bool is_neg() const { return impl_->is_neg(); }
  bool is_complex() const { return ferry::is_complex(dtype()); }
  bool is_floating_point() const { return ferry::is_floating_point(dtype()); }
  bool requires_grad() const { return impl_->requires_grad(); }

  // Address of the first element (storage data + offset). For device tensors this is a
  // device address that host code must not dereference.
  void* data_ptr() const { return impl_->data(); }
  const void* const_data_ptr() const { return impl_->data(); }
  // Typed pointer; raises DTypeError unless T is this tensor's element type.
  template <typename T>
  T* data_ptr() const {
    FERRY_CHECK_AS(DTypeError, scalar_type_v<std::remove_cv_t<T>> == dtype(), "data_ptr<",
                   scalar_type_name(scalar_type_v<std::remove_cv_t<T>>),
                   ">(): expected the tensor's dtype to be ",
                   scalar_type_name(scalar_type_v<std::remove_cv_t<T>>), ", but it is ", dtype());
    return static_cast<T*>(impl_->data());
  }

  // The single element of a one-element tensor (any rank), converted to T with the copy rules
  // (lazy conj/neg applied). Device tensors are copied to the host first.
  Scalar item() const;
  template <typename T>
  T item() const {
    return item().to<T>();
  }

  bool is_contiguous(MemoryFormat format = MemoryFormat::Contiguous) const;
  bool is_non_overlapping_and_dense() const;
  // ChannelsLast / ChannelsLast3d when the strides are ordered that way, else Contiguous.
  MemoryFormat suggest_memory_format() const;
  // Shares the storage with `other` (not necessarily the same elements).
  bool is_alias_of(const Tensor& other) const;

  // ---- views: no copy, shared storage ----------------------------------------------------
  Tensor as_strided(IntArrayRef sizes, IntArrayRef strides,
                    std::optional<int64_t> storage_offset = std::nullopt) const;
  // One size may be -1 (inferred). Raises ShapeError when the element count differs or the
  // strides cannot express the new shape (use reshape then).
  Tensor view(IntArrayRef sizes) const;
  // A view when the strides allow it, otherwise a contiguous copy.
  Tensor reshape(IntArrayRef sizes) const;
  Tensor permute(IntArrayRef dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  // transpose(0, 1) for 2-d tensors; 0-d and 1-d tensors are returned as they are.
  Tensor t() const;
  // Elements start, start+step, ... < end of `dim`; start and end may be negative and are
  // clamped to the size, as Python slicing does. step must be positive.
  Tensor slice(int64_t dim = 0, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  // Removes `dim`, keeping index `index` of it.
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  // Broadcasts size-1 dimensions (stride 0) and prepends new ones; -1 keeps a size.
  Tensor expand(IntArrayRef sizes) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor unsqueeze(int64_t dim) const;
  // Drops every size-1 dimension, or only `dim` if its size is 1.
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  // Merges dimensions start_dim..end_dim; a view when possible.
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  // Lazy conjugate: a view with the conj bit flipped (complex only; others return *this).
  Tensor conj() const;
  // Lazy negation: a view with the neg bit flipped (PyTorch's _neg_view, used in tests).
  Tensor _neg_view() const;
  // Shallow copy: a new TensorImpl with the same storage and metadata.
  Tensor alias() const;

  // ---- operations that move bytes (ferry/ops) --------------------------------------------
  // Copies src into this tensor (broadcasting src, converting dtypes, across devices).
  Tensor& copy_(const Tensor& src, bool non_blocking = false);
  Tensor& fill_(const Scalar& value);
  Tensor& zero_();
  Tensor contiguous(MemoryFormat format = MemoryFormat::Contiguous) const;
  Tensor clone(MemoryFormat format = MemoryFormat::Preserve) const;
  // No copy when nothing changes, unless copy is true.
  Tensor to(TensorOptions options, bool non_blocking = false, bool copy = false,
            std::optional<MemoryFormat> format = std::nullopt) const;
  Tensor to(ScalarType dtype, bool non_blocking = false, bool copy = false,
            std::optional<MemoryFormat> format = std::nullopt) const;
  Tensor to(Device device, ScalarType dtype, bool non_blocking = false, bool copy = false,
            std::optional<MemoryFormat> format = std::nullopt) const;
  Tensor to(const Tensor& other, bool non_blocking = false, bool copy = false,
            std::optional<MemoryFormat> format = std::nullopt) const;
  Tensor cpu() const;
  // Materialize the lazy bits: a tensor with the bit cleared and the values transformed.
  Tensor resolve_conj() const;
  Tensor resolve_neg() const;

  // ---- memory (ferry/memory) -------------------------------------------------------------
  // A copy in page-locked host memory (this tensor if it already is).
  Tensor pin_memory() const;
  bool is_pinned() const;
  // Keeps the storage's memory from being reused until the work queued on `stream` when the
  // tensor is freed has completed.
  void record_stream(const Stream& stream) const;

  // ---- autograd (ferry/autograd; see docs/autograd.md) -------------------------------------
  // Makes a leaf require grad (floating or complex dtypes only), or stop requiring it (leaves
  // only: a result's requires_grad follows its inputs).
  Tensor& requires_grad_(bool requires_grad = true);
  // The accumulated gradient (undefined until a backward reaches this tensor); mutable_grad()
  // lets code assign or zero it.
  const Tensor& grad() const;
  Tensor& mutable_grad() const;
  // The node that made this tensor (null for leaves and tensors that do not require grad).
  IntrusivePtr<autograd::Node> grad_fn() const;
  // Not the result of a recorded operation.
  bool is_leaf() const;
  // Which output of grad_fn this tensor is.
  uint32_t output_nr() const;
  // Keeps grad() for a non-leaf too.
  void retain_grad() const;
  bool retains_grad() const;
  // Computes the gradients of this tensor with respect to the leaves of its graph and
  // accumulates them into their grad(). `gradient` may be omitted for one-element tensors;
  // retain_graph defaults to create_graph.
  void backward(const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  // A view of the same elements that is out of the graph (shares the version counter).
  Tensor detach() const;
  Tensor& detach_();
  // Makes this tensor (same object, same autograd identity) hold `new_data`'s elements: its
  // storage, sizes, strides, dtype and device. What Module::to does to parameters.
  void set_data(const Tensor& new_data) const;
  // The version counter of the storage: bumped by every in-place write (Note [Version counter]).
  uint32_t _version() const { return impl_->version(); }
  // A view made by a view operation remembers its root base (while they share storage).
  bool is_view() const;
  Tensor _base() const;

  // ---- compute operators (ferry/ops; see docs/ops.md) --------------------------------------
  // Elementwise, broadcasting, with PyTorch's type promotion.
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor add(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor mul(const Tensor& other) const;
  Tensor mul(const Scalar& other) const;
  Tensor div(const Tensor& other) const;
  Tensor div(const Scalar& other) const;
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& add_(const Scalar& other, const Scalar& alpha = 1);
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& sub_(const Scalar& other, const Scalar& alpha = 1);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(const Scalar& other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(const Scalar& other);
  Tensor neg() const;
  Tensor& neg_();
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor& relu_();
  // In place (floating tensors; pow_ also integers to integral powers).
  Tensor& exp_();
  Tensor& log_();
  Tensor& sqrt_();
  Tensor& rsqrt_();
  Tensor& tanh_();
  Tensor& sigmoid_();
  Tensor& pow_(const Scalar& exponent);
  Tensor abs() const;
  // approximate: "none" (the exact erf form) or "tanh".
  Tensor gelu(std::string_view approximate = "none") const;
  Tensor pow(const Scalar& exponent) const;
  Tensor eq(const Tensor& other) const;
  Tensor eq(const Scalar& other) const;
  Tensor ne(const Tensor& other) const;
  Tensor ne(const Scalar& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor lt(const Scalar& other) const;
  Tensor le(const Tensor& other) const;
  Tensor le(const Scalar& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor gt(const Scalar& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor ge(const Scalar& other) const;
  // Reductions over `dims` (all dims when empty); dtype: the accumulation and result dtype.
  Tensor sum(std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor sum(IntArrayRef dims, bool keepdim = false,
             std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor mean(std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor mean(IntArrayRef dims, bool keepdim = false,
              std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor amax(IntArrayRef dims = {}, bool keepdim = false) const;
  // Index of the largest element (of the flattened tensor when dim is not given), int64.
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor softmax(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  Tensor log_softmax(int64_t dim, std::optional<ScalarType> dtype = std::nullopt) const;
  // Linear algebra, PyTorch's rules (matmul broadcasts batch dims; 1-d operands are vectors).
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  // Splits along dim into pieces of `split_size` (the last may be smaller) / `chunks` pieces.
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;

  // "tensor([...], dtype=..., device=...)", as PyTorch's repr.
  std::string str() const;

 private:
  TensorImpl& mut() const { return *impl_; }
  IntrusivePtr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& out, const Tensor& t);

// Arithmetic operators (ferry/ops), as torch::Tensor's.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, const Scalar& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Scalar& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Scalar& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Scalar& b);

// Wraps dim into [0, rank) accepting [-rank, rank); raises IndexError naming `what`, the value
// and the valid range. A 0-d tensor accepts dims as if it had rank 1, as PyTorch does.
int64_t wrap_dim(int64_t dim, int64_t rank, const char* what = "dim");

// Broadcast result of two shapes (PyTorch's rules); raises ShapeError naming both sizes and
// the dimension when they don't match.
DimVector broadcast_shapes(IntArrayRef a, IntArrayRef b);

// Makes a tensor over `storage` with the given metadata, checking that every element it can
// reach lies inside the storage.
Tensor make_tensor(Storage storage, ScalarType dtype, IntArrayRef sizes, IntArrayRef strides,
                   int64_t storage_offset = 0);

}  // namespace ferry
