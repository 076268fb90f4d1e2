// The safetensors file: opening it, reading and validating its header, and the two read
// primitives. Reads loop until every byte promised by the header has arrived; a file that ends
// early (truncated after the header was read) is an error, never a partly filled tensor that
// looks complete.
#include "ferry/nn/safetensors_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "ferry/core/error.h"

namespace ferry::safetensors::detail {
namespace {

[[noreturn]] void io_error(const std::string& what, const std::string& path, int err) {
  FERRY_FAIL_AS(Error, "safetensors: ", path, ": ", what, ": ", std::strerror(err));
}

// pread until `len` bytes arrived or the file ended; returns the bytes read.
uint64_t pread_all(int fd, void* dst, uint64_t offset, uint64_t len, const std::string& path) {
  uint64_t done = 0;
  auto* out = static_cast<char*>(dst);
  while (done < len) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(len - done, uint64_t{1} << 30));
    const ssize_t got = ::pread(fd, out + done, want, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      io_error("read of " + std::to_string(want) + " bytes at offset " +
                   std::to_string(offset + done) + " failed",
               path, errno);
    }
    if (got == 0) break;
    done += static_cast<uint64_t>(got);
  }
  return done;
}

}  // namespace

File::File(std::string path, bool direct) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) io_error("cannot open the file", path_, errno);
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) io_error("fstat failed", path_, errno);
    FERRY_CHECK(S_ISREG(st.st_mode), "safetensors: ", path_, ": expected a regular file");
    size_ = static_cast<uint64_t>(st.st_size);
    FERRY_CHECK(size_ >= 8, "safetensors: ", path_, ": the file is ", size_,
                " bytes long, shorter than the 8-byte header length that starts a safetensors "
                "file");
    unsigned char first[8];
    read(first, 0, 8);
    const uint64_t n = header_length(first, size_, path_);
    std::string text(n, '\0');
    read(text.data(), 8, n);
    header_ = parse_header(text, size_, path_);
    if (direct) {
      direct_fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
      if (direct_fd_ < 0) io_error("cannot open the file with O_DIRECT", path_, errno);
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

File::~File() {
  ::close(fd_);
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

std::string File::label() const {
  const size_t slash = path_.find_last_of('/');
  return slash == std::string::npos ? path_ : path_.substr(slash + 1);
}

void File::read(void* dst, uint64_t offset, uint64_t len) const {
  const uint64_t got = pread_all(fd_, dst, offset, len, path_);
  FERRY_CHECK(got == len, "safetensors: ", path_, ": the file ended at byte ", offset + got,
              " while reading bytes ", offset, " to ", offset + len, " (its header promised ",
              size_, " bytes; was it truncated while loading?)");
}

void File::read_direct(void* dst, uint64_t offset, uint64_t len) const {
  if (direct_fd_ < 0) {
    read(dst, offset, len);
    return;
  }
  FERRY_CHECK(
      offset % kDirectAlignment == 0 && reinterpret_cast<uintptr_t>(dst) % kDirectAlignment == 0,
      "safetensors: O_DIRECT read: expected an offset and a buffer aligned to ", kDirectAlignment,
      " bytes, but got offset ", offset, " and buffer ", dst);
  const uint64_t rounded = (len + kDirectAlignment - 1) / kDirectAlignment * kDirectAlignment;
  const uint64_t got = pread_all(direct_fd_, dst, offset, rounded, path_);
  FERRY_CHECK(got >= len, "safetensors: ", path_, ": the file ended at byte ", offset + got,
              " while reading bytes ", offset, " to ", offset + len, " (its header promised ",
              size_, " bytes; was it truncated while loading?)");
}

}  // namespace ferry::safetensors::detail
