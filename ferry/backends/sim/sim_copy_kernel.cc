// The sim device's copy kernel (device_copy_kernel_stub for DeviceType::Sim): a CopyProblem
// runs on the stream's worker thread as the CPU copy engine over the read-write mappings, as a
// GPU kernel runs on its device. Addresses are translated, and the extents they reach checked,
// when the kernel is enqueued, so a bad address raises on the caller's thread, before anything
// is queued. A peer's memory is accepted only when the stream's device has enabled access to it:
// the policy decides when a kernel may read another device, and the sim holds it to that, as
// a GPU would fault.
#include "ferry/backends/cpu/copy_plan.h"
#include "ferry/backends/sim/sim.h"
#include "ferry/core/array_ref.h"
#include "ferry/core/error.h"
#include "ferry/device/device_copy_kernel.h"

namespace ferry::sim {
namespace {

// The host mapping of [ptr, ptr + extent): both ends must translate, and to one mapping, of
// memory the stream's device may touch.
char* translate(const void* ptr, int64_t extent, const Stream& stream, const char* operand) {
  char* first = static_cast<char*>(host_address(ptr));
  const int owner = device_of(ptr);
  const int device = stream.device().index();
  FERRY_CHECK_AS(DeviceError, peer_access_enabled(device, owner), stream.device(),
                 ": copy kernel: expected the ", operand, " in memory of sim:", device,
                 " or of a peer whose access it has enabled, but it is on sim:", owner,
                 " and peer access from sim:", device, " to sim:", owner,
                 " is off (ferry::enable_peer_access turns it on)");
  if (extent > 1) {
    const char* last = static_cast<const char*>(ptr) + (extent - 1);
    const char* host_last = static_cast<const char*>(host_address(last));
    FERRY_CHECK_AS(DeviceError, host_last == first + (extent - 1), stream.device(),
                   ": copy kernel: expected the ", operand, " (", extent, " bytes from ", ptr,
                   ") to lie inside one allocation, but it runs into another");
  }
  return first;
}

// Bytes from the first element to the end of the last one.
int64_t extent(const DimVector& sizes, const DimVector& strides, ScalarType dtype) {
  int64_t bytes = static_cast<int64_t>(element_size(dtype));
  for (size_t d = 0; d < sizes.size(); ++d) bytes += (sizes[d] - 1) * strides[d];
  return bytes;
}

void sim_copy_kernel(const CopyProblem& problem, const Stream& stream) {
  FERRY_CHECK_AS(DeviceError, stream.device_type() == DeviceType::Sim,
                 "sim copy kernel: expected a sim stream, but got ", stream);
  FERRY_CHECK(problem.sizes.size() == problem.dst_strides.size() &&
                  problem.sizes.size() == problem.src_strides.size(),
              "sim copy kernel: expected as many strides as sizes, but got sizes ",
              IntArrayRef(problem.sizes), ", dst strides ", IntArrayRef(problem.dst_strides),
              " and src strides ", IntArrayRef(problem.src_strides));
  if (problem.numel() == 0) return;
  CopyProblem p = problem;  // the same problem, at host addresses
  p.dst =
      translate(problem.dst, extent(p.sizes, p.dst_strides, p.dst_dtype), stream, "destination");
  if (!problem.src_is_value) {
    p.src = translate(problem.src, extent(p.sizes, p.src_strides, p.src_dtype), stream, "source");
  }
  enqueue_host_function(stream, [p]() mutable {
    // A fill's value lives in this closure's problem, which stays put while it runs.
    if (p.src_is_value) p.src = reinterpret_cast<const char*>(p.value);
    cpu::copy(p);
  });
}

FERRY_REGISTER_DISPATCH(device_copy_kernel_stub, DeviceType::Sim, &sim_copy_kernel);

}  // namespace
}  // namespace ferry::sim
