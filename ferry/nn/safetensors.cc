// safetensors::load, read_header and save. load picks the path (mapped, pinned, pageable or
// device) after the whole header has been validated, so a bad file fails before any memory is
// allocated or any copy queued. save writes a temporary file next to the destination and renames
// it into place only when every byte is written.
#include "ferry/nn/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/device/runtime.h"
#include "ferry/device/stream.h"
#include "ferry/nn/progress.h"
#include "ferry/nn/safetensors_io.h"
#include "ferry/ops/factories.h"

namespace ferry::safetensors {
namespace {

void write_all(int fd, const void* data, size_t len, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t n = ::write(fd, p, std::min<size_t>(len, size_t{1} << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      FERRY_FAIL_AS(Error, "safetensors: save: ", path, ": write failed: ", std::strerror(errno));
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

// The host bytes save writes for `t`: contiguous, on the cpu, lazy bits applied.
Tensor host_bytes(const Tensor& t) {
  Tensor h = t.is_cpu() ? t : t.cpu();
  return h.resolve_conj().resolve_neg().contiguous();
}

}  // namespace

LoadedTensors load(const std::string& path, const LoadOptions& options) {
  const Device device = checked_device(options.device);
  const bool mapped = device.is_cpu() && options.host_memory == HostMemory::kMapped;
  const detail::File file(path, !mapped && options.read_mode == ReadMode::kDirect);
  const Header& h = file.header();
  LoadedTensors out;
  out.metadata = h.metadata;
  if (mapped) {
    static_cast<TensorDict&>(out) = detail::load_mapped(file);
    return out;
  }
  ProgressReporter progress(file.label(), h.data_bytes, options);
  if (device.is_cpu() && options.host_memory == HostMemory::kPinned) {
    static_cast<TensorDict&>(out) = detail::load_pinned(file, options, progress);
    progress.finish();
    return out;
  }
  std::vector<detail::ReadTarget> targets;
  targets.reserve(h.tensors.size());
  out.reserve(h.tensors.size());
  for (const TensorInfo& info : h.tensors) {
    Tensor t = empty(info.shape, TensorOptions(info.dtype).device(device));
    targets.push_back({&info, t});
    out.insert(info.name, std::move(t));
  }
  detail::read_into(file, targets, options, progress);
  if (!device.is_cpu() && !options.non_blocking) current_stream(device).synchronize();
  progress.finish();
  return out;
}

Header read_header(const std::string& path) { return detail::File(path, false).header(); }

void save(const std::string& path, const TensorDict& tensors, const Metadata& metadata) {
  std::vector<TensorInfo> infos;
  infos.reserve(tensors.size());
  for (const auto& item : tensors) {
    const Tensor& t = item.value();
    FERRY_CHECK(t.defined(), "safetensors: save: tensor '", item.key(), "' is undefined");
    FERRY_CHECK_AS(DTypeError, dtype_code(t.dtype()).has_value(), "safetensors: save: tensor '",
                   item.key(), "': dtype ", t.dtype(),
                   " has no safetensors name (expected one of F64, F32, F16, BF16, F8_E4M3, "
                   "F8_E5M2, I64, I32, I16, I8, U8, BOOL)");
    TensorInfo info;
    info.name = item.key();
    info.dtype = t.dtype();
    info.shape.assign(t.sizes().begin(), t.sizes().end());
    infos.push_back(std::move(info));
  }
  const std::vector<size_t> order = writer_order(infos);
  std::vector<TensorInfo> ordered;
  ordered.reserve(infos.size());
  uint64_t offset = 0;
  for (size_t i : order) {
    TensorInfo info = infos[i];
    info.begin = offset;
    offset += tensors[i].value().nbytes();
    info.end = offset;
    ordered.push_back(std::move(info));
  }
  const std::string header = build_header(ordered, metadata);

  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  FERRY_CHECK(fd >= 0, "safetensors: save: cannot create ", temporary, ": ", std::strerror(errno));
  bool open = true;
  try {
    autograd::NoGradGuard no_grad;
    write_all(fd, header.data(), header.size(), temporary);
    for (size_t i : order) {
      const Tensor h = host_bytes(tensors[i].value());
      if (h.nbytes() > 0) write_all(fd, h.data_ptr(), h.nbytes(), temporary);
    }
    open = false;
    FERRY_CHECK(::close(fd) == 0, "safetensors: save: ", temporary,
                ": close failed: ", std::strerror(errno));
  } catch (...) {
    if (open) ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temporary.c_str());
    FERRY_FAIL_AS(Error, "safetensors: save: cannot rename ", temporary, " to ", path, ": ",
                  std::strerror(err));
  }
}

}  // namespace ferry::safetensors
