// load_into_shared / open_shared: one read of the file into a shared buffer, and tensor views.
#include "ferry/nn/safetensors_shared.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "ferry/core/error.h"
#include "ferry/core/memory_format.h"
#include "ferry/ops/factories.h"

namespace ferry::safetensors {
namespace {

void release_shared_buffer(void* context) {
  delete static_cast<std::shared_ptr<memory::SharedHostBuffer>*>(context);
}

class SharedLoadFile {
 public:
  explicit SharedLoadFile(const std::string& path)
      : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    FERRY_CHECK(fd_ >= 0, "safetensors: ", path, ": open failed: ", std::strerror(errno));
  }
  SharedLoadFile(const SharedLoadFile&) = delete;
  SharedLoadFile& operator=(const SharedLoadFile&) = delete;
  ~SharedLoadFile() { ::close(fd_); }
  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

SharedSafetensors load_into_shared(const std::string& path) {
  SharedLoadFile file(path);
  struct stat st {};
  FERRY_CHECK(::fstat(file.fd(), &st) == 0, "safetensors: ", path,
              ": fstat failed: ", std::strerror(errno));
  const auto size = static_cast<size_t>(st.st_size);
  FERRY_CHECK(size >= 8, "safetensors: ", path,
              ": expected at least the 8-byte header length, but the file has ", size, " bytes");
  auto buffer = std::make_shared<memory::SharedHostBuffer>(size, "ferry-safetensors");
  auto* out = static_cast<char*>(buffer->data());
  constexpr size_t kReadChunk = size_t{64} << 20;
  for (size_t done = 0; done < size;) {
    const ssize_t n =
        ::pread(file.fd(), out + done, std::min(kReadChunk, size - done), static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    FERRY_CHECK(n > 0, "safetensors: ", path, ": read at offset ", done, " of ", size,
                " bytes failed: ", n == 0 ? "unexpected end of file" : std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  return open_shared(std::move(buffer), path);
}

SharedSafetensors open_shared(std::shared_ptr<memory::SharedHostBuffer> buffer,
                              const std::string& source) {
  FERRY_CHECK(buffer != nullptr && *buffer, "safetensors: ", source,
              ": expected a live shared buffer, but got an empty one");
  SharedSafetensors out;
  out.header = parse_file_image(
      std::string_view(static_cast<const char*>(buffer->data()), buffer->size()), source);
  out.buffer = std::move(buffer);
  return out;
}

TensorDict SharedSafetensors::tensors() const {
  FERRY_CHECK(buffer != nullptr && *buffer,
              "safetensors: tensors(): expected a loaded shared buffer, but it is empty");
  TensorDict out;
  out.reserve(header.tensors.size());
  for (const TensorInfo& info : header.tensors) {
    char* data = static_cast<char*>(buffer->data()) + header.data_offset + info.begin;
    if (info.dtype == kBool) {
      const auto* b = reinterpret_cast<const unsigned char*>(data);
      const auto* bad = std::find_if(b, b + info.nbytes(), [](unsigned char v) { return v > 1; });
      FERRY_CHECK(bad == b + info.nbytes(), "safetensors: shared buffer: tensor '", info.name,
                  "': expected BOOL bytes of 0 or 1, found ", static_cast<int>(*bad),
                  " at element ", bad - b);
    }
    if (reinterpret_cast<uintptr_t>(data) % element_size(info.dtype) != 0) {
      Tensor copy = empty(info.shape, TensorOptions(info.dtype));
      if (info.nbytes() > 0) std::memcpy(copy.data_ptr(), data, info.nbytes());
      out.insert(info.name, std::move(copy));
      continue;
    }
    Storage storage(DataPtr(data, new std::shared_ptr<memory::SharedHostBuffer>(buffer),
                            &release_shared_buffer, Device(DeviceType::CPU)),
                    info.nbytes());
    out.insert(info.name, make_tensor(std::move(storage), info.dtype, info.shape,
                                      contiguous_strides(info.shape), 0));
  }
  return out;
}

}  // namespace ferry::safetensors
