// `ferry client`: sends a safetensors file's tensors to a `ferry serve` model and saves the
// outputs, printing the server's timings; with --load N --clients K, K threads send N requests
// in all and the latency percentiles and throughput are printed. Exit status 1 when a request
// fails (the server's error code and message are printed).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "ferry/nn/safetensors.h"
#include "ferry/switch/client.h"
#include "tools/command.h"

namespace ferry::tools {
namespace {

using namespace ferry::switch_;
using Clock = std::chrono::steady_clock;

struct ClientCommandOptions {
  std::string socket;
  int tcp_port = -1;
  std::string model;
  std::string input;
  std::string output;
  int64_t deadline_ms = 0;
  int64_t timeout_ms = 10000;
  int64_t load = 0;
  int clients = 1;
};

Client connect(const ClientCommandOptions& o) {
  ClientOptions options;
  options.connect_timeout = std::chrono::milliseconds(o.timeout_ms);
  if (o.tcp_port >= 0) return Client::tcp(static_cast<uint16_t>(o.tcp_port), options);
  return Client(o.socket, options);
}

std::vector<NamedTensor> read_inputs(const std::string& path) {
  safetensors::LoadOptions options;
  options.host_memory = safetensors::HostMemory::kPageable;
  std::vector<NamedTensor> inputs;
  for (const auto& item : safetensors::load(path, options)) {
    inputs.push_back({item.key(), item.value()});
  }
  return inputs;
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

int run_once(const ClientCommandOptions& o, const std::vector<NamedTensor>& inputs) {
  Client client = connect(o);
  const auto t0 = Clock::now();
  InferResult r = client.infer(o.model, inputs, std::chrono::milliseconds(o.deadline_ms));
  const double total = ms(Clock::now() - t0);
  for (const NamedTensor& out : r.outputs) {
    std::cout << "output " << out.name << ": " << dtype_name(out.tensor.dtype()) << " [";
    for (int64_t d = 0; d < out.tensor.dim(); ++d)
      std::cout << (d ? ", " : "") << out.tensor.size(d);
    std::cout << "]\n";
  }
  std::cout << std::fixed << std::setprecision(3) << "timings: queue " << r.timings.queue_ms
            << " ms, transfer " << r.timings.transfer_ms << " ms, compute " << r.timings.compute_ms
            << " ms; round trip " << total << " ms\n";
  if (!o.output.empty()) {
    TensorDict dict;
    for (const NamedTensor& out : r.outputs) dict.insert(out.name, out.tensor);
    safetensors::save(o.output, dict);
    std::cout << "saved " << r.outputs.size() << " outputs to " << o.output << "\n";
  }
  return 0;
}

int run_load(const ClientCommandOptions& o, const std::vector<NamedTensor>& inputs) {
  FERRY_CHECK(o.clients >= 1 && o.clients <= 1024, "--clients: expected 1 to 1024, but got ",
              o.clients);
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> failures{0};
  std::mutex mutex;
  std::vector<double> latencies;
  std::string first_error;
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < o.clients; ++c) {
    threads.emplace_back([&] {
      std::vector<double> mine;
      try {
        Client client = connect(o);
        while (next.fetch_add(1) < o.load) {
          const auto t0 = Clock::now();
          try {
            client.infer(o.model, inputs, std::chrono::milliseconds(o.deadline_ms));
            mine.push_back(ms(Clock::now() - t0));
          } catch (const Error& e) {
            ++failures;
            std::lock_guard lock(mutex);
            if (first_error.empty()) first_error = e.what();
          }
        }
      } catch (const Error& e) {
        ++failures;
        std::lock_guard lock(mutex);
        if (first_error.empty()) first_error = e.what();
      }
      std::lock_guard lock(mutex);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = ms(Clock::now() - start) / 1000;
  std::sort(latencies.begin(), latencies.end());
  const auto pct = [&](double p) {
    if (latencies.empty()) return 0.0;
    const size_t i = std::min(latencies.size() - 1,
                              static_cast<size_t>(p * static_cast<double>(latencies.size())));
    return latencies[i];
  };
  std::cout << std::fixed << std::setprecision(3) << "requests: " << latencies.size() << " ok, "
            << failures.load() << " failed, " << o.clients << " clients\n"
            << "latency: p50 " << pct(0.50) << " ms, p99 " << pct(0.99) << " ms\n"
            << "throughput: " << (seconds > 0 ? static_cast<double>(latencies.size()) / seconds : 0)
            << " requests/s\n";
  if (failures.load() > 0) {
    std::cerr << "ferry client: first failure: " << first_error << "\n";
    return 1;
  }
  return 0;
}

int run_client(const ClientCommandOptions& o) {
  FERRY_CHECK(!o.socket.empty() || o.tcp_port >= 0, "ferry client: expected --socket or --tcp");
  const std::vector<NamedTensor> inputs = read_inputs(o.input);
  try {
    return o.load > 0 ? run_load(o, inputs) : run_once(o, inputs);
  } catch (const SwitchError& e) {
    std::cerr << "ferry client: " << e.what() << "\n";
    return 1;
  }
}

FERRY_REGISTER_COMMAND(
    "client",
    "Send a safetensors file's tensors to a `ferry serve` model; save the outputs, or load-test "
    "with --load N --clients K",
    [](CLI::App& sub) -> std::function<int()> {
      auto o = std::make_shared<ClientCommandOptions>();
      sub.add_option("--socket", o->socket, "The server's socket file");
      sub.add_option("--tcp", o->tcp_port, "Connect to 127.0.0.1:PORT instead");
      sub.add_option("--model", o->model, "The model's name (models.toml)")->required();
      sub.add_option("--input", o->input, "A safetensors file with the model's inputs")->required();
      sub.add_option("--output", o->output, "Save the outputs to this safetensors file");
      sub.add_option("--deadline-ms", o->deadline_ms, "The request's deadline (0: none)")
          ->capture_default_str();
      sub.add_option("--timeout-ms", o->timeout_ms, "Connect timeout")->capture_default_str();
      sub.add_option("--load", o->load, "Send this many requests in all (a load test)");
      sub.add_option("--clients", o->clients, "Load test: concurrent connections")
          ->capture_default_str();
      return [o] { return run_client(*o); };
    });

}  // namespace
}  // namespace ferry::tools
