// Helpers for the serving tests: a private temporary directory, a scripted RequestHandler
// (echo, sleep, errors) and raw-socket helpers to send hostile bytes and read one answer, every
// wait bounded.
#pragma once

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/switch/frame_io.h"
#include "ferry/switch/protocol.h"
#include "ferry/switch/socket_io.h"
#include "ferry/switch/types.h"

namespace ferry::switch_::testing {

// A fresh directory under TMPDIR (mode 0700, from mkdtemp), removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ferry-switch-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw Error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// "echo": outputs = inputs. "sleep-<ms>": sleeps, then echoes. "shape-error": raises ShapeError.
// "internal-error": raises a plain ferry::Error. Anything else: unknown_model.
class ScriptedHandler : public RequestHandler {
 public:
  InferResult handle(const InferRequest& request) override {
    ++calls;
    InferResult result;
    if (request.model.rfind("sleep-", 0) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stoi(request.model.substr(6))));
    } else if (request.model == "shape-error") {
      throw ShapeError("expected shape [1], but got [2]");
    } else if (request.model == "internal-error") {
      throw Error("something broke");
    } else if (request.model != "echo") {
      throw SwitchError(ErrorCode::unknown_model, "unknown model '" + request.model + "'");
    }
    result.outputs = request.inputs;
    result.timings.compute_ms = 0.5;
    ++completed;
    return result;
  }
  std::atomic<int> calls{0}, completed{0};
};

// Same dtype, shape and bytes (both CPU and contiguous, as decoded tensors are).
inline bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes().vec() != b.sizes().vec()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.const_data_ptr(), cb.const_data_ptr(), ca.nbytes()) == 0;
}

inline void send_raw(int fd, std::span<const std::byte> bytes) {
  write_full(fd, bytes, Clock::now() + std::chrono::seconds(5));
}

// One answer frame from the server, or the read status when there is none within `timeout`.
struct RawAnswer {
  ReadStatus status = ReadStatus::error;
  DecodedFrame frame;
};
inline RawAnswer read_answer(int fd, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  RawAnswer answer;
  FrameRead read = read_frame(fd, Limits{}, Clock::now() + timeout, timeout, -1);
  answer.status = read.status;
  if (read.status != ReadStatus::ok) return answer;
  std::vector<std::byte> whole(kHeaderBytes);
  encode_header(read.header, std::span<std::byte, kHeaderBytes>(whole.data(), kHeaderBytes));
  whole.insert(whole.end(), read.payload.begin(), read.payload.end());
  answer.frame = decode_frame(whole);
  return answer;
}

// True once the peer has closed (reads 0 bytes) within `timeout`.
inline bool closed_by_peer(int fd, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  std::byte b{};
  size_t got = 0;
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const ReadStatus s = read_full(fd, std::span(&b, 1), deadline, -1, &got);
    if (s == ReadStatus::closed || s == ReadStatus::error) return true;
    if (s == ReadStatus::timeout) return false;
  }
}

// Polls `condition` every few ms until it holds or `timeout` passes.
template <typename Condition>
bool eventually(Condition&& condition,
                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

}  // namespace ferry::switch_::testing
