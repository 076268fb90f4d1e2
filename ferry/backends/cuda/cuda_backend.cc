// The CUDA backend: the device contract (ferry/device/backend.h) as a thin mapping onto the CUDA
// runtime API, one runtime call per primitive (the synchronous memset and memcpy are an async
// call and a synchronize), nothing cached but the device count.
// A machine without a driver or GPU reports 0 devices with the runtime's reason and never fails
// at load time; every call on such a machine raises "cuda:N: no CUDA device (...)".
// Errors name the device and the runtime call: "cuda:0: cudaMalloc(1048576 bytes) failed: out of
// memory". Non-sticky errors are cleared (cudaGetLastError) so they do not resurface later.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/device/backend.h"

namespace ferry::cuda {
namespace {

std::string version_text(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// Raises for a failed call; `call` is the runtime function and its salient arguments.
void check(cudaError_t error, int device, const std::string& call) {
  if (error == cudaSuccess) return;
  (void)cudaGetLastError();  // clear it unless it is sticky (then every later call reports it)
  const std::string prefix = device >= 0 ? "cuda:" + std::to_string(device) + ": " : "cuda: ";
  if (error == cudaErrorMemoryAllocation) {
    FERRY_FAIL_AS(OutOfMemoryError, prefix, call, " failed: ", cudaGetErrorString(error));
  }
  FERRY_FAIL_AS(DeviceError, prefix, call, " failed: ", cudaGetErrorString(error), " (",
                cudaGetErrorName(error), ")");
}

// Makes `device` current for the calls in its scope and restores the previous one.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    int current = -1;
    check(cudaGetDevice(&current), device, "cudaGetDevice");
    if (current != device) {
      check(cudaSetDevice(device), device, "cudaSetDevice");
      previous_ = current;
    }
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  ~ScopedDevice() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }

