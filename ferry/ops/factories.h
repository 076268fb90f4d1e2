// Tensor factories, as PyTorch's: empty, empty_strided, empty_like, zeros, ones, full, arange,
// rand, randn, randint, from_blob. Every factory takes TensorOptions (dtype, device, memory
// format, pinned memory); values are produced on the host and moved to a device when one is
// asked for, so every device gets exactly the same numbers for the same seed.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "ferry/core/generator.h"
#include "ferry/core/scalar.h"
#include "ferry/core/tensor.h"
#include "ferry/core/tensor_options.h"

namespace ferry {

// Uninitialized memory laid out in options.memory_format() (Contiguous by default).
Tensor empty(IntArrayRef sizes, TensorOptions options = {});
// Uninitialized memory with exactly these strides (storage sized to reach every element).
Tensor empty_strided(IntArrayRef sizes, IntArrayRef strides, TensorOptions options = {});
// Same sizes as `like`, and its dtype and device unless `options` says otherwise. The layout
// follows `format`; Preserve (the default) keeps `like`'s strides when it is non-overlapping
// and dense, else makes dense strides that order the dimensions in memory as `like`'s strides
// do (infer_dense_strides, as PyTorch): a sliced transpose gets a dense transposed layout.
Tensor empty_like(const Tensor& like, TensorOptions options = {},
                  std::optional<MemoryFormat> format = std::nullopt);

Tensor zeros(IntArrayRef sizes, TensorOptions options = {});
Tensor ones(IntArrayRef sizes, TensorOptions options = {});
// Defaults to the Scalar's own dtype kind: bool, int64, float32 or complex64.
Tensor full(IntArrayRef sizes, const Scalar& value, TensorOptions options = {});
Tensor zeros_like(const Tensor& like, TensorOptions options = {});
Tensor ones_like(const Tensor& like, TensorOptions options = {});
Tensor full_like(const Tensor& like, const Scalar& value, TensorOptions options = {});

// [start, end) by step; int64 when every bound is integral, else float32 (unless options say).
Tensor arange(const Scalar& end, TensorOptions options = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1,
              TensorOptions options = {});

// Uniform [0, 1), standard normal, and integers uniform in [low, high). Floating dtypes only
// for rand/randn (float32 by default); randint defaults to int64. Each element is drawn from
// the generator's seed and its own index, so the values are generated over the thread pool and
// do not depend on the thread count.
Tensor rand(IntArrayRef sizes, TensorOptions options = {}, Generator* generator = nullptr);
Tensor randn(IntArrayRef sizes, TensorOptions options = {}, Generator* generator = nullptr);
Tensor randint(int64_t low, int64_t high, IntArrayRef sizes, TensorOptions options = {},
               Generator* generator = nullptr);
Tensor randint(int64_t high, IntArrayRef sizes, TensorOptions options = {},
               Generator* generator = nullptr);

// A tensor over memory ferry does not own. With a deleter, it is called with `data` when the
// last tensor using the memory goes away; without one, the caller keeps the memory alive.
// `options.device()` says where `data` lives (default cpu).
Tensor from_blob(void* data, IntArrayRef sizes, TensorOptions options = {});
Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, TensorOptions options = {});
Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides,
                 std::function<void(void*)> deleter, TensorOptions options = {});

}  // namespace ferry
