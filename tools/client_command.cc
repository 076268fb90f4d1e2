// `ferry client`: sends a safetensors file's tensors to a `ferry serve` model and saves the
// outputs, printing the server's timings; with --load N --clients K, K threads send N requests
// in all and the latency percentiles and throughput are printed. --models a,b,c with --zipf S
// draws each request's model Zipf-distributed from a printed seed (load_generator.h). Exit
// status 1 when a request fails (the server's error code and message are printed).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <memory>
#include <random>

#include "ferry/nn/safetensors.h"
#include "ferry/switch/client.h"
#include "ferry/switch/load_generator.h"
#include "tools/command.h"

namespace ferry::tools {
namespace {

using namespace ferry::switch_;
using Clock = std::chrono::steady_clock;

struct ClientCommandOptions {
  std::string socket;
  int tcp_port = -1;
  std::string model;
  std::string models;  // load test: comma-separated, drawn Zipf-distributed
  double zipf = 1.0;
  uint64_t seed = 0;
  bool seed_given = false;
  std::vector<std::string> input;
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

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    FERRY_CHECK(!name.empty(),
                "--models: expected a comma-separated list such as a,b,c, but got \"", list, "\"");
    names.push_back(name);
    start = comma + 1;
  }
  return names;
}

int run_load_command(const ClientCommandOptions& o,
                     const std::vector<std::vector<NamedTensor>>& inputs) {
  LoadSpec spec;
  spec.models = o.models.empty() ? std::vector<std::string>{o.model} : split_names(o.models);
  spec.inputs = inputs;
  spec.requests = o.load;
  spec.clients = o.clients;
  spec.zipf = o.models.empty() ? 0.0 : o.zipf;
  spec.seed = o.seed_given ? o.seed : std::random_device{}();
  spec.deadline_ms = static_cast<uint32_t>(o.deadline_ms);
  if (spec.models.size() > 1) {
    std::cout << "models: " << o.models << ", zipf " << spec.zipf << ", seed " << spec.seed
              << " (replay with --seed " << spec.seed << ")\n";
  }
  // new from the prvalue: Client cannot move (it holds a mutex).
  const LoadReport r =
      run_load(spec, [&] { return std::unique_ptr<Client>(new Client(connect(o))); });
  std::cout << std::fixed << std::setprecision(3) << "requests: " << r.ok << " ok, " << r.failed
            << " failed, " << o.clients << " clients\n"
            << "latency: p50 " << r.p50_ms << " ms, p99 " << r.p99_ms << " ms\n"
            << "throughput: " << r.requests_per_s << " requests/s\n";
  if (spec.models.size() > 1) {
    std::cout << "per model:";
    for (size_t m = 0; m < spec.models.size(); ++m) {
      std::cout << " " << spec.models[m] << " " << r.per_model[m];
    }
    std::cout << "\n";
  }
  if (r.failed > 0) {
    std::cerr << "ferry client: first failure: " << r.first_error << "\n";
    return 1;
  }
  return 0;
}

int run_client(const ClientCommandOptions& o) {
  FERRY_CHECK(!o.socket.empty() || o.tcp_port >= 0, "ferry client: expected --socket or --tcp");
  FERRY_CHECK(o.model.empty() != o.models.empty(),
              "ferry client: expected --model, or --models with --load, but got ",
              o.model.empty() ? "neither" : "both");
  FERRY_CHECK(o.models.empty() || o.load > 0, "ferry client: --models needs --load N");
  std::vector<std::vector<NamedTensor>> inputs;
  for (const std::string& path : o.input) inputs.push_back(read_inputs(path));
  FERRY_CHECK(o.load > 0 || inputs.size() == 1,
              "ferry client: expected one --input for one request, but got ", inputs.size());
  try {
    return o.load > 0 ? run_load_command(o, inputs) : run_once(o, inputs[0]);
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
      sub.add_option("--model", o->model, "The model's name (models.toml)");
      sub.add_option("--input", o->input,
                     "A safetensors file with the model's inputs (with --models: one for all "
                     "models, or one per model in order)")
          ->required();
      sub.add_option("--output", o->output, "Save the outputs to this safetensors file");
      sub.add_option("--deadline-ms", o->deadline_ms, "The request's deadline (0: none)")
          ->capture_default_str();
      sub.add_option("--timeout-ms", o->timeout_ms, "Connect timeout")->capture_default_str();
      sub.add_option("--load", o->load, "Send this many requests in all (a load test)");
      sub.add_option("--clients", o->clients, "Load test: concurrent connections")
          ->capture_default_str();
      sub.add_option("--models", o->models,
                     "Load test: models a,b,c,... each request's drawn Zipf-distributed");
      sub.add_option("--zipf", o->zipf, "Load test: the Zipf exponent (0: uniform)")
          ->capture_default_str();
      sub.add_option("--seed", o->seed,
                     "Load test: the seed of the model draws (default: random, printed)")
          ->each([o](const std::string&) { o->seed_given = true; });
      return [o] { return run_client(*o); };
    });

}  // namespace
}  // namespace ferry::tools
