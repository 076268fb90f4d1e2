// The consumer's side of DLPack: checks everything a DLTensor says before taking ownership, then
// wraps the producer's memory with from_blob so that the producer's deleter runs exactly once,
// when the last tensor using the memory goes away. Read-only and copy=true imports are copied.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "ferry/backends/sim/sim.h"
#include "ferry/core/error.h"
#include "ferry/core/small_vector.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/interop/dlpack.h"
#include "ferry/ops/factories.h"

namespace ferry {
namespace {

struct Checked {
  ScalarType dtype;
  Device device;
  DimVector sizes;
  DimVector strides;
  void* data;
  int64_t numel;
};

// The lowest and one past the highest byte the tensor's elements reach, relative to data.
std::pair<int64_t, int64_t> extent(const Checked& c) {
  int64_t last = 0;
  for (size_t d = 0; d < c.sizes.size(); ++d) last += (c.sizes[d] - 1) * c.strides[d];
  return {0, (last + 1) * static_cast<int64_t>(element_size(c.dtype))};
}

// Sim memory of this process on that device, or a refusal: kDLExtDev means different things to
// different producers, and ferry only reads it as its own sim device.
void check_sim_memory(const Checked& c) {
  if (c.numel == 0) return;
  const auto [lo, hi] = extent(c);
  const char* base = static_cast<const char*>(c.data);
  for (const char* p : {base + lo, base + hi - 1}) {
    FERRY_CHECK_AS(DLPackError, sim::device_of(p) == c.device.index(), "DLPack import: a ",
                   "kDLExtDev tensor is read as ferry's sim device, but ",
                   static_cast<const void*>(p), " is not in a live allocation of ", c.device,
                   " in this process");
  }
}

Checked check(const DLTensor& t) {
  Checked c{};
  c.dtype = dtype_from_dlpack(t.dtype);
  c.device = device_from_dlpack(t.device);
  if (!c.device.is_cpu()) {
    const int count = device_count(c.device.type());
    FERRY_CHECK_AS(
        DLPackError, c.device.index() < count, "DLPack import: the tensor is on ", c.device,
        ", but there are ", count, " ", c.device.type(), " devices here",
        count == 0 ? " (" + device_unavailable_reason(c.device.type()) + ")" : std::string());
  }
  FERRY_CHECK_AS(DLPackError, t.ndim >= 0 && t.ndim <= 64,
                 "DLPack import: expected between 0 and 64 dimensions, but got ", t.ndim);
  FERRY_CHECK_AS(DLPackError, t.ndim == 0 || t.shape != nullptr,
                 "DLPack import: expected a shape for a tensor of ", t.ndim, " dimensions");
  c.numel = 1;
  for (int d = 0; d < t.ndim; ++d) {
    FERRY_CHECK_AS(DLPackError, t.shape[d] >= 0, "DLPack import: expected sizes >= 0, but size ", d,
                   " is ", t.shape[d]);
    c.sizes.push_back(t.shape[d]);
    if (__builtin_mul_overflow(c.numel, t.shape[d], &c.numel)) {
      FERRY_FAIL_AS(DLPackError, "DLPack import: the element count overflows int64");
    }
  }
  if (t.strides == nullptr || t.ndim == 0) {
    int64_t stride = 1;
    c.strides = DimVector(c.sizes.size(), 0);
    for (int d = t.ndim - 1; d >= 0; --d) {
      c.strides[d] = stride;
      stride *= std::max<int64_t>(c.sizes[d], 1);
    }
  } else {
    for (int d = 0; d < t.ndim; ++d) {
      // A size-1 or empty dimension's stride never moves the address; normalize a negative one.
      const int64_t s = c.sizes[d] <= 1 ? std::max<int64_t>(t.strides[d], 0) : t.strides[d];
      FERRY_CHECK_AS(DLPackError, s >= 0 || c.numel == 0,
                     "DLPack import: ferry has no negative strides, but stride ", d, " is ",
                     t.strides[d], " (a reversed view); make it contiguous first");
      c.strides.push_back(std::max<int64_t>(s, 0));
    }
  }
  FERRY_CHECK_AS(DLPackError, t.data != nullptr || c.numel == 0,
                 "DLPack import: expected a data pointer for a tensor of ", c.numel, " elements");
  FERRY_CHECK_AS(DLPackError,
                 t.byte_offset <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                 "DLPack import: byte_offset ", t.byte_offset, " is out of range");
  c.data = t.data == nullptr ? nullptr : static_cast<char*>(t.data) + t.byte_offset;
  if (c.device.is_sim()) check_sim_memory(c);
  return c;
}

template <typename Managed>
Tensor import(Managed* managed, bool read_only, const DLPackImportOptions& options) {
  FERRY_CHECK_AS(DLPackError, managed != nullptr, "DLPack import: expected a tensor, got nullptr");
  const Checked c = check(managed->dl_tensor);
  const bool copy = options.copy.value_or(false) || read_only;
  FERRY_CHECK_AS(DLPackError, !copy || options.copy.value_or(true),
                 "DLPack import: the tensor is read-only, ferry tensors are always writable, and "
                 "copy=False forbids a copy");
  std::function<void(void*)> release;
  if (managed->deleter != nullptr) {
    release = [managed, run = options.run_deleter](void*) {
      if (run) {
        run([managed] { managed->deleter(managed); });
      } else {
        managed->deleter(managed);
      }
    };
  } else {
    release = [](void*) {};
  }
  // From here on the tensor owns `managed` (everything from_blob checks was checked above).
  Tensor shared = from_blob(c.data, c.sizes, c.strides, std::move(release),
                            TensorOptions(c.dtype).device(c.device));
  if (!copy) return shared;
  Tensor out = shared.clone();
  // `shared` goes away below and releases the producer's tensor: the copy must be done by then.
  if (!c.device.is_cpu()) current_stream(c.device).synchronize();
  return out;
}

}  // namespace

Tensor from_dlpack(DLManagedTensor* managed, const DLPackImportOptions& options) {
  return import(managed, /*read_only=*/false, options);
}

Tensor from_dlpack(DLManagedTensorVersioned* managed, const DLPackImportOptions& options) {
  FERRY_CHECK_AS(DLPackError, managed != nullptr, "DLPack import: expected a tensor, got nullptr");
  FERRY_CHECK_AS(DLPackError, managed->version.major == dlpack::kMajor,
                 "DLPack import: expected a DLManagedTensorVersioned of major version ",
                 dlpack::kMajor, ", but got version ", managed->version.major, ".",
                 managed->version.minor);
  return import(managed, (managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0, options);
}

}  // namespace ferry
