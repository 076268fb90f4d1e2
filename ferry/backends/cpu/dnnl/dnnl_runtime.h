// The oneDNN side of the CPU compute kernels: the shared engine, the OpenMP team rule, memory
// descriptors for ferry tensors, the primitive cache, execution with a per-thread scratchpad,
// and the translation of oneDNN errors into ferry errors. Private to the library (not installed:
// it includes oneDNN's headers). Every function here is safe to call from several threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ferry/core/small_vector.h"
#include "ferry/core/tensor.h"
#include "ferry/iter/function_ref.h"

namespace ferry::cpu::onednn {

// The one CPU engine every kernel uses (oneDNN engines are thread-safe).
const dnnl::engine& engine();

// The threading rule (see docs/kernels.md): oneDNN runs on the calling thread's own OpenMP team,
// whose size omp_set_num_threads sets per thread. A TeamScope sets it, for its lifetime, to this
// call's share of ferry::get_num_threads(): concurrent calls share that budget (a call that
// finds it spent runs on its own thread alone), a call made inside a ferry parallel region runs
// alone, and TSan builds run alone (libgomp's threads are invisible to TSan). The previous value
// is restored on exit. Primitives must be built inside the scope too: oneDNN sizes its work
// split when it builds one, so the team size is part of the cache key.
class TeamScope {
 public:
  TeamScope();
  ~TeamScope();
  TeamScope(const TeamScope&) = delete;
  TeamScope& operator=(const TeamScope&) = delete;
  int size() const { return size_; }

 private:
  int size_ = 1;
  int previous_ = 1;
};

// f32, bf16 or f16; raises DTypeError naming op for other dtypes.
dnnl::memory::data_type data_type_of(ScalarType dtype, const char* op);
// sizes and strides as oneDNN dims (a 0-d tensor is described as [1]). A tensor dense in
// `format` gets that format's canonical strides, so that size-1 dimensions never hide the layout
// from oneDNN.
dnnl::memory::desc desc_of(const Tensor& t, const char* op);
dnnl::memory::desc desc_of(const Tensor& t, IntArrayRef sizes, IntArrayRef strides, const char* op);
dnnl::memory::dims dims_of(IntArrayRef values);
// t's strides, made canonical when t is dense in the contiguous or channels-last format.
DimVector layout_strides(const Tensor& t);
// A memory object over t's elements (no copy).
dnnl::memory memory_of(const dnnl::memory::desc& desc, const Tensor& t);
// A memory object over `bytes` of this thread's scratch buffer number `slot` (0 is the
// scratchpad's); grows it as needed. Valid until the next call with the same slot on this thread.
dnnl::memory scratch_memory(const dnnl::memory::desc& desc, int slot);
// Copies the elements of `plain` (a host tensor of mem's dims and data type, any strides) into
// `mem`, or back, with ferry's copy engine instead of a oneDNN reorder: for a plain strided
// layout (NCHW <-> NHWC) or one blocked on a single dimension without padding (nChw16c), where
// oneDNN 2.6's reorders run at a fraction of memory speed (Note [Activation reorders] in
// conv.cc). False, copying nothing, when mem's layout is another kind.
bool copy_into_memory(const Tensor& plain, const dnnl::memory& mem);
bool copy_from_memory(const dnnl::memory& mem, const Tensor& plain);

// True when oneDNN picked its reference (scalar, unvectorized) implementation.
bool is_reference_impl(const dnnl::primitive_desc_base& pd);

// What a cache entry knows. Kernels derive from it to keep the descriptors they need.
struct CachedPrimitive {
  enum class Status {
    kReady,             // primitive is built
    kDtypeUnsupported,  // oneDNN has no implementation for this dtype on this CPU (float16)
    kPrefersDense,      // only the reference implementation takes these strides: stage them
  };
  virtual ~CachedPrimitive() = default;
  Status status = Status::kReady;
  dnnl::primitive primitive;
  size_t scratchpad_bytes = 0;
  std::string impl;  // oneDNN's implementation name, for error messages and docs
};

// The words of a cache key. Kinds start it, so keys of different kernels never collide.
class CacheKey {
 public:
  explicit CacheKey(int64_t kind) { words_.push_back(kind); }
  CacheKey& add(int64_t value) {
    words_.push_back(value);
    return *this;
  }
  CacheKey& add_double(double value);
  CacheKey& add(IntArrayRef values);
  // Defined or not, dtype, sizes and strides.
  CacheKey& add(const Tensor& t);
  std::span<const int64_t> words() const { return {words_.data(), words_.size()}; }

 private:
  SmallVector<int64_t, 64> words_;
};

// Kinds of cache entries (the first word of a key).
enum Kind : int64_t {
  kGemm = 1,
  kConvForward,
  kConvBackwardData,
  kConvBackwardWeights,
  kPoolForward,
  kPoolBackward,
  kBatchNormForward,
  kBatchNormBackward,
  kLayerNormForward,
  kLayerNormBackward,
  kSoftmaxForward,
  kSoftmaxBackward,
};

using BuildFn = FunctionRef<std::shared_ptr<CachedPrimitive>()>;
// The entry for key (the team size is appended here), built with `build` on a miss. `build` runs
// without the cache's lock held; when two threads miss at once both build and the first insert
// wins. A failing build (an exception) caches nothing.
std::shared_ptr<const CachedPrimitive> find_or_build(CacheKey key, const TeamScope& team,
                                                     BuildFn build);
template <typename Entry>
std::shared_ptr<const Entry> find_or_build_as(CacheKey key, const TeamScope& team, BuildFn build) {
  return std::static_pointer_cast<const Entry>(find_or_build(std::move(key), team, build));
}

// A primitive descriptor attribute with the scratchpad left to us (see execute).
dnnl::primitive_attr default_attr();

// Runs entry.primitive with args on this thread's stream and waits; adds the scratchpad.
void execute(const CachedPrimitive& entry, std::unordered_map<int, dnnl::memory>& args);
void execute(const dnnl::primitive& primitive, std::unordered_map<int, dnnl::memory>& args,
             size_t scratchpad_bytes);

// Rethrows a dnnl::error as a ferry error naming the primitive and the shapes: unimplemented
// -> NotImplementedError, out of memory -> OutOfMemoryError, anything else -> Error.
[[noreturn]] void rethrow(const dnnl::error& e, const char* primitive, const std::string& shapes);

}  // namespace ferry::cpu::onednn
