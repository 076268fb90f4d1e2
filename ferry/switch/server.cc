// The serving front end's accept loop and connection threads (server.h).
#include "ferry/switch/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ferry/iter/parallel.h"
#include "ferry/switch/frame_io.h"
#include "ferry/switch/socket_io.h"

namespace ferry::switch_ {
namespace {

[[noreturn]] void setup_failed(const std::string& message) {
  throw SwitchError(ErrorCode::internal, "serve: " + message);
}

std::string errno_text() { return std::strerror(errno); }

std::string parent_dir(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// The socket's directory: created 0700 when missing; otherwise it must be a real directory
// owned by us with no group or other permissions.
void ensure_private_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    setup_failed(
        detail::str_cat("could not create the socket directory \"", dir, "\": ", errno_text()));
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    setup_failed(detail::str_cat("could not stat \"", dir, "\": ", errno_text()));
  }
  if (!S_ISDIR(st.st_mode)) {
    setup_failed(
        detail::str_cat("expected \"", dir, "\" to be a directory (not a symlink or file)"));
  }
  if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    setup_failed(detail::str_cat("expected the socket directory \"", dir,
                                 "\" to be private (owner uid ", ::geteuid(),
                                 ", mode 0700), but its owner is uid ", st.st_uid,
                                 " and its mode is 0", std::oct, (st.st_mode & 07777)));
  }
}

UniqueFd listen_unix(const std::string& path) {
  sockaddr_un addr{};
  if (path.empty() || path[0] == '@' || path.size() >= sizeof(addr.sun_path)) {
    setup_failed(detail::str_cat("expected a socket file path of 1 to ", sizeof(addr.sun_path) - 1,
                                 " bytes (not an abstract name), but got \"", path, "\""));
  }
  ensure_private_dir(parent_dir(path));
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      setup_failed(detail::str_cat("expected \"", path, "\" to be absent or a stale socket, ",
                                   "but it is another kind of file"));
    }
    try {
      connect_unix(path, std::chrono::milliseconds(0));
      setup_failed(detail::str_cat("a server is already listening at \"", path, "\""));
    } catch (const SwitchError& e) {
      if (std::string(e.what()).find("already listening") != std::string::npos) throw;
    }
    ::unlink(path.c_str());
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) setup_failed("socket() failed: " + errno_text());
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    setup_failed(detail::str_cat("bind(\"", path, "\") failed: ", errno_text()));
  }
  // The directory is 0700, so nobody else could reach the file between bind and chmod.
  if (::chmod(path.c_str(), 0600) != 0 || ::listen(fd.get(), 64) != 0) {
    const std::string why = errno_text();
    ::unlink(path.c_str());
    setup_failed(detail::str_cat("chmod/listen on \"", path, "\" failed: ", why));
  }
  return fd;
}

UniqueFd listen_tcp(uint16_t port, uint16_t* bound_port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) setup_failed("socket(AF_INET) failed: " + errno_text());
  const int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd.get(), 64) != 0) {
    setup_failed(detail::str_cat("listen on 127.0.0.1:", port, " failed: ", errno_text()));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  *bound_port = ntohs(addr.sin_port);
  return fd;
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

Server::Server(ServerOptions options, std::shared_ptr<RequestHandler> handler)
    : options_(std::move(options)), handler_(std::move(handler)) {
  if (!handler_) setup_failed("expected a request handler, but got none");
  if (options_.allowed_uids.empty()) options_.allowed_uids.push_back(::geteuid());
  stop_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_fd_.valid()) setup_failed("eventfd failed: " + errno_text());
  unix_fd_ = listen_unix(options_.socket_path);
  try {
    if (options_.tcp_port) tcp_fd_ = listen_tcp(*options_.tcp_port, &tcp_port_);
    accept_thread_ = std::thread([this] { accept_loop(); });
  } catch (...) {
    ::unlink(options_.socket_path.c_str());
    throw;
  }
}

Server::~Server() { stop(); }

void Server::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  stopping_ = true;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t w = ::write(stop_fd_.get(), &one, sizeof(one));
  if (accept_thread_.joinable()) accept_thread_.join();
  reap(/*all=*/true);
}

