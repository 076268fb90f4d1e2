// `ferry serve`: serves the models of a models.toml over a Unix socket (and optionally loopback
// TCP) with ferry/switch's Server and, by default, a WorkerPoolHandler (per device a region and
// 1 + --standby worker processes; models switched in pipelined on a miss; `-v` logs each switch
// and each worker restart), or with --in-process the SwitchingHandler that runs every model in
// this process. It runs until SIGTERM or SIGINT, then stops
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

#include "ferry/switch/model_config.h"
#include "ferry/switch/server.h"
#include "ferry/switch/switching_handler.h"
#include "ferry/switch/worker_pool.h"
#if FERRY_WITH_TRANSPORT
#include "ferry/switch/weight_share.h"
#endif
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
  uint64_t resident_bytes = 0;
  uint64_t workspace_bytes = 0;
  size_t standby = 2;
  bool in_process = false;
  bool preempt = false;
  std::string direct_access = "auto";
  int64_t profile_batch = 1;
  int64_t profile_image_size = 224;
  int64_t profile_seq_len = 128;
  std::string share_weights;  // host:port to offer the models' weights on
  std::string weights_from;   // host:port of a directory to fetch weights from
  std::string transport_devices = "lo";
  int verbose = 0;
};

#if FERRY_WITH_TRANSPORT
transport::EndpointOptions weight_endpoint_options(const ServeOptions& o) {
  transport::EndpointOptions options;
  options.name = detail::str_cat("ferry serve (pid ", ::getpid(), ")");
  options.network_devices = o.transport_devices;
  return options;
}
#endif

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
  const ZooInputShape profile_shape{o.profile_batch, o.profile_image_size, o.profile_seq_len};
  std::function<void(const SwitchEvent&)> on_switch;
  std::function<void(const std::string&)> log;
  if (o.verbose > 0) {
    on_switch = [](const SwitchEvent& e) {
      std::string evicted;
      for (const std::string& name : e.evicted) evicted += (evicted.empty() ? "" : ",") + name;
      std::printf("ferry serve: switch %s -> %s, %zu groups, evicted [%s], %.2f ms\n",
                  e.model.c_str(), e.device.str().c_str(), e.groups, evicted.c_str(), e.ms);
      std::fflush(stdout);
    };
  }
  log = [](const std::string& line) {
    std::printf("ferry serve: %s\n", line.c_str());
    std::fflush(stdout);
  };
  ModelLoader load_model;
#if FERRY_WITH_TRANSPORT
  if (!o.weights_from.empty()) {
    const auto [host, port] = parse_address(o.weights_from);
    load_model = fetching_loader(
        std::make_shared<WeightFetcher>(host, port, weight_endpoint_options(o)), log);
  }
#else
  if (!o.weights_from.empty() || !o.share_weights.empty()) {
    throw ConfigError(
        "ferry serve: --weights-from and --share-weights need ferry built with its transport "
        "(UCX and OpenSSL, FERRY_TRANSPORT), but this build has none");
  }
#endif
  std::shared_ptr<RequestHandler> handler;
  std::function<const ServedModel&(const std::string&)> served_model;
  std::vector<std::string> model_names;
  std::vector<std::string> summary;
  if (o.in_process) {
    SwitchingOptions switching;
    switching.resident_bytes = o.resident_bytes;
    switching.profile_shape = profile_shape;
    switching.on_switch = on_switch;
    switching.direct_access = parse_direct_access(o.direct_access);
    switching.load_model = load_model;
    auto in_process = std::make_shared<SwitchingHandler>(config, devices, switching);
    for (const Device& device : in_process->devices()) {
      summary.push_back(detail::str_cat(device.str(), ": resident capacity ",
                                        in_process->resident_capacity(device), " bytes"));
    }
    for (const std::string& name : in_process->model_names()) {
      const auto resident = in_process->resident_device(name);
      summary.push_back(detail::str_cat(
          "model ", name, " (", in_process->weight_bytes(name), " bytes) ",
          resident ? "resident on " + resident->str() : std::string("not resident")));
    }
    handler = in_process;
    served_model = [in_process](const std::string& name) -> const ServedModel& {
      return in_process->served_model(name);
    };
    model_names = in_process->model_names();
  } else {
    WorkerPoolOptions pool;
    pool.worker_program = this_executable();
    pool.standby = o.standby;
    pool.resident_bytes = o.resident_bytes;
    pool.workspace_bytes = o.workspace_bytes;
    pool.preempt = o.preempt;
    pool.direct_access = parse_direct_access(o.direct_access);
    pool.profile_shape = profile_shape;
    pool.on_switch = on_switch;
    pool.log = log;
    pool.load_model = load_model;
    auto workers = std::make_shared<WorkerPoolHandler>(config, devices, pool);
    for (const Device& device : workers->devices()) {
      summary.push_back(detail::str_cat(device.str(), ": resident capacity ",
                                        workers->params_capacity(device), " bytes"));
    }
    for (const WorkerInfo& w : workers->workers()) {
      summary.push_back(
          detail::str_cat("worker ", w.slot, " of ", w.device.str(), ": pid ", w.pid));
    }
    for (const std::string& name : workers->model_names()) {
      summary.push_back(detail::str_cat("model ", name, " (", workers->weight_bytes(name),
                                        " bytes, shared pinned memory)"));
    }
    handler = workers;
    served_model = [workers](const std::string& name) -> const ServedModel& {
      return workers->served_model(name);
    };
    model_names = workers->model_names();
  }
