// The producer's side of DLPack: decides whether a copy is needed (another device, lazy bits,
// copy=true), orders the consumer's stream after the producer's with an event (never a device
// synchronize), and wraps a reference to the tensor in a DLManagedTensor[Versioned] whose deleter
// drops it. One heap block per export holds the reference, the shape and the strides.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

#include "ferry/core/error.h"
#include "ferry/core/small_vector.h"
#include "ferry/device/backend.h"
#include "ferry/device/event.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/interop/dlpack.h"

namespace ferry {
namespace {

std::atomic<int64_t>& alive() {
  static std::atomic<int64_t> count{0};
  return count;
}

// Owns what one export points to; freed by the deleter.
struct ExportContext {
  Tensor tensor;
  DimVector shape;
  DimVector strides;
  DLManagedTensor legacy{};
  DLManagedTensorVersioned versioned{};

  explicit ExportContext(Tensor t)
      : tensor(std::move(t)), shape(tensor.sizes()), strides(tensor.strides()) {
    alive().fetch_add(1, std::memory_order_relaxed);
  }
  ~ExportContext() { alive().fetch_sub(1, std::memory_order_relaxed); }
  ExportContext(const ExportContext&) = delete;
  ExportContext& operator=(const ExportContext&) = delete;

  void fill(DLTensor& out, DLPackVersion version) {
    out.data = tensor.numel() == 0 ? nullptr : tensor.data_ptr();
    out.device = to_dlpack_device(tensor.device());
    out.ndim = static_cast<int>(tensor.dim());
    out.dtype = to_dlpack_dtype(tensor.dtype(), version);
    out.shape = shape.data();
    out.strides = strides.data();
    out.byte_offset = 0;
  }
};

void delete_legacy(DLManagedTensor* self) { delete static_cast<ExportContext*>(self->manager_ctx); }
void delete_versioned(DLManagedTensorVersioned* self) {
  delete static_cast<ExportContext*>(self->manager_ctx);
}

const char* copy_reason(const Tensor& t, Device target) {
  if (t.device() != target) return "it is asked for on another device";
  if (t.is_conj()) return "its conjugate bit is set (DLPack has no lazy conjugation)";
  if (t.is_neg()) return "its negative bit is set (DLPack has no lazy negation)";
  return nullptr;
}

// The consumer's stream waits for the work queued so far on the producer's current stream.
void stream_handshake(const Tensor& t, std::optional<int64_t> stream) {
  const Device d = t.device();
  if (d.is_cpu()) {
    FERRY_CHECK_AS(
        DLPackError, !stream || *stream == dlpack::kNoSync,
        "DLPack export: expected stream=None for data on the cpu, but got stream=", *stream);
    return;
  }
  if (stream && *stream == dlpack::kNoSync) return;
  const Stream producer = current_stream(d);
  if (d.is_sim()) {
    const int64_t id = stream.value_or(kDefaultStreamId);
    FERRY_CHECK_AS(DLPackError, id >= 0 && id <= kStreamPoolSize,
                   "DLPack export: expected a sim stream id between 0 and ", kStreamPoolSize,
                   " (or -1 for no synchronization), but got stream=", id);
    const Stream consumer(d, static_cast<StreamId>(id));
    if (consumer == producer) return;
    wait_stream(consumer, producer);
    // The consumer's work may outlive its reference: the storage waits for it before reuse.
    t.record_stream(consumer);
    return;
  }
  const int64_t value = stream.value_or(1);
  FERRY_CHECK_AS(DLPackError, value != 0,
                 "DLPack export: stream=0 is ambiguous for CUDA; expected 1 (legacy default "
                 "stream), 2 (per-thread default stream), a stream handle, or -1");
  FERRY_CHECK_AS(
      DLPackError, value > 0,
      "DLPack export: expected a CUDA stream handle, 1, 2 or -1, but got stream=", value);
  const RawStream consumer =
      value == 1 ? nullptr : reinterpret_cast<RawStream>(static_cast<intptr_t>(value));
  if (consumer == producer.raw()) return;
  Event ready;
  ready.record(producer);
  get_backend(d.type()).stream_wait_event(d.index(), consumer, ready.raw());
}

Device target_device(const Tensor& t, const DLPackExportOptions& options) {
  if (!options.dl_device) return t.device();
  const Device d = device_from_dlpack(*options.dl_device);
  if (d.is_cpu()) return d;
  FERRY_CHECK_AS(DLPackError, d.index() < device_count(d.type()), "DLPack export: dl_device (",
                 static_cast<int>(options.dl_device->device_type), ", ",
                 options.dl_device->device_id, ") names ", d, ", but there are ",
                 device_count(d.type()), " ", d.type(), " devices");
  return d;
}

}  // namespace

DLPackExport export_dlpack(const Tensor& tensor, const DLPackExportOptions& options) {
  FERRY_CHECK_AS(DLPackError, tensor.defined(), "DLPack export: expected a defined tensor");
  const Device target = target_device(tensor, options);
  const char* reason = copy_reason(tensor, target);
  const bool copy = options.copy.value_or(false) || reason != nullptr;
  FERRY_CHECK_AS(DLPackError, !copy || options.copy.value_or(true),
                 "DLPack export: the tensor cannot be shared without a copy because ", reason,
                 ", and copy=False forbids one");

  Tensor shared = tensor;
  if (copy) {
    // to() resolves the lazy bits and keeps a dense layout; a device-to-host copy is blocking,
    // so host data is complete when the consumer sees it.
    shared = tensor.to(TensorOptions(tensor.dtype()).device(target), /*non_blocking=*/false,
                       /*copy=*/true);
    if (shared.is_conj()) shared = shared.resolve_conj();
    if (shared.is_neg()) shared = shared.resolve_neg();
  }

  const bool versioned = options.max_version && options.max_version->major >= 1;
  DLPackVersion version{0, 0};
  if (versioned) {
    version.major = dlpack::kMajor;
    version.minor = options.max_version->major > dlpack::kMajor
                        ? dlpack::kMinor
                        : std::min(options.max_version->minor, dlpack::kMinor);
  }
  auto context = std::make_unique<ExportContext>(shared);
  DLPackExport out;
  out.copied = copy;
  if (versioned) {
    DLManagedTensorVersioned& m = context->versioned;
    context->fill(m.dl_tensor, version);
    m.version = version;
    m.manager_ctx = context.get();
    m.deleter = &delete_versioned;
    m.flags = copy ? DLPACK_FLAG_BITMASK_IS_COPIED : 0;
    out.versioned = &m;
  } else {
    DLManagedTensor& m = context->legacy;
    context->fill(m.dl_tensor, version);
    m.manager_ctx = context.get();
    m.deleter = &delete_legacy;
    out.legacy = &m;
  }
  stream_handshake(shared, options.stream);
  context.release();  // now owned by the export's deleter
  return out;
}

DLManagedTensor* to_dlpack(const Tensor& tensor) {
  return export_dlpack(tensor, {.stream = dlpack::kNoSync, .copy = false}).legacy;
}

DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& tensor) {
  return export_dlpack(tensor, {.stream = dlpack::kNoSync,
                                .max_version = DLPackVersion{dlpack::kMajor, dlpack::kMinor},
                                .copy = false})
      .versioned;
}

int64_t dlpack_exports_alive() { return alive().load(std::memory_order_relaxed); }

}  // namespace ferry
