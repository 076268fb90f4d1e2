// ferry::switch_::Client: one connection to a ferry serve server (a Unix socket path, or a
// loopback TCP port), one request at a time. infer returns the outputs and the server's timings,
// or raises SwitchError with the server's code and message; a connection that fails (timeout,
// hang-up, a garbled answer) raises SwitchError(internal) and is closed, and the next infer
// reconnects.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ferry/device/ipc_handle.h"
#include "ferry/switch/protocol.h"
#include "ferry/switch/types.h"

namespace ferry::switch_ {

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // How long to wait for an answer beyond the request's deadline (or in all, without one).
  std::chrono::milliseconds answer_timeout{std::chrono::seconds(120)};
  Limits limits;
};

class Client {
 public:
  // Connects to the Unix socket at `socket_path` (retrying until connect_timeout).
  explicit Client(std::string socket_path, ClientOptions options = {});
  // Connects to 127.0.0.1:`port`.
  static Client tcp(uint16_t port, ClientOptions options = {});

  // Runs `model` on `inputs`; deadline 0: none.
  InferResult infer(const std::string& model, const std::vector<NamedTensor>& inputs,
                    std::chrono::milliseconds deadline = std::chrono::milliseconds(0));

  bool connected() const { return fd_.valid(); }

 private:
  Client(uint16_t port, ClientOptions options);
  void connect();

  std::string socket_path_;
  uint16_t tcp_port_ = 0;
  ClientOptions options_;
  std::mutex mutex_;
  UniqueFd fd_;
  uint64_t next_id_ = 1;
};

}  // namespace ferry::switch_