#if FERRY_WITH_TRANSPORT
  // The models' weights offered to other controllers, and announced to the directory they came
  // from so that later fetchers spread over the holders.
  std::unique_ptr<WeightShare> share;
  if (!o.share_weights.empty()) {
    const auto [host, port] = parse_address(o.share_weights, /*any_port=*/true);
    WeightShareOptions share_options;
    share_options.endpoint = weight_endpoint_options(o);
    share_options.host = host;
    share_options.port = port;
    share_options.log = log;
    share = std::make_unique<WeightShare>(share_options);
    const std::string address = detail::str_cat(host, ":", share->port());
    std::unique_ptr<WeightFetcher> directory;
    if (!o.weights_from.empty()) {
      const auto [dhost, dport] = parse_address(o.weights_from);
      directory = std::make_unique<WeightFetcher>(dhost, dport, weight_endpoint_options(o));
    }
    for (const ModelConfig& m : config.models) {
      const ServedModel& model = served_model(m.name);
      if (model.weight_bytes() == 0) continue;
      share->offer(m, model);
      if (!directory) continue;
      try {
        directory->announce(address, m, model);
      } catch (const Error& e) {
        log(detail::str_cat("model '", m.name, "': not announced to ", o.weights_from, ": ",
                            e.what()));
      }
    }
    summary.push_back("weights of " + std::to_string(config.models.size()) + " models shared on " +
                      address);
  }
#endif
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
  for (const std::string& line : summary) std::cout << "  " << line << "\n";
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
      sub.add_option("--devices", o->devices,
                     "Devices, e.g. sim:0,sim:1 (models start round-robin while they fit)")
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
      sub.add_option("--resident-bytes", o->resident_bytes,
                     "Device memory per device for resident model weights (0: half of its free "
                     "memory at startup; 80% with --in-process)")
          ->capture_default_str();
      sub.add_option("--standby", o->standby,
                     "Standby worker processes per device, besides the active one")
          ->capture_default_str();
      sub.add_option("--workspace-bytes", o->workspace_bytes,
                     "Each worker's workspace (activations) in the device's region (0: the rest "
                     "of the free memory, shared)")
          ->capture_default_str();
      sub.add_option("--direct-access", o->direct_access,
                     "Layers a switch reads in place from pinned host memory: auto (where the "
                     "planner finds it wins), off, or all")
          ->capture_default_str();
      sub.add_flag("--preempt", o->preempt,
                   "A request that finds every device busy stops a running request between "
                   "layers; the stopped request runs again (worker processes only)");
      sub.add_flag("--in-process", o->in_process,
                   "Run the models in this process instead of in worker processes");
      sub.add_option("--profile-batch", o->profile_batch,
                     "Batch of the example input each model is profiled on at startup")
          ->capture_default_str();
      sub.add_option("--profile-image-size", o->profile_image_size,
                     "ResNets are profiled on [batch, 3, size, size]")
          ->capture_default_str();
      sub.add_option("--profile-seq-len", o->profile_seq_len,
                     "BERTs are profiled on [batch, seq-len] token ids")
          ->capture_default_str();
      sub.add_option("--share-weights", o->share_weights,
                     "Offer the models' weights to other controllers on HOST:PORT (port 0: any "
                     "free one), with the directory of their holders (needs "
                     "FERRY_TRANSPORT_SECRET)");
      sub.add_option("--weights-from", o->weights_from,
                     "Fetch each model's weights from the holders a directory at HOST:PORT lists "
                     "(another controller's --share-weights) instead of reading its weights file; "
                     "falls back to the file");
      sub.add_option("--transport-devices", o->transport_devices,
                     "Network devices weight sharing may use (UCX_NET_DEVICES, e.g. eth0 or all)")
          ->capture_default_str();
      sub.add_flag("-v,--verbose", o->verbose,
                   "Log each switch (model, device, groups, evicted, ms)");
      return [o] { return run_serve(*o); };
    });

}  // namespace
}  // namespace ferry::tools
