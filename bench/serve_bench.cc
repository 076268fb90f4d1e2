// `ferry bench-serve`: switching versus one model per device under a Zipf workload (see
// serve_bench.h).
#include "bench/serve_bench.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>

#include "bench/load_bench.h"
#include "bench/switch_bench.h"  // switch_bench_sim_config
#include "ferry/backends/sim/sim.h"
#include "ferry/core/error.h"
#include "ferry/core/generator.h"
#include "ferry/ops/factories.h"
#include "ferry/switch/load_generator.h"
#include "ferry/switch/served_model.h"
#include "ferry/switch/server.h"
#include "ferry/switch/switching_handler.h"
#include "ferry/switch/worker_pool.h"

namespace ferry::bench {
namespace {

using namespace ferry::switch_;

struct SetupResult {
  std::string name;
  size_t devices = 0;
  LoadReport load;
  uint64_t switches = 0;
};

ModelConfig serve_bench_model(const std::string& arch, size_t index) {
  ModelConfig c;
  c.name = "m" + std::to_string(index) + "-" + arch;
  c.arch = arch;
  c.seed = index + 1;
  if (arch == "bert-tiny") {
    c.arch = "bert";
    c.bert.hidden_size = 128;
    c.bert.num_hidden_layers = 2;
    c.bert.num_attention_heads = 2;
    c.bert.intermediate_size = 512;
    c.bert.vocab_size = 1000;
  }
  return c;
}

std::vector<NamedTensor> serve_bench_input(const ModelConfig& c, const ZooInputShape& shape,
                                           uint64_t seed) {
  Generator gen(seed);
  if (c.arch == "bert" || c.arch == "bert-base") {
    const int64_t vocab = c.arch == "bert" ? c.bert.vocab_size : 30522;
    return {
        {"input_ids", randint(vocab, {shape.batch, shape.seq_len}, TensorOptions(kInt64), &gen)}};
  }
  return {
      {"x", randn({shape.batch, 3, shape.image_size, shape.image_size}, TensorOptions(), &gen)}};
}

SetupResult run_setup(const std::string& name, const ServeConfig& config, size_t device_count,
                      uint64_t resident_bytes, const ZooInputShape& shape, const LoadSpec& spec,
                      bool worker_processes) {
  std::vector<Device> devices;
  for (size_t d = 0; d < device_count; ++d) devices.emplace_back("sim:" + std::to_string(d));
  std::shared_ptr<RequestHandler> handler;
  std::function<uint64_t()> switches;
  if (worker_processes) {
    WorkerPoolOptions pool;
    pool.worker_program = this_executable();
    for (const auto& [key, value] : sim::config().settings()) pool.worker_environment[key] = value;
    pool.standby = 1;
    pool.resident_bytes = (resident_bytes + 511) / 512 * 512;
    pool.profile_shape = shape;
    auto workers = std::make_shared<WorkerPoolHandler>(config, devices, pool);
    switches = [workers] { return workers->switch_count(); };
    handler = workers;
  } else {
    SwitchingOptions options;
    options.resident_bytes = resident_bytes;
    options.profile_shape = shape;
    auto in_process = std::make_shared<SwitchingHandler>(config, devices, options);
    switches = [in_process] { return in_process->switch_count(); };
    handler = in_process;
  }
  std::string dir = (std::filesystem::temp_directory_path() / "ferry-bench-serve-XXXXXX").string();
  FERRY_CHECK(::mkdtemp(dir.data()) != nullptr, "bench-serve: mkdtemp failed");
  SetupResult result{name, device_count, {}, 0};
  try {
    ServerOptions server_options;
    server_options.socket_path = dir + "/ferry.sock";
    Server server(server_options, handler);
    result.load = run_load(spec, [&] { return std::make_unique<Client>(server.socket_path()); });
    result.switches = switches();
    server.stop();
  } catch (...) {
    std::filesystem::remove_all(dir);
    throw;
  }
  std::filesystem::remove_all(dir);
  return result;
}

}  // namespace

int run_serve_bench(const ServeBenchOptions& o) {
  std::vector<std::string> archs = o.models;
  ZooInputShape shape{o.batch, 224, 128};
  LoadSpec spec;
  spec.requests = o.requests;
  spec.clients = o.clients;
  spec.zipf = o.zipf;
  spec.seed = o.seed;
  if (o.quick) {
    archs = {"bert-tiny", "bert-tiny", "bert-tiny", "bert-tiny"};
    shape = {1, 32, 16};
    spec.requests = std::min<long long>(o.requests, 40);
  }
  FERRY_CHECK(archs.size() == 4, "bench-serve: expected four models, got ", archs.size());
  FERRY_CHECK(shape.batch >= 1, "bench-serve: expected --batch >= 1, got ", shape.batch);
  (void)ZipfSampler(archs.size(), spec.zipf);  // refuses a bad exponent before anything runs

  sim::SimConfig saved = sim::config();
  sim::SimConfig c = saved;
  c.devices = std::max(c.devices, 4);
  // The device count stays: pinned and pooled allocations outlive the setups, and the count can
  // change only while none is live.
  saved.devices = c.devices;
  sim::configure(switch_bench_sim_config(c, o.compute, o.bandwidth, o.latency));

  ServeConfig config;
  for (size_t i = 0; i < archs.size(); ++i) {
    config.models.push_back(serve_bench_model(archs[i], i));
    spec.models.push_back(config.models.back().name);
    spec.inputs.push_back(serve_bench_input(config.models.back(), shape, i + 100));
  }
  uint64_t largest = 0;
  for (const ModelConfig& m : config.models) {
    largest = std::max<uint64_t>(largest, ServedModel(m, shape).weight_bytes());
  }

  std::printf(
      "bench-serve: %lld requests from %d clients, models drawn Zipf(%.2f) with seed %llu; sim "
      "link %s with %s per copy, compute %s (timing-only), batch %lld; CPU %s\n",
      static_cast<long long>(spec.requests), spec.clients, spec.zipf,
      static_cast<unsigned long long>(spec.seed), o.bandwidth.c_str(), o.latency.c_str(),
      o.compute.c_str(), static_cast<long long>(shape.batch), cpu_model_name().c_str());
  std::printf("models (by Zipf rank):");
  for (const std::string& m : spec.models) std::printf(" %s", m.c_str());
  std::printf("; resident capacity %.1f MB per device (the largest model)\n",
              static_cast<double>(largest) / 1e6);
  std::fflush(stdout);

  std::vector<SetupResult> results;
  try {
    results.push_back(run_setup("switching, in process", config, 2, largest, shape, spec, false));
    results.push_back(
        run_setup("switching, worker processes", config, 2, largest, shape, spec, true));
    results.push_back(run_setup("one model per device", config, 4, largest, shape, spec, false));
  } catch (...) {
    sim::configure(saved);
    throw;
  }
  sim::configure(saved);

  std::printf("\n| setup | devices | p50 ms | p99 ms | requests/s | switched | failed |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  int status = 0;
  for (const SetupResult& r : results) {
    std::printf("| %s | %zu | %.2f | %.2f | %.1f | %llu of %lld | %lld |\n", r.name.c_str(),
                r.devices, r.load.p50_ms, r.load.p99_ms, r.load.requests_per_s,
                static_cast<unsigned long long>(r.switches), static_cast<long long>(r.load.ok),
                static_cast<long long>(r.load.failed));
    if (r.load.failed > 0) {
      std::fprintf(stderr, "bench-serve: %s: first failure: %s\n", r.name.c_str(),
                   r.load.first_error.c_str());
      status = 1;
    }
  }
  std::printf("per model (switching, in process):");
  for (size_t m = 0; m < spec.models.size(); ++m) {
    std::printf(" %s %lld", spec.models[m].c_str(),
                static_cast<long long>(results[0].load.per_model[m]));
  }
  std::printf("\n");
  return status;
}

}  // namespace ferry::bench
