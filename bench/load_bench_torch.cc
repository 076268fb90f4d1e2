// PyTorch's side of `ferry bench-load` (built with -DFERRY_BENCH_TORCH=ON): a torch::nn::Module
// tree with the same names and shapes, model->to(bfloat16), and the copy_ per parameter and
// buffer under no_grad that Python's load_state_dict performs (libtorch's C++ frontend has no
// load_state_dict; this is its inner loop without the Python overhead).
#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>

#include "bench/load_bench.h"

namespace ferry::bench {
namespace {

std::shared_ptr<torch::nn::Module> torch_module(const std::vector<TensorShape>& shapes) {
  auto root = std::make_shared<torch::nn::Module>("Model");
  for (const TensorShape& s : shapes) {
    torch::nn::Module* m = root.get();
    size_t start = 0;
    for (size_t dot = s.name.find('.'); dot != std::string::npos; dot = s.name.find('.', start)) {
      const std::string part = s.name.substr(start, dot - start);
      auto children = m->named_children();
      if (auto* child = children.find(part)) {
        m = child->get();
      } else {
        m = m->register_module(part, std::make_shared<torch::nn::Module>("Module")).get();
      }
      start = dot + 1;
    }
    const std::string leaf = s.name.substr(start);
    if (s.buffer) {
      m->register_buffer(
          leaf, s.dtype == kInt64 ? torch::zeros(s.shape, torch::kInt64) : torch::randn(s.shape));
    } else {
      m->register_parameter(leaf, torch::randn(s.shape));
    }
  }
  return root;
}

}  // namespace

TorchModuleTimes time_torch_module(const std::vector<TensorShape>& shapes, int repeat) {
  const auto model = torch_module(shapes);
  const auto source = torch_module(shapes);
  std::vector<std::pair<torch::Tensor, torch::Tensor>> pairs;
  const auto sp = source->named_parameters();
  for (const auto& p : model->named_parameters()) pairs.emplace_back(p.value(), sp[p.key()]);
  const auto sb = source->named_buffers();
  for (const auto& b : model->named_buffers()) pairs.emplace_back(b.value(), sb[b.key()]);
  std::vector<double> to, load;
  model->to(torch::kBFloat16);
  model->to(torch::kFloat32);
  for (int r = 0; r < repeat; ++r) {
    to.push_back(time_ms([&] { model->to(torch::kBFloat16); }));
    model->to(torch::kFloat32);
    load.push_back(time_ms([&] {
      torch::NoGradGuard no_grad;
      for (auto& [dst, src] : pairs) dst.copy_(src);
    }));
  }
  return {median(to), median(load)};
}

const char* torch_version_string() { return TORCH_VERSION; }

}  // namespace ferry::bench
