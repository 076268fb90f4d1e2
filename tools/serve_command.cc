// `ferry serve`: serves the models of a models.toml over a Unix socket (and optionally loopback
// TCP) with ferry/switch's Server and LocalHandler, until SIGTERM or SIGINT, then stops
// accepting, drains the requests in flight and exits 0. The signal is caught by a handler that
// only writes to a pipe, so it works whichever thread the kernel delivers it to.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <iostream>
#include <memory>

#include "ferry/switch/local_handler.h"
#include "ferry/switch/model_config.h"
#include "ferry/switch/server.h"
#include "tools/command.h"

namespace ferry::tools {
namespace {

int g_signal_pipe = -1;

extern "C" void on_stop_signal(int signal_number) {
  const int saved = errno;
  const char byte = static_cast<char>(signal_number);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe, &byte, 1);
  errno = saved;
}

struct ServeOptions {
  std::string devices = "sim:0";
  std::string models;
  std::string socket;
  int tcp_port = -1;
  std::vector<unsigned> allow_uids;
  size_t max_connections = 64;
  int64_t read_timeout_ms = 10000;
  int64_t idle_timeout_ms = 60000;
  uint64_t max_frame_bytes = uint64_t{1} << 30;
};

int run_serve(const ServeOptions& o) {
  using namespace ferry::switch_;
  int fds[2];
  FERRY_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "serve: pipe2 failed");
  g_signal_pipe = fds[1];
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);

  const ServeConfig config = parse_models_toml_file(o.models);
  const std::vector<Device> devices = parse_device_list(o.devices);
  auto handler = std::make_shared<LocalHandler>(config, devices);
  ServerOptions options;
  options.socket_path = o.socket;
  for (unsigned uid : o.allow_uids) options.allowed_uids.push_back(static_cast<uid_t>(uid));
  if (o.tcp_port >= 0) {
    FERRY_CHECK(o.tcp_port <= 65535, "--tcp: expected a port from 0 to 65535, but got ",
                o.tcp_port);
    options.tcp_port = static_cast<uint16_t>(o.tcp_port);
  }
  options.max_connections = o.max_connections;
  options.read_timeout = std::chrono::milliseconds(o.read_timeout_ms);
  options.idle_timeout = std::chrono::milliseconds(o.idle_timeout_ms);
  options.limits.max_frame_bytes = o.max_frame_bytes;
  Server server(options, handler);
  std::cout << "ferry serve: listening on " << server.socket_path();
  if (server.tcp_port() != 0) std::cout << " and 127.0.0.1:" << server.tcp_port();
  std::cout << "\n";
  for (const std::string& name : handler->model_names()) {
    std::cout << "  model " << name << " on " << handler->device_of(name) << "\n";
  }
  std::cout << std::flush;
  char byte = 0;
  while (true) {
    const ssize_t n = ::read(fds[0], &byte, 1);
    if (n == 1) break;
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  std::cout << "ferry serve: signal " << static_cast<int>(byte) << ", draining requests in flight"
            << std::endl;
  server.stop();
  std::cout << "ferry serve: stopped after answering " << server.requests_answered() << " requests"
            << std::endl;
  return 0;
}

FERRY_REGISTER_COMMAND(
    "serve",
    "Serve model-zoo models (models.toml) over a Unix socket in a private directory; SIGTERM "
    "drains and stops",
    [](CLI::App& sub) -> std::function<int()> {
      auto o = std::make_shared<ServeOptions>();
      sub.add_option("--devices", o->devices, "Devices, e.g. sim:0,sim:1 (models round-robin)")
          ->capture_default_str();
      sub.add_option("--models", o->models, "The models.toml file")->required();
      sub.add_option("--socket", o->socket,
                     "Socket file; its directory is created 0700 or must be private")
          ->required();
      sub.add_option("--tcp", o->tcp_port, "Also listen on 127.0.0.1:PORT (0: any free port)");
      sub.add_option("--allow-uid", o->allow_uids,
                     "Uids allowed to connect (default: only this process's uid)");
      sub.add_option("--max-connections", o->max_connections, "Open connections at most")
          ->capture_default_str();
      sub.add_option("--read-timeout-ms", o->read_timeout_ms,
                     "Time for one request frame to arrive, from its first byte")
          ->capture_default_str();
      sub.add_option("--idle-timeout-ms", o->idle_timeout_ms,
                     "Time a connection may wait between requests")
          ->capture_default_str();
      sub.add_option("--max-frame-bytes", o->max_frame_bytes, "Largest request frame accepted")
          ->capture_default_str();
      return [o] { return run_serve(*o); };
    });

}  // namespace
}  // namespace ferry::tools
