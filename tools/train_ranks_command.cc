// `ferry train-ranks`: one rank of a GPipe trained across processes (docs/transport.md, "Two
// ranks"). Every rank runs the same command with its own --rank; rank 0 listens at --address,
// the others connect to it (FERRY_TRANSPORT_SECRET must be the same everywhere). The model is an
// MLP split into one partition per rank on each rank's --device, trained with plain SGD on one
// random batch for --steps steps. The last rank prints each step's loss beside the loss of the same
// step of the same model trained in one process (which it also runs, on the CPU), so a user sees at
// once that the pipeline across processes trains as one process would; the exit status is 1 when
// they differ by more than float rounding.
#if FERRY_WITH_TRANSPORT
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "ferry/ferry.h"
#include "ferry/nn/models/mlp.h"
#include "ferry/pipeline/pipeline.h"
#include "ferry/transport/endpoint.h"
#include "ferry/transport/group.h"
#include "tools/command.h"

namespace ferry::tools {
namespace {

struct TrainRanksOptions {
  int rank = 0;
  int ranks = 2;
  std::string address = "127.0.0.1:29500";
  std::string host;  // where this rank listens for the ranks above it (default: --address's host)
  std::string net_devices = "lo";
  std::string device = "sim:0";
  int steps = 5;
  int64_t chunks = 4;
  int64_t batch = 64;
  int64_t width = 256;
  double lr = 0.05;
  uint64_t seed = 1;
  std::string checkpoint = "except_last";
};

nn::Sequential make_model(const TrainRanksOptions& o) {
  nn::models::MLPOptions options;
  options.seed = o.seed;
  // One Linear + ReLU pair per rank, then the head: 2 * ranks + 1 layers.
  return nn::models::mlp(o.width, std::vector<int64_t>(size_t(o.ranks), o.width), 10, options);
}

void sgd_step(const std::vector<Tensor>& parameters, double lr) {
  NoGradGuard no_grad;
  for (const Tensor& p : parameters) {
    if (!p.grad().defined()) continue;
    Tensor data = p;
    data.sub_(p.grad().mul(lr));
    p.mutable_grad() = Tensor();
  }
}

int run_train_ranks(const TrainRanksOptions& o) {
  const size_t colon = o.address.rfind(':');
  FERRY_CHECK(colon != std::string::npos, "train-ranks: expected --address HOST:PORT, got \"",
              o.address, "\"");
  const std::string host = o.address.substr(0, colon);
  const auto port = static_cast<uint16_t>(std::stoi(o.address.substr(colon + 1)));
  transport::EndpointOptions endpoint_options;
  endpoint_options.name = "rank" + std::to_string(o.rank);
  endpoint_options.network_devices = o.net_devices;
  auto endpoint = std::make_shared<transport::Endpoint>(endpoint_options);
  uint16_t root_port = port;
  if (o.rank == 0) {
    // Listen before the rendezvous so that port 0 (a free port) can be printed for the others.
    root_port = endpoint->listen(host, port);
    std::fprintf(stderr, "rank 0 of %d: listening at %s:%u\n", o.ranks, host.c_str(),
                 unsigned{root_port});
  } else {
    std::fprintf(stderr, "rank %d of %d: connecting to %s\n", o.rank, o.ranks, o.address.c_str());
  }
  auto group = std::make_shared<transport::Group>(
      transport::Group::rendezvous(endpoint, o.rank, o.ranks, host, root_port, o.host));

  // Partition r: rank r's Linear + ReLU (the last rank also the head).
  std::vector<int64_t> balance(size_t(o.ranks), 2);
  balance.back() += 1;
  std::vector<std::string> placements;
  for (int r = 0; r < o.ranks; ++r)
    placements.push_back("rank" + std::to_string(r) + ":" + o.device);
  nn::Sequential model = make_model(o);
  pipeline::GPipe pipe(model, balance, placements, o.chunks, group, o.checkpoint);
  const bool last = o.rank == o.ranks - 1;
  nn::Sequential reference = make_model(o);  // the same model in one process (last rank only)

  int mismatches = 0;
  if (last) std::printf("%-6s %-14s %-14s %s\n", "step", "loss", "one process", "step ms");
  Generator gen(o.seed * 7919);  // one batch, learned over the steps
  const Tensor x = randn({o.batch, o.width}, kFloat32, &gen);
  const Tensor target = randn({o.batch, 10}, kFloat32, &gen);
  for (int step = 0; step < o.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    const Tensor out = pipe.forward(o.rank == 0 ? x.to(Device(o.device)) : Tensor());
    Tensor loss;
    if (last) {
      loss = mse_loss(out, target.to(out.device()));
      loss.backward();
    } else {
      out.backward();
    }
    sgd_step(pipe.parameters(), o.lr);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!last) continue;
    const Tensor expected = mse_loss(reference->forward(x), target);
    expected.backward();
    sgd_step(reference->parameters(), o.lr);
    const double got = loss.item<double>(), want = expected.item<double>();
    const bool same = std::fabs(got - want) <= 1e-4 * std::fabs(want) + 1e-6;
    mismatches += same ? 0 : 1;
    std::printf("%-6d %-14.6f %-14.6f %.1f%s\n", step, got, want, ms, same ? "" : "  DIFFERENT");
  }
  // The last SGD updates may still be queued on the device: finish them before the process
  // (and the thread pool their kernels use) goes away.
  device_synchronize(Device(o.device));
  if (last) {
    std::printf(mismatches == 0 ? "every step's loss matches the one-process run\n"
                                : "%d steps differ from the one-process run\n",
                mismatches);
  }
  return mismatches == 0 ? 0 : 1;
}

}  // namespace

FERRY_REGISTER_COMMAND(
    "train-ranks",
    "Train an MLP with GPipe across processes: run once per rank (FERRY_TRANSPORT_SECRET set)",
    [](CLI::App& sub) -> std::function<int()> {
      auto o = std::make_shared<TrainRanksOptions>();
      sub.add_option("--rank", o->rank, "This process's rank (0 listens)")->required();
      sub.add_option("--ranks", o->ranks, "Number of ranks (one partition each)")
          ->capture_default_str();
      sub.add_option("--address", o->address,
                     "Rank 0's HOST:PORT (rank 0 given port 0 takes a free one and prints it)")
          ->capture_default_str();
      sub.add_option("--host", o->host,
                     "The address of this machine the higher ranks reach this rank at (ranks "
                     "above 0 on other machines; default: --address's host)");
      sub.add_option("--net-devices", o->net_devices,
                     "Network devices UCX may use for data (e.g. eth0, all)")
          ->capture_default_str();
      sub.add_option("--device", o->device, "This rank's device")->capture_default_str();
      sub.add_option("--steps", o->steps, "Training steps")->capture_default_str();
      sub.add_option("--chunks", o->chunks, "Micro-batches per step")->capture_default_str();
      sub.add_option("--batch", o->batch, "Rows per step")->capture_default_str();
      sub.add_option("--width", o->width, "Hidden width")->capture_default_str();
      sub.add_option("--checkpoint", o->checkpoint, "always, except_last or never")
          ->capture_default_str();
      sub.add_option("--seed", o->seed, "Model and data seed")->capture_default_str();
      return [o] { return run_train_ranks(*o); };
    });

}  // namespace ferry::tools
#endif  // FERRY_WITH_TRANSPORT
