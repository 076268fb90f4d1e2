// TensorIterator: the layout engine under every elementwise operation, copy_ first. It takes
// outputs, then inputs; broadcasts them to one shape; turns strides into byte strides; orders
// the dimensions so that dimension 0 moves fastest in memory; and merges dimensions that are
// contiguous with each other in every operand. Kernels then walk it as 2-D loops. The
// postconditions of build() are listed on TensorIterator; kernels may rely on all of them.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "ferry/core/tensor.h"
#include "ferry/iter/dim_counter.h"

namespace ferry {

inline constexpr int kMaxIterOperands = 8;
// Elements below which for_each stays on the calling thread (PyTorch's GRAIN_SIZE).
inline constexpr int64_t kGrainSize = 32768;

// The stages of a build, for `ferry explain` and tests: filled only when asked for (see
// TensorIteratorConfig::trace), so normal builds pay nothing for it.
struct IterBuildTrace {
  DimVector broadcast_shape;                 // in the tensors' own dimension order
  std::vector<DimVector> broadcast_strides;  // per operand, bytes, broadcast dims 0
  DimVector perm;                            // reordered dim i is broadcast dim perm[i]
  DimVector reordered_shape;
  std::vector<DimVector> reordered_strides;
};

class TensorIterator;

// What to iterate and which checks to make. The iterator borrows the tensors: they must outlive
// both the config and the TensorIterator built from it.
class TensorIteratorConfig {
 public:
  // Outputs must all be added before the first input. An undefined output is allocated by
  // build() (see resize_outputs).
  TensorIteratorConfig& add_output(const Tensor& output);
  TensorIteratorConfig& add_input(const Tensor& input);
  // Every operand has the same dtype (default true). Off for copies, which convert.
  TensorIteratorConfig& check_all_same_dtype(bool on);
  // Every operand is on the same device (default true). Off for copies across devices.
  TensorIteratorConfig& check_all_same_device(bool on);
  // true (default): outputs take no part in broadcasting, and undefined outputs are allocated
  // with the broadcast shape, the first input's dtype and a layout that follows the inputs'.
  // false: outputs take part in broadcasting and must already have the broadcast shape.
  TensorIteratorConfig& resize_outputs(bool on);
  // Refuse outputs whose elements alias each other and inputs that partly overlap an output
  // (default true). copy_ turns it off: it checks the same things itself, with its own
  // messages, and copies a partly overlapping source through a temporary instead.
  TensorIteratorConfig& check_mem_overlap(bool on);
  // Outputs that build() allocates get this dtype instead of the first input's (comparisons
  // make bool outputs from any inputs).
  TensorIteratorConfig& output_dtype(ScalarType dtype);
  // Record the build's stages into *trace (nullptr: don't). Disables the fast path for
  // same-shape dense operands so that every stage is shown; the result is the same.
  TensorIteratorConfig& trace(IterBuildTrace* trace);

  TensorIterator build();

 private:
  friend class TensorIterator;
  std::array<const Tensor*, kMaxIterOperands> tensors_{};
  int num_outputs_ = 0;
  int num_inputs_ = 0;
  bool check_all_same_dtype_ = true;
  bool check_all_same_device_ = true;
  bool resize_outputs_ = true;
  bool check_mem_overlap_ = true;
  bool has_output_dtype_ = false;
  ScalarType output_dtype_ = ScalarType::Float32;
  IterBuildTrace* trace_ = nullptr;
};

// The result of TensorIteratorConfig::build(). Operand `arg` is output `arg` for
// arg < noutputs(), then the inputs in the order they were added.
//
// @post shape() is the operands' broadcast shape with its dimensions permuted and merged;
//       numel() == the product of the broadcast shape.
// @post for every operand and every linear index i in [0, numel()) (dimension 0 fastest),
//       sum_d index_d(i) * strides(arg)[d] is the byte offset, from data_ptr(arg), of the
//       element of that operand the broadcast shape puts at position i of some fixed
//       permutation of the broadcast index space, the same permutation for every operand.
//       (That is: build() only reorders and merges dimensions; it never changes which
//       elements of different operands are paired.)
// @post if numel() > 0 and ndim() > 1: no dimension has size 1.
// @post no two adjacent dimensions d, d+1 satisfy shape[d] * strides(arg)[d] ==
//       strides(arg)[d+1] for every operand: the merge is maximal.
// @post dimensions are ordered by the outputs' strides, ties and broadcast dimensions by the
//       inputs', fastest first: strides(0) is non-decreasing over its non-zero entries.
// @post strides are in bytes; an input's stride is 0 along dimensions it is broadcast over.
class TensorIterator {
 public:
  TensorIterator() = default;