 private:
  int previous_ = -1;
};

cudaMemcpyKind to_cuda(CopyKind kind) {
  switch (kind) {
    case CopyKind::HostToDevice:
      return cudaMemcpyHostToDevice;
    case CopyKind::DeviceToHost:
      return cudaMemcpyDeviceToHost;
    case CopyKind::DeviceToDevice:
      return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

void CUDART_CB run_host_function(void* data) {
  std::unique_ptr<std::function<void()>> fn(static_cast<std::function<void()>*>(data));
  try {
    (*fn)();
  } catch (const std::exception& e) {
    // A CUDA host callback cannot report errors back to the stream.
    std::fprintf(stderr, "ferry: a host function on a CUDA stream raised: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "ferry: a host function on a CUDA stream raised an exception\n");
  }
}

auto as_stream(RawStream s) { return static_cast<cudaStream_t>(s); }
auto as_event(RawEvent e) { return static_cast<cudaEvent_t>(e); }

class CudaBackend final : public Backend {
 public:
  CudaBackend() {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();
      reason_ = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(error);
      count = 0;
    } else if (count == 0) {
      reason_ = "cudaGetDeviceCount reported no devices";
    }
    count_ = count;
  }

  DeviceType type() const override { return DeviceType::CUDA; }
  std::string_view display_name() const override { return "CUDA"; }

  int device_count() override { return count_; }
  std::string unavailable_reason() override { return reason_; }

  int current_device() override {
    check_device(0);
    int device = 0;
    check(cudaGetDevice(&device), -1, "cudaGetDevice");
    return device;
  }
  void set_current_device(int device) override {
    check_device(device);
    check(cudaSetDevice(device), device, "cudaSetDevice");
  }
  void device_synchronize(int device) override {
    check_device(device);
    ScopedDevice guard(device);
    check(cudaDeviceSynchronize(), device, "cudaDeviceSynchronize");
  }
  MemoryInfo memory_info(int device) override {
    check_device(device);
    ScopedDevice guard(device);
    MemoryInfo info;
    check(cudaMemGetInfo(&info.free, &info.total), device, "cudaMemGetInfo");
    return info;
  }
  std::vector<std::pair<std::string, std::string>> settings() override {
    int runtime = 0;
    int driver = 0;
    (void)cudaRuntimeGetVersion(&runtime);
    (void)cudaDriverGetVersion(&driver);
    (void)cudaGetLastError();
    return {{"CUDA runtime", version_text(runtime)}, {"CUDA driver", version_text(driver)}};
  }

  void* malloc(int device, size_t nbytes) override {
    check_device(device);
    if (nbytes == 0) return nullptr;
    ScopedDevice guard(device);
    void* ptr = nullptr;
    check(cudaMalloc(&ptr, nbytes), device, "cudaMalloc(" + std::to_string(nbytes) + " bytes)");
    return ptr;
  }
  void free(int device, void* ptr) override {
    if (ptr == nullptr) return;
    check_device(device);
    ScopedDevice guard(device);
    check(cudaFree(ptr), device, "cudaFree");
  }
  void* malloc_host(size_t nbytes) override {
    check_device(0);
    if (nbytes == 0) return nullptr;
    void* ptr = nullptr;
    check(cudaHostAlloc(&ptr, nbytes, cudaHostAllocPortable | cudaHostAllocMapped), -1,
          "cudaHostAlloc(" + std::to_string(nbytes) + " bytes)");
    return ptr;
  }
  void free_host(void* ptr) override {
    if (ptr == nullptr) return;
    check(cudaFreeHost(ptr), -1, "cudaFreeHost");
  }
  bool is_pinned(const void* ptr) override {
    if (count_ == 0 || ptr == nullptr) return false;
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return attributes.type == cudaMemoryTypeHost;
  }
  void host_register(void* ptr, size_t nbytes) override {
    check_device(0);
    FERRY_CHECK_AS(DeviceError, ptr != nullptr && nbytes > 0, "cuda: cudaHostRegister(", nbytes,
                   " bytes): expected a non-empty range of host memory, but got ",
                   ptr == nullptr ? "a null pointer" : "0 bytes");
    // The runtime refuses overlaps itself (cudaErrorHostMemoryAlreadyRegistered).
    check(cudaHostRegister(ptr, nbytes, cudaHostRegisterPortable | cudaHostRegisterMapped), -1,
          "cudaHostRegister(" + std::to_string(nbytes) + " bytes)");
  }
  // Blocks are allocated and registered mapped (above), so every pinned range has a device
  // address; with unified addressing it is the host address itself.
  void* host_device_pointer(int device, void* ptr, size_t nbytes) override {
    check_device(device);
    FERRY_CHECK_AS(DeviceError, ptr != nullptr && nbytes > 0 && is_pinned_range(ptr, nbytes),
                   "cuda:", device, ": cudaHostGetDevicePointer(", nbytes,
                   " bytes): expected pinned or registered host memory, but got ",
                   ptr == nullptr || nbytes == 0 ? "an empty range" : "pageable memory");
    ScopedDevice guard(device);
    void* device_ptr = nullptr;
    check(cudaHostGetDevicePointer(&device_ptr, ptr, 0), device, "cudaHostGetDevicePointer");
    return device_ptr;
  }
  void release_host_device_pointer(int device, void* /*device_ptr*/) override {
    // Nothing to unmap; as free does, wait for kernels that may still read through it.
    check_device(device);
    ScopedDevice guard(device);
    check(cudaDeviceSynchronize(), device, "cudaDeviceSynchronize (release_host_device_pointer)");
  }
  void host_unregister(void* ptr) override {
    check_device(0);
    // As cudaFreeHost does: queued copies may still read the range.
    for (int device = 0; device < count_; ++device) {
      ScopedDevice guard(device);
      check(cudaDeviceSynchronize(), device, "cudaDeviceSynchronize before cudaHostUnregister");
    }
    check(cudaHostUnregister(ptr), -1, "cudaHostUnregister");
  }

  // cudaMemset and cudaMemcpy return before the bytes are written for device memory,
  // device-to-device copies and (staged) pageable host-to-device copies. The contract promises
  // written bytes, so enqueue on the legacy default stream (the stream those calls use) and wait.
  void memset(int device, void* dst, int value, size_t nbytes) override {
    check_device(device);
    ScopedDevice guard(device);
    const std::string call = "cudaMemsetAsync(" + std::to_string(nbytes) + " bytes)";
    check(cudaMemsetAsync(dst, value, nbytes, cudaStreamLegacy), device, call);
    check(cudaStreamSynchronize(cudaStreamLegacy), device,
          "cudaStreamSynchronize(legacy default stream) after " + call);
  }
  void memcpy(int device, void* dst, const void* src, size_t nbytes, CopyKind kind) override {
    check_device(device);
    ScopedDevice guard(device);
    const std::string call = "cudaMemcpyAsync(" + std::to_string(nbytes) + " bytes, " +
                             std::string(copy_kind_name(kind)) + ")";
    check(cudaMemcpyAsync(dst, src, nbytes, to_cuda(kind), cudaStreamLegacy), device, call);
    check(cudaStreamSynchronize(cudaStreamLegacy), device,
          "cudaStreamSynchronize(legacy default stream) after " + call);
  }
  void memset_async(int device, void* dst, int value, size_t nbytes, RawStream stream) override {
    check_device(device);
    ScopedDevice guard(device);
    check(cudaMemsetAsync(dst, value, nbytes, as_stream(stream)), device,
          "cudaMemsetAsync(" + std::to_string(nbytes) + " bytes)");
  }
  void memcpy_async(int device, void* dst, const void* src, size_t nbytes, CopyKind kind,
                    RawStream stream) override {
    check_device(device);
    ScopedDevice guard(device);
    check(cudaMemcpyAsync(dst, src, nbytes, to_cuda(kind), as_stream(stream)), device,
          "cudaMemcpyAsync(" + std::to_string(nbytes) + " bytes, " +
              std::string(copy_kind_name(kind)) + ")");
  }
  // One cudaMemcpyBatchAsync (CUDA 12.8 and later), sources read in stream order; the legacy
  // default stream, which the batch call does not take, and older toolkits get one
  // cudaMemcpyAsync per range.
  void memcpy_batch_async(int device, std::span<const CopyRange> ranges, CopyKind kind,
                          RawStream stream) override {
#if CUDART_VERSION >= 12080
    const cudaStream_t s = as_stream(stream);
    if (ranges.size() > 1 && s != nullptr && s != cudaStreamLegacy) {
      check_device(device);
      ScopedDevice guard(device);
      std::vector<void*> dsts;
      std::vector<const void*> srcs;
      std::vector<size_t> sizes;
      for (const CopyRange& r : ranges) {
        if (r.nbytes == 0) continue;
        dsts.push_back(r.dst);
        srcs.push_back(r.src);
        sizes.push_back(r.nbytes);
      }
      if (dsts.empty()) return;
      cudaMemcpyAttributes attributes{};
      attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      size_t first_index = 0;
      const std::string call = "cudaMemcpyBatchAsync(" + std::to_string(dsts.size()) + " copies, " +
                               std::string(copy_kind_name(kind)) + ")";
#if CUDART_VERSION >= 13000
      check(cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), dsts.size(), &attributes,
                                 &first_index, 1, s),
            device, call);
#else
      size_t failed_index = 0;
      check(cudaMemcpyBatchAsync(dsts.data(), const_cast<void**>(srcs.data()), sizes.data(),
                                 dsts.size(), &attributes, &first_index, 1, &failed_index, s),
            device, call);
#endif
      return;
    }
#endif
    Backend::memcpy_batch_async(device, ranges, kind, stream);
  }
  void memcpy_peer_async(void* dst, int dst_device, const void* src, int src_device, size_t nbytes,
                         int stream_device, RawStream stream) override {
    check_device(dst_device);
    check_device(src_device);
    check_device(stream_device);
    ScopedDevice guard(stream_device);
    check(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, nbytes, as_stream(stream)),
          stream_device,
          "cudaMemcpyPeerAsync(" + std::to_string(nbytes) + " bytes, cuda:" +
              std::to_string(src_device) + " to cuda:" + std::to_string(dst_device) + ")");
  }

