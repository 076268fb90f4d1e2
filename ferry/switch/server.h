// The ferry serve front end: accepts connections on a Unix socket inside a private directory
// (and, when asked, on 127.0.0.1 TCP), reads request frames and hands them to a RequestHandler.
// Guarantees: the directory is the caller's and mode 0700 (created so when missing), the socket
// file is 0600, and every Unix connection's peer uid (SO_PEERCRED) is checked before any byte is
// read; each frame must arrive within read_timeout of its first byte and a connection may idle
// for idle_timeout; a bad frame is answered with an error and its connection closed while the
// server goes on; a frame whose header declares more than the limits is refused before its
// payload is read; SIGPIPE is never raised. stop() stops accepting, lets requests already
// received finish and be answered, and returns once every connection thread has ended.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ferry/device/ipc_handle.h"
#include "ferry/switch/protocol.h"
#include "ferry/switch/types.h"

namespace ferry::switch_ {

struct ServerOptions {
  // The socket file; its directory must be private to this user (see the class comment).
  std::string socket_path;
  // Uids allowed to connect over the socket; empty: only this process's uid.
  std::vector<uid_t> allowed_uids;
  // Also listen on 127.0.0.1:port (0: any free port). Off by default. TCP peers are not checked
  // by uid: any local user can reach a loopback port.
  std::optional<uint16_t> tcp_port;
  size_t max_connections = 64;
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(60)};
  std::chrono::milliseconds read_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds write_timeout{std::chrono::seconds(10)};
  Limits limits;
};

class Server {
 public:
  // Creates the directory and socket and starts listening and accepting. Raises SwitchError
  // (internal) saying what was expected and found (a directory with wrong owner or mode, a
  // server already listening at the path, a path too long).
  Server(ServerOptions options, std::shared_ptr<RequestHandler> handler);
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server();

  // Stops accepting, drains, joins every thread and removes the socket file. Idempotent.
  void stop();

  const std::string& socket_path() const { return options_.socket_path; }
  // The TCP port listened on (after binding port 0), or 0 without TCP.
  uint16_t tcp_port() const { return tcp_port_; }

  size_t active_connections() const { return active_.load(); }
  uint64_t accepted_connections() const { return accepted_.load(); }
  uint64_t rejected_connections() const { return rejected_.load(); }
  uint64_t requests_answered() const { return answered_.load(); }

 private:
  struct Connection {
    std::thread thread;
    std::atomic<bool> done{false};
  };

  void accept_loop();
  void accept_one(int listen_fd, bool check_uid);
  void serve(int fd);
  void reap(bool all);
  std::vector<std::byte> answer(InferRequest& request);

  ServerOptions options_;
  std::shared_ptr<RequestHandler> handler_;
  UniqueFd unix_fd_, tcp_fd_, stop_fd_;
  uint16_t tcp_port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;
  std::mutex mutex_;  // connections_, stopped_
  std::list<std::unique_ptr<Connection>> connections_;
  bool stopped_ = false;
  std::atomic<size_t> active_{0};
  std::atomic<uint64_t> accepted_{0}, rejected_{0}, answered_{0};
};

}  // namespace ferry::switch_