  int ndim() const { return static_cast<int>(shape_.size()); }
  IntArrayRef shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  int ntensors() const { return num_operands_; }
  int noutputs() const { return num_outputs_; }
  int ninputs() const { return num_operands_ - num_outputs_; }

  // Byte strides of operand `arg` along each of the ndim() dimensions.
  IntArrayRef strides(int arg) const { return op(arg).stride_bytes; }
  void* data_ptr(int arg) const { return op(arg).data; }
  ScalarType dtype(int arg = 0) const { return op(arg).dtype; }
  Device device(int arg = 0) const { return op(arg).device; }
  DeviceType device_type(int arg = 0) const { return op(arg).device.type(); }
  int64_t element_size(int arg) const {
    return static_cast<int64_t>(ferry::element_size(dtype(arg)));
  }
  // The operand's tensor (an allocated output once build() has made it).
  const Tensor& tensor(int arg) const {
    const OperandInfo& o = op(arg);
    return o.borrowed != nullptr ? *o.borrowed : o.owned;
  }
  const Tensor& output(int i = 0) const { return tensor(i); }
  const Tensor& input(int i = 0) const { return tensor(num_outputs_ + i); }
  // The first non-CPU device among the operands, else CPU.
  Device common_device() const { return common_device_; }

  // One element, or every operand dense along a single dimension.
  bool is_contiguous() const;
  // Every operand's dimension-0 stride is its element size.
  bool has_contiguous_first_dim() const;

  // Points operand `arg` at `data` (same layout elsewhere): how a device that runs host kernels
  // over its own mapping of the memory (sim) retargets an iterator built with device addresses.
  void set_data_ptr(int arg, void* data) {
    operands_.at(static_cast<size_t>(arg)).data = static_cast<char*>(data);
  }
  // Drops the iterator's references to its tensors, keeping shape, strides, dtypes and data
  // pointers: for a copy that a kernel runs later, elsewhere (the caller keeps the memory alive,
  // as stream ordering does on a device). tensor() must not be called afterwards.
  void release_tensors();

  // Calls loop over the whole iteration space, split across get_num_threads() threads with
  // parallel_for when numel() >= grain_size (each chunk of at least grain_size elements).
  void for_each(Loop2d loop, int64_t grain_size = kGrainSize) const;
  // Calls loop over `range` (linear indices, dimension 0 fastest) on the calling thread.
  void serial_for_each(Loop2d loop, Range range) const;

 private:
  friend class TensorIteratorConfig;

  struct OperandInfo {
    const Tensor* borrowed = nullptr;  // null for an output the iterator allocated
    Tensor owned;                      // that output
    DimVector stride_bytes;
    char* data = nullptr;
    ScalarType dtype = ScalarType::Float32;
    Device device;
    bool is_output = false;
    bool allocate = false;  // undefined output: build() allocates it
  };

  const OperandInfo& op(int arg) const {
    FERRY_CHECK_AS(IndexError, arg >= 0 && arg < num_operands_, "TensorIterator: operand ", arg,
                   " out of range: expected a value in [0, ", num_operands_, ")");
    return operands_[arg];
  }

  void build(const TensorIteratorConfig& config);
  void populate_operands(const TensorIteratorConfig& config);
  void check_mem_overlaps() const;
  void compute_shape(const TensorIteratorConfig& config);
  void compute_types(const TensorIteratorConfig& config);
  bool fast_set_up();
  void compute_strides();
  void reorder_dimensions();
  void allocate_outputs();
  void coalesce_dimensions();
  void record_stage(IterBuildTrace* trace, bool reordered) const;

  std::array<OperandInfo, kMaxIterOperands> operands_;
  int num_operands_ = 0;
  int num_outputs_ = 0;
  DimVector shape_;
  DimVector perm_;  // reordered dim i is broadcast dim perm_[i] (full path only)
  int64_t numel_ = 0;
  Device common_device_;
  bool all_same_shape_ = true;
};

}  // namespace ferry
