// How the sim device computes: a compute kernel runs the CPU backend's kernel on the stream's
// worker thread, over the sim's read-write mapping of the operands, in stream order, as a GPU
// kernel runs on its device. The operands are translated (and their extents checked) when the
// kernel is enqueued, on the caller's thread; the work itself happens later, so a missing
// stream synchronization gives a wrong answer rather than a lucky one. With FERRY_SIM_COMPUTE
// set, each kernel holds its stream for at least flops / rate (the compute-time model); a kernel
// whose operands live in mapped pinned host memory also holds it for their bytes over the h2d
// link's bandwidth (direct host access), with or without that model.
// Internal to the sim backend and its kernel registrations.
#pragma once

#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ferry/core/tensor.h"
#include "ferry/device/stream.h"

namespace ferry::sim {

// A CPU tensor with `t`'s geometry over the sim's read-write mapping of its storage. Undefined
// and CPU tensors come back as they are. Raises DeviceError when the storage is not memory
// `stream`'s device may touch (its own, or a peer's with access enabled).
Tensor host_alias(const Tensor& t, const Stream& stream);

// The current stream of the sim device that `tensors` (the defined ones) are on. Raises when none
// is a sim tensor, or when they are on different sim devices.
Stream kernel_stream(const std::vector<const Tensor*>& tensors);

// Enqueues `kernel` on `stream` under the compute-time model: it holds the stream for at least
// flops / rate plus `host_bytes` (what it reads or writes in mapped pinned host memory) over the
// h2d bandwidth.
void enqueue_compute(const Stream& stream, double flops, std::function<void()> kernel);
void enqueue_compute(const Stream& stream, double flops, double host_bytes,
                     std::function<void()> kernel);

// The bytes `t`'s view spans when its storage is mapped pinned host memory (host_device_pointer),
// else 0: what a kernel touching every element moves over the host link.
double host_mapped_bytes(const Tensor& t);

namespace detail {

template <typename T>
struct Translate {
  static T apply(const T& v, const Stream&) { return v; }
};
template <>
struct Translate<Tensor> {
  static Tensor apply(const Tensor& t, const Stream& s) { return host_alias(t, s); }
};

template <typename T>
const Tensor* tensor_or_null(const T& v) {
  if constexpr (std::is_same_v<std::remove_cvref_t<T>, Tensor>) {
    return &v;
  } else {
    return nullptr;
  }
}

}  // namespace detail

// HostKernel<&cpu_fn, &flops_fn>::run has cpu_fn's signature: registered as a sim kernel, it
// translates the Tensor arguments, copies the others, and enqueues cpu_fn on the current stream
// of the operands' device.
template <auto Fn, auto Flops>
struct HostKernel;

template <typename... Args, void (*Fn)(Args...), double (*Flops)(Args...)>
struct HostKernel<Fn, Flops> {
  static void run(Args... args) {
    double host_bytes = 0;
    for (const Tensor* t : {detail::tensor_or_null(args)...}) {
      if (t != nullptr) host_bytes += host_mapped_bytes(*t);
    }
    launch(host_bytes, args...);
  }
  // As run, with the bytes read from mapped host memory given (for kernels that read only part of
  // an operand, such as a lookup in an embedding table).
  static void launch(double host_bytes, Args... args) {
    std::initializer_list<const Tensor*> all = {detail::tensor_or_null(args)...};
    std::vector<const Tensor*> tensors;
    for (const Tensor* t : all) {
      if (t != nullptr) tensors.push_back(t);
    }
    const Stream stream = kernel_stream(tensors);
    auto held =
        std::make_tuple(detail::Translate<std::remove_cvref_t<Args>>::apply(args, stream)...);
    const double flops = Flops(args...);
    enqueue_compute(stream, flops, host_bytes,
                    [held = std::move(held)]() mutable { std::apply(Fn, held); });
  }
};

}  // namespace ferry::sim