  // cuMemGetAddressRange is a driver call: it is looked up through the runtime so that the
  // binary does not link libcuda and still starts on machines without a driver.
  MemoryRange memory_range(int device, const void* ptr) override {
    check_device(device);
    ScopedDevice guard(device);
    using GetAddressRange = int (*)(unsigned long long* base, size_t* size, unsigned long long ptr);
    static GetAddressRange get_range = [] {
      void* fn = nullptr;
      cudaDriverEntryPointQueryResult status{};
#if CUDART_VERSION >= 12050
      const cudaError_t error = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000,
                                                                 cudaEnableDefault, &status);
#else
      const cudaError_t error =
          cudaGetDriverEntryPoint("cuMemGetAddressRange", &fn, cudaEnableDefault, &status);
#endif
      if (error != cudaSuccess || status != cudaDriverEntryPointSuccess) {
        (void)cudaGetLastError();
        return GetAddressRange{nullptr};
      }
      return reinterpret_cast<GetAddressRange>(fn);
    }();
    FERRY_CHECK_AS(DeviceError, get_range != nullptr, "cuda:", device,
                   ": memory_range: expected the driver to provide cuMemGetAddressRange, but "
                   "cudaGetDriverEntryPoint did not find it");
    unsigned long long base = 0;
    size_t size = 0;
    const int result = get_range(&base, &size, reinterpret_cast<unsigned long long>(ptr));
    FERRY_CHECK_AS(DeviceError, result == 0, "cuda:", device,
                   ": memory_range: expected an address inside a live allocation of cuda:", device,
                   ", but cuMemGetAddressRange failed with CUresult ", result);
    return MemoryRange{reinterpret_cast<void*>(base), size};
  }

  RawStream default_stream(int device) override {
    check_device(device);
    return nullptr;  // the legacy default stream
  }
  RawStream stream_create(int device) override {
    check_device(device);
    ScopedDevice guard(device);
    cudaStream_t stream = nullptr;
    // Non-blocking, as PyTorch's pool streams: no implicit sync with the legacy default stream.
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), device,
          "cudaStreamCreateWithFlags");
    return stream;
  }
  RawStream stream_create_with_priority(int device, int priority) override {
    check_device(device);
    const auto [least, greatest] = stream_priority_range(device);
    FERRY_CHECK_AS(DeviceError, priority <= least && priority >= greatest, "cuda:", device,
                   ": stream_create_with_priority: expected a priority between ", least,
                   " (lowest) and ", greatest, " (highest), but got ", priority);
    ScopedDevice guard(device);
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, priority), device,
          "cudaStreamCreateWithPriority(priority " + std::to_string(priority) + ")");
    return stream;
  }
  std::pair<int, int> stream_priority_range(int device) override {
    check_device(device);
    ScopedDevice guard(device);
    int least = 0;
    int greatest = 0;
    check(cudaDeviceGetStreamPriorityRange(&least, &greatest), device,
          "cudaDeviceGetStreamPriorityRange");
    return {least, greatest};
  }
  void stream_destroy(int device, RawStream stream) override {
    check_device(device);
    if (stream == nullptr) return;
    ScopedDevice guard(device);
    check(cudaStreamSynchronize(as_stream(stream)), device, "cudaStreamSynchronize");
    check(cudaStreamDestroy(as_stream(stream)), device, "cudaStreamDestroy");
  }
  bool stream_query(int device, RawStream stream) override {
    check_device(device);
    ScopedDevice guard(device);
    return ready(cudaStreamQuery(as_stream(stream)), device, "cudaStreamQuery");
  }
  void stream_synchronize(int device, RawStream stream) override {
    check_device(device);
    ScopedDevice guard(device);
    check(cudaStreamSynchronize(as_stream(stream)), device, "cudaStreamSynchronize");
  }
  void stream_wait_event(int device, RawStream stream, RawEvent event) override {
    check_device(device);
    ScopedDevice guard(device);
    check(cudaStreamWaitEvent(as_stream(stream), as_event(event), 0), device,
          "cudaStreamWaitEvent");
  }
  void launch_host_func(int device, RawStream stream, std::function<void()> fn) override {
    check_device(device);
    ScopedDevice guard(device);
    auto owned = std::make_unique<std::function<void()>>(std::move(fn));
    check(cudaLaunchHostFunc(as_stream(stream), &run_host_function, owned.get()), device,
          "cudaLaunchHostFunc");
    (void)owned.release();  // run_host_function deletes it
  }

  RawEvent event_create(int device, bool enable_timing) override {
    check_device(device);
    ScopedDevice guard(device);
    cudaEvent_t event = nullptr;
    check(
        cudaEventCreateWithFlags(&event, enable_timing ? cudaEventDefault : cudaEventDisableTiming),
        device, "cudaEventCreateWithFlags");
    return event;
  }
  void event_destroy(int device, RawEvent event) override {
    check_device(device);
    ScopedDevice guard(device);
    check(cudaEventDestroy(as_event(event)), device, "cudaEventDestroy");
  }
  void event_record(int device, RawEvent event, RawStream stream) override {
    check_device(device);
    ScopedDevice guard(device);
    check(cudaEventRecord(as_event(event), as_stream(stream)), device, "cudaEventRecord");
  }
  bool event_query(int device, RawEvent event) override {
    check_device(device);
    ScopedDevice guard(device);
    return ready(cudaEventQuery(as_event(event)), device, "cudaEventQuery");
  }
  void event_synchronize(int device, RawEvent event) override {
    check_device(device);
    ScopedDevice guard(device);
    check(cudaEventSynchronize(as_event(event)), device, "cudaEventSynchronize");
  }
  float event_elapsed_ms(int device, RawEvent start, RawEvent end) override {
    check_device(device);
    ScopedDevice guard(device);
    float ms = 0;
    check(cudaEventElapsedTime(&ms, as_event(start), as_event(end)), device,
          "cudaEventElapsedTime");
    return ms;
  }

  RawEvent event_create_interprocess(int device) override {
    check_device(device);
    ScopedDevice guard(device);
    cudaEvent_t event = nullptr;
    check(cudaEventCreateWithFlags(&event, cudaEventInterprocess | cudaEventDisableTiming), device,
          "cudaEventCreateWithFlags(cudaEventInterprocess | cudaEventDisableTiming)");
    return event;
  }
  IpcHandle event_ipc_export(int device, RawEvent event) override {
    check_device(device);
    ScopedDevice guard(device);
    cudaIpcEventHandle_t raw{};
    check(cudaIpcGetEventHandle(&raw, as_event(event)), device, "cudaIpcGetEventHandle");
    IpcHandle handle;
    handle.device = Device(DeviceType::CUDA, static_cast<DeviceIndex>(device));
    handle.bytes.resize(sizeof(raw));
    std::memcpy(handle.bytes.data(), &raw, sizeof(raw));
    return handle;
  }
  RawEvent event_ipc_import(const IpcHandle& handle) override {
    const int device = handle.device.index();
    check_device(device);
    cudaIpcEventHandle_t raw{};
    FERRY_CHECK_AS(DeviceError, handle.bytes.size() == sizeof(raw), "cuda:", device,
                   ": cudaIpcOpenEventHandle: expected a ", sizeof(raw),
                   "-byte cudaIpcEventHandle_t, but the handle has ", handle.bytes.size(),
                   " bytes");
    std::memcpy(&raw, handle.bytes.data(), sizeof(raw));
    ScopedDevice guard(device);
    cudaEvent_t event = nullptr;
    check(cudaIpcOpenEventHandle(&event, raw), device, "cudaIpcOpenEventHandle");
    return event;
  }

  bool can_access_peer(int device, int peer) override {
    check_device(device);
    check_device(peer);
    if (device == peer) return true;
    int can = 0;
    check(cudaDeviceCanAccessPeer(&can, device, peer), device,
          "cudaDeviceCanAccessPeer(cuda:" + std::to_string(peer) + ")");
    return can != 0;
  }
  void enable_peer_access(int device, int peer) override {
    check_device(device);
    check_device(peer);
    if (device == peer) return;
    ScopedDevice guard(device);
    const cudaError_t error = cudaDeviceEnablePeerAccess(peer, 0);
    if (error == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();  // idempotent by contract
      return;
    }
    check(error, device, "cudaDeviceEnablePeerAccess(cuda:" + std::to_string(peer) + ")");
  }

  IpcHandle ipc_export(int device, void* ptr) override {
    check_device(device);
    ScopedDevice guard(device);
    cudaIpcMemHandle_t raw{};
    check(cudaIpcGetMemHandle(&raw, ptr), device, "cudaIpcGetMemHandle");
    IpcHandle handle;
    handle.device = Device(DeviceType::CUDA, static_cast<DeviceIndex>(device));
    // The runtime does not say how large the allocation is; the exporter's allocator knows
    // and the caller may set handle.size.
    handle.bytes.resize(sizeof(raw));
    std::memcpy(handle.bytes.data(), &raw, sizeof(raw));
    return handle;
  }
  void* ipc_import(const IpcHandle& handle) override {
    const int device = handle.device.index();
    check_device(device);
    cudaIpcMemHandle_t raw{};
    FERRY_CHECK_AS(DeviceError, handle.bytes.size() == sizeof(raw), "cuda:", device,
                   ": cudaIpcOpenMemHandle: expected a ", sizeof(raw),
                   "-byte cudaIpcMemHandle_t, but the handle has ", handle.bytes.size(), " bytes");
    std::memcpy(&raw, handle.bytes.data(), sizeof(raw));
    ScopedDevice guard(device);
    void* ptr = nullptr;
    check(cudaIpcOpenMemHandle(&ptr, raw, cudaIpcMemLazyEnablePeerAccess), device,
          "cudaIpcOpenMemHandle");
    return ptr;
  }
  void ipc_close(int device, void* ptr) override {
    check_device(device);
    ScopedDevice guard(device);
    // The contract (as free): wait for queued work that may still use the mapping. The runtime
    // does not order cudaIpcCloseMemHandle after queued kernels.
    check(cudaDeviceSynchronize(), device, "cudaDeviceSynchronize before cudaIpcCloseMemHandle");
    check(cudaIpcCloseMemHandle(ptr), device, "cudaIpcCloseMemHandle");
  }

 private:
  void check_device(int device) const {
    FERRY_CHECK_AS(DeviceError, count_ > 0, "cuda:", device, ": no CUDA device (", reason_, ")");
    FERRY_CHECK_AS(DeviceError, device >= 0 && device < count_, "cuda:", device,
                   ": expected a device index below ", count_, ", but got ", device);
  }
  // cudaSuccess: true; cudaErrorNotReady: false; anything else raises.
  static bool ready(cudaError_t error, int device, const char* call) {
    if (error == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    check(error, device, call);
    return true;
  }

  int count_ = 0;
  std::string reason_;
};

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace

FERRY_REGISTER_BACKEND(DeviceType::CUDA, &make_cuda_backend);

}  // namespace ferry::cuda
