// `ferry bench-load`, the module part: Module::to(sim:0) of modules holding ResNet-152's and
// BERT-base's tensors (pageable host memory, as a freshly built model's), against one contiguous
// pageable copy of the same total bytes, against the same transfer without landing small tensors
// in place, and against a naive loop of one blocking to() per tensor,
// each sample moving the module back (untimed) first. Then, on the CPU, to(bfloat16) and
// load_state_dict beside PyTorch's model.to(bfloat16) and the per-parameter copy_ of its
// load_state_dict, when built with PyTorch.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "bench/load_bench.h"
#include "ferry/autograd/grad_mode.h"
#include "ferry/backends/sim/sim.h"
#include "ferry/device/stream.h"
#include "ferry/nn/transfer.h"
#include "ferry/ops/factories.h"

namespace ferry::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Population {
  int64_t tensors = 0;
  int64_t bytes = 0;
  int64_t small = 0;  // packed by the planned transfer
};

// "FERRY_SIM_BANDWIDTH=25G ..." for the table's title.
std::string sim_settings() {
  std::string out;
  for (const auto& [key, value] : sim::config().settings()) {
    out += (out.empty() ? "" : " ") + key + "=" + value;
  }
  return out;
}

Population population(const nn::Module& m) {
  Population p;
  const nn::TransferOptions defaults;
  for (const TensorDict& d : {m.named_parameters(), m.named_buffers()}) {
    for (const auto& item : d) {
      ++p.tensors;
      p.bytes += static_cast<int64_t>(item.value().nbytes());
      if (item.value().nbytes() <= defaults.small_tensor_bytes) ++p.small;
    }
  }
  return p;
}

}  // namespace

void run_module_bench(int repeat, bool quick) {
  const int runs = quick ? std::min(repeat, 3) : repeat;
  const Device dev("sim:0");
  std::printf("module.to(sim:0): pageable host tensors, blocking; sim: %s; median of %d runs\n",
              sim_settings().c_str(), runs);
  std::printf("%-10s %7s %8s %9s %13s %6s %13s %14s %15s %13s\n", "model", "tensors", "MiB",
              "to ms", "contig. ms", "ratio", "us/tensor", "unlanded ms", "naive loop ms",
              "non-blk call");
  struct Model {
    const char* name;
    std::vector<TensorShape> shapes;
  };
  const std::vector<Model> models = {{"resnet152", resnet152_shapes()},
                                     {"bert_base", bert_base_shapes()}};
  for (const Model& model : models) {
    const std::shared_ptr<nn::Module> m = module_from_shapes(model.shapes);
    const Population p = population(*m);
    const Tensor flat = empty({p.bytes}, TensorOptions(kUInt8));
    std::memset(flat.data_ptr(), 1, static_cast<size_t>(p.bytes));
    std::vector<Tensor> tensors = m->parameters();
    for (const Tensor& b : m->buffers()) tensors.push_back(b);
    // Warm-up: the device allocator's cache and the pinned staging buffer.
    m->to(dev);
    m->cpu();
    (void)flat.to(dev);
    std::vector<double> t_to, t_flat, t_naive, t_call, t_unlanded;
    for (int r = 0; r < runs; ++r) {
      // The same transfer with land_in_place off (each small tensor its own allocation and
      // device-side copy), as Module::to did before: the in-run comparison. The two alternate
      // which goes first, as the first timed move after the loop's non-blocking one pays more.
      const auto unlanded = [&] {
        t_unlanded.push_back(time_ms([&] {
          autograd::NoGradGuard no_grad;
          std::vector<nn::MovePair> moves;
          for (const Tensor& t : tensors)
            moves.push_back({t, TensorOptions(t.dtype()).device(dev)});
          nn::batched_move(moves, false, {.land_in_place = false});
          for (size_t i = 0; i < moves.size(); ++i) tensors[i].set_data(moves[i].dst);
        }));
        m->cpu();
      };
      const auto landed = [&] {
        t_to.push_back(time_ms([&] { m->to(dev); }));
        m->cpu();
      };
      if (r % 2 == 0) {
        landed();
        unlanded();
      } else {
        unlanded();
        landed();
      }
      t_flat.push_back(time_ms([&] { (void)flat.to(dev); }));
      t_naive.push_back(time_ms([&] {
        std::vector<Tensor> moved;
        moved.reserve(tensors.size());
        for (const Tensor& t : tensors) moved.push_back(t.to(dev));
      }));
      t_call.push_back(time_ms([&] { m->to(dev, /*non_blocking=*/true); }));
      current_stream(dev).synchronize();
      m->cpu();
    }
    const double to_ms = median(t_to), flat_ms = median(t_flat);
    std::printf("%-10s %7lld %8.1f %9.2f %13.2f %6.2f %13.2f %14.2f %15.2f %13.2f\n", model.name,
                static_cast<long long>(p.tensors), static_cast<double>(p.bytes) / (1 << 20), to_ms,
                flat_ms, to_ms / flat_ms, (to_ms - flat_ms) * 1e3 / static_cast<double>(p.tensors),
                median(t_unlanded), median(t_naive), median(t_call));
  }
  std::printf(
      "ratio = to ms / contiguous ms (target <= 1.1); us/tensor = (to - contiguous) / "
      "tensors; unlanded = the same transfer with land_in_place off; naive loop = one blocking "
      "Tensor::to per tensor; non-blk call = time for to(sim:0, non_blocking=true) to return\n\n");

  std::printf("On the CPU (ms, median of %d)%s\n", runs,
#if defined(FERRY_HAVE_TORCH)
              ""
#else
              ": built without PyTorch (configure with -DFERRY_BENCH_TORCH=ON to compare)"
#endif
  );
#if defined(FERRY_HAVE_TORCH)
  std::printf("%-10s %16s %16s %20s %22s   (PyTorch %s)\n", "model", "ferry to(bf16)",
              "torch to(bf16)", "ferry load_state_dict", "torch param copy_ loop",
              torch_version_string());
#else
  std::printf("%-10s %16s %20s\n", "model", "ferry to(bf16)", "ferry load_state_dict");
#endif
  for (const auto& [name, shapes] : std::vector<std::pair<const char*, std::vector<TensorShape>>>{
           {"resnet152", resnet152_shapes()}, {"bert_base", bert_base_shapes()}}) {
    const std::shared_ptr<nn::Module> m = module_from_shapes(shapes);
    const TensorDict sd = module_from_shapes(shapes)->state_dict();
    std::vector<double> t_to, t_load;
    m->to(kBFloat16);
    m->to(kFloat32);
    for (int r = 0; r < runs; ++r) {
      t_to.push_back(time_ms([&] { m->to(kBFloat16); }));
      m->to(kFloat32);
      t_load.push_back(time_ms([&] { m->load_state_dict(sd); }));
    }
#if defined(FERRY_HAVE_TORCH)
    const TorchModuleTimes torch = time_torch_module(shapes, runs);
    std::printf("%-10s %16.2f %16.2f %20.2f %22.2f\n", name, median(t_to), torch.to_bf16_ms,
                median(t_load), torch.load_ms);
#else
    std::printf("%-10s %16.2f %20.2f\n", name, median(t_to), median(t_load));
#endif
  }
}

}  // namespace ferry::bench