void Server::reap(bool all) {
  std::list<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard lock(mutex_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (all || (*it)->done.load()) {
        finished.push_back(std::move(*it));
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) c->thread.join();
}

void Server::accept_loop() {
  while (!stopping_.load()) {
    pollfd fds[3] = {{stop_fd_.get(), POLLIN, 0}, {unix_fd_.get(), POLLIN, 0}, {-1, POLLIN, 0}};
    nfds_t n = 2;
    if (tcp_fd_.valid()) fds[n++] = pollfd{tcp_fd_.get(), POLLIN, 0};
    // Wake now and then to join finished connection threads.
    const int r = ::poll(fds, n, 200);
    reap(/*all=*/false);
    if (r <= 0) continue;
    if (fds[0].revents & POLLIN) break;
    if (fds[1].revents & POLLIN) accept_one(unix_fd_.get(), /*check_uid=*/true);
    if (n == 3 && (fds[2].revents & POLLIN)) accept_one(tcp_fd_.get(), /*check_uid=*/false);
  }
  // No new connections from here on; the file goes so that clients fail fast.
  ::unlink(options_.socket_path.c_str());
  unix_fd_.reset();
  tcp_fd_.reset();
}

void Server::accept_one(int listen_fd, bool check_uid) {
  UniqueFd fd(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd.valid()) return;  // the peer went away first, or EAGAIN: nothing to do
  if (check_uid) {
    const auto uid = peer_uid(fd.get());
    const auto& allowed = options_.allowed_uids;
    if (!uid || std::find(allowed.begin(), allowed.end(), *uid) == allowed.end()) {
      ++rejected_;
      return;  // closed without a byte read or written
    }
  }
  if (active_.load() >= options_.max_connections) {
    ++rejected_;
    const auto frame =
        encode_error_response(0, ErrorCode::busy,
                              detail::str_cat("server busy: ", options_.max_connections,
                                              " connections are open (the limit)"),
                              options_.limits);
    write_full(fd.get(), frame, Clock::now() + std::chrono::milliseconds(100));
    return;
  }
  ++accepted_;
  ++active_;
  auto connection = std::make_unique<Connection>();
  Connection* c = connection.get();
  const int raw = fd.release();
  std::lock_guard lock(mutex_);
  c->thread = std::thread([this, c, raw] {
    // The pool's CPUs, not the one CPU an OpenMP binding gave the thread that made the server:
    // requests run models here (an in-process handler), and would otherwise share it.
    ferry::detail::use_pool_cpus();
    UniqueFd owned(raw);
    try {
      serve(owned.get());
    } catch (...) {
      // serve answers what it can; a failure to even send an error ends the connection only.
    }
    owned.reset();
    --active_;
    c->done = true;
  });
  connections_.push_back(std::move(connection));
}

void Server::serve(int fd) {
  const Limits& limits = options_.limits;
  const auto send = [&](const std::vector<std::byte>& frame) {
    return write_full(fd, frame, Clock::now() + options_.write_timeout);
  };
  while (true) {
    FrameRead frame;
    try {
      frame = read_frame(fd, limits, Clock::now() + options_.idle_timeout, options_.read_timeout,
                         stop_fd_.get());
    } catch (const SwitchError& e) {
      // A bad header: the stream's framing is lost. Answer, then close.
      send(encode_error_response(0, e.code(), e.what(), limits));
      return;
    }
    if (frame.status != ReadStatus::ok) return;  // idle timeout, slow frame, hang-up, stop
    const uint64_t id = frame.header.request_id;
    if (frame.header.type != MessageType::infer_request) {
      send(encode_error_response(id, ErrorCode::bad_frame,
                                 "expected an infer request (message type 1), but got type " +
                                     std::to_string(static_cast<int>(frame.header.type)),
                                 limits));
      return;
    }
    InferRequest request;
    try {
      request = decode_infer_request(frame.header, frame.payload, limits);
    } catch (const SwitchError& e) {
      send(encode_error_response(id, e.code(), e.what(), limits));
      return;
    }
    frame.payload = {};
    request.received = Clock::now();
    if (stopping_.load()) {
      send(encode_error_response(id, ErrorCode::shutting_down,
                                 "the server is shutting down and takes no new requests", limits));
      return;
    }
    const bool sent = send(answer(request));
    ++answered_;
    if (!sent || stopping_.load()) return;
  }
}

std::vector<std::byte> Server::answer(InferRequest& request) {
  const Limits& limits = options_.limits;
  try {
    InferResult result = handler_->handle(request);
    const double elapsed = ms_since(request.received);
    if (request.deadline_ms != 0 && elapsed > request.deadline_ms) {
      return encode_error_response(
          request.id, ErrorCode::deadline_exceeded,
          detail::str_cat("expected an answer within ", request.deadline_ms,
                          " ms, but the request took ", elapsed, " ms"),
          limits);
    }
    return encode_infer_response(request.id, result, limits);
  } catch (...) {
    auto [code, message] = classify_error(std::current_exception());
    return encode_error_response(request.id, code, message, limits);
  }
}

}  // namespace ferry::switch_
