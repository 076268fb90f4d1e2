// DLPack exchange: export a ferry tensor as a DLManagedTensor (DLPack 0.x) or a
// DLManagedTensorVersioned (1.x) and import either, zero-copy, without Python. The exported
// struct holds a reference to the tensor's storage until its deleter runs; an imported tensor
// calls the producer's deleter exactly once, when the last tensor using the memory goes away.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <functional>
#include <optional>

#include "ferry/core/device.h"
#include "ferry/core/error.h"
#include "ferry/core/scalar_type.h"
#include "ferry/core/tensor.h"

// Debian 12's libdlpack-dev is DLPack 0.6 (DLPACK_VERSION 60): it has DLManagedTensor but not
// the versioned struct of DLPack 1.0. Where the header lacks it, the 1.x ABI is declared here
// with the same names, field for field in DLPack 1.0's order, so that code built against a 1.x
// header sees exactly the same types. (DLTensor, DLDevice and DLDataType did not change.)
#if !defined(DLPACK_MAJOR_VERSION)
extern "C" {
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
}  // extern "C"
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#endif

namespace ferry {

// A tensor that cannot be exchanged as asked (a dtype or device DLPack cannot name, a copy that
// copy=false forbids, a version the consumer cannot read). Python sees it as a BufferError.
class DLPackError : public Error {
 public:
  using Error::Error;
};

namespace dlpack {

// The DLPack version ferry writes into versioned exports and reads up to (1.1 adds float8).
inline constexpr uint32_t kMajor = 1;
inline constexpr uint32_t kMinor = 1;

// Type codes newer than Debian's 0.6 header: kDLBool (DLPack 0.8), kDLFloat8_e4m3fn and
// kDLFloat8_e5m2 (DLPack 1.1).
inline constexpr uint8_t kBoolCode = 6;
inline constexpr uint8_t kFloat8E4m3fnCode = 10;
inline constexpr uint8_t kFloat8E5m2Code = 12;

// The `stream` value that asks the producer not to synchronize at all.
inline constexpr int64_t kNoSync = -1;

}  // namespace dlpack

// ---- types and devices -----------------------------------------------------------------------

// DLPack's name for `dtype`: bool is kDLBool (8 bits), bfloat16 kDLBfloat, complex kDLComplex
// with the pair's bits, float8 kDLFloat8_e4m3fn / kDLFloat8_e5m2. A consumer that reads only
// `version` (a legacy capsule counts as 0.x) cannot be given float8: DLPackError says so.
DLDataType to_dlpack_dtype(ScalarType dtype,
                           DLPackVersion version = {dlpack::kMajor, dlpack::kMinor});
// The ferry dtype of a DLPack type; raises DLPackError naming code, bits and lanes otherwise.
ScalarType dtype_from_dlpack(DLDataType type);

// cpu -> (kDLCPU, 0); sim:i -> (kDLExtDev, i); cuda:i -> (kDLCUDA, i). Index-less devices are
// resolved to the current one.
DLDevice to_dlpack_device(Device device);
// kDLCPU, kDLCUDAHost and kDLROCMHost (host memory) -> cpu; kDLCUDA -> cuda:i; kDLExtDev -> sim:i
// (ferry reads the extension device as its sim device). Raises DLPackError for other types.
Device device_from_dlpack(DLDevice device);

// ---- export ----------------------------------------------------------------------------------

struct DLPackExportOptions {
  // The consumer's stream, in the protocol's encoding for the exported data's device:
  //   CUDA: a cudaStream_t as an integer; 1 the legacy default stream, 2 the per-thread default
  //         stream; nullopt means 1; 0 is refused (ambiguous);
  //   sim:  the ferry stream id on that device (0 the default stream, 1.. the pool); nullopt
  //         means 0;
  //   cpu:  only nullopt (or kNoSync).
  // kNoSync (-1) skips the handshake. Otherwise, when the consumer's stream is not the
  // producer's current stream, an event recorded on the latter is waited on by the former (the
  // host never blocks) and the storage is kept from reuse until the consumer's work is done.
  std::optional<int64_t> stream;
  // The highest DLPack version the consumer reads; nullopt or a major version 0 gives a legacy
  // DLManagedTensor, 1 or more a DLManagedTensorVersioned of version 1.min(minor, 1).
  std::optional<DLPackVersion> max_version;
  // Where the consumer wants the data; nullopt: where it is. Another device means a copy
  // (device to host copies complete before export returns).
  std::optional<DLDevice> dl_device;
  // true: always copy; false: never (DLPackError when one is needed); nullopt: when needed
  // (another device, or lazy conj/neg bits that DLPack cannot carry).
  std::optional<bool> copy;
};

// What export_dlpack made: exactly one of the two is set, owned by the caller, who hands it to a
// consumer or calls its deleter. `copied` tells whether the data is a copy (for versioned
// exports DLPACK_FLAG_BITMASK_IS_COPIED says the same).
struct DLPackExport {
  DLManagedTensor* legacy = nullptr;
  DLManagedTensorVersioned* versioned = nullptr;
  bool copied = false;
};

// The producer's side of the protocol. The exported DLTensor points at the first element
// (byte_offset 0, as PyTorch and numpy write it, since some consumers ignore byte_offset),
// always has strides, and has a null data pointer when it holds no element.
DLPackExport export_dlpack(const Tensor& tensor, const DLPackExportOptions& options = {});

// Zero-copy exports for C++ callers who order their streams themselves: no stream work, no copy
// (DLPackError for a tensor with lazy conj/neg bits; resolve them first).
DLManagedTensor* to_dlpack(const Tensor& tensor);
DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& tensor);

// ---- import ----------------------------------------------------------------------------------

struct DLPackImportOptions {
  // true: copy into memory ferry allocates and release the producer's tensor at once; false:
  // never copy (a read-only tensor raises); nullopt: copy only read-only tensors (ferry tensors
  // are always writable).
  std::optional<bool> copy;
  // Runs the producer's deleter (passed as `call`); empty: it is called directly. For producers
  // whose deleter needs a lock held: the Python bindings take the GIL here, since the last
  // reference may go away on any thread.
  std::function<void(const std::function<void()>& call)> run_deleter;
};

// The consumer's side: a tensor over the producer's memory (sizes, strides and byte_offset as
// given; null strides mean row-major). On success the tensor owns `managed` and calls its
// deleter once, when the last tensor (view, copy of the handle) using the memory goes away; on an
// exception `managed` is untouched and still the caller's. kDLExtDev memory is accepted only
// when it lies in a live sim allocation of this process on that device.
Tensor from_dlpack(DLManagedTensor* managed, const DLPackImportOptions& options = {});
// As above; the version's major must be 1, and a read-only tensor is copied (see `copy`).
Tensor from_dlpack(DLManagedTensorVersioned* managed, const DLPackImportOptions& options = {});

// ---- consumer streams ------------------------------------------------------------------------

// The `stream` a ferry consumer passes to a producer whose data is on `device`: the calling
// thread's current stream there in the encoding above (CUDA: its handle, 1 for the legacy
// default stream; sim: its id), nullopt for the CPU or a device ferry does not have.
std::optional<int64_t> dlpack_consumer_stream(DLDevice device);

// Exports whose deleter has not run yet (for leak tests and diagnostics).
int64_t dlpack_exports_alive();

}  // namespace ferry
