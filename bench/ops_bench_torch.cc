// PyTorch's side of the operator benchmark (built with -DFERRY_BENCH_TORCH=ON): each case of
// ops_bench.h on libtorch tensors with the same shapes, dtypes and layouts, the same operations
// (torch::matmul, linear, conv2d, add, and the same MLP step), timed by ops_bench.cc; and
// PyTorch's thread count, its BLAS's included.
#include <dlfcn.h>
#include <torch/torch.h>

#include <cstdlib>
#include <vector>

#include "bench/ops_bench.h"
#include "bench/torch_dtype.h"

namespace ferry::bench {
namespace {

torch::Tensor randn_in(std::vector<int64_t> sizes, ScalarType dtype, bool channels_last = false) {
  torch::Tensor x = torch::randn(sizes).to(torch_dtype(dtype));
  return channels_last ? x.contiguous(torch::MemoryFormat::ChannelsLast) : x;
}

}  // namespace

const char* set_torch_ops_threads(int n) {
  torch::set_num_threads(n);
  // Debian's PyTorch runs float32 GEMMs on OpenBLAS (pthreads), whose threads
  // torch::set_num_threads does not set: without this, PyTorch's "1 thread" matmul runs on every
  // core.
  using SetThreads = void (*)(int);
  if (auto* set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(n);
    return "OpenBLAS threads set to match";
  }
  return "no OpenBLAS found to set threads of";
}

Op make_torch_ops_op(const OpSpec& s) {
  const std::vector<int64_t>& d = s.dims;
  switch (s.kind) {
    case OpKind::Matmul: {
      const torch::Tensor a = randn_in({d[0], d[1]}, s.dtype), b = randn_in({d[1], d[2]}, s.dtype);
      return [a, b] { (void)torch::matmul(a, b); };
    }
    case OpKind::Linear: {
      const torch::Tensor x = randn_in({d[0], d[1], d[2]}, s.dtype);
      const torch::Tensor w = randn_in({d[3], d[2]}, s.dtype), b = randn_in({d[3]}, s.dtype);
      return [x, w, b] { (void)torch::linear(x, w, b); };
    }
    case OpKind::Conv: {
      const torch::Tensor x = randn_in({d[0], d[1], d[2], d[3]}, s.dtype, s.channels_last);
      const torch::Tensor w = randn_in({d[4], d[1], d[5], d[5]}, s.dtype, s.channels_last);
      const int64_t stride = d[6], pad = d[7];
      return [x, w, stride, pad] { (void)torch::conv2d(x, w, {}, stride, pad); };
    }
    case OpKind::Add:
    case OpKind::AddGrad: {
      torch::Tensor a = randn_in({1}, s.dtype), b = randn_in({1}, s.dtype);
      if (s.kind == OpKind::AddGrad) a.requires_grad_();
      const int calls = s.calls;
      return [a, b, calls] {
        for (int i = 0; i < calls; ++i) {
          const torch::Tensor c = a + b;
          if (c.data_ptr() == nullptr) std::abort();
        }
      };
    }
    case OpKind::MlpStep: {
      const int64_t batch = d[0], width = d[1], layers = d[2];
      std::vector<torch::Tensor> params;
      for (int64_t l = 0; l < layers; ++l) {
        params.push_back(randn_in({width, width}, s.dtype).mul(0.03).requires_grad_());
        params.push_back(torch::zeros({width}).requires_grad_());
      }
      const torch::Tensor x = randn_in({batch, width}, s.dtype);
      const torch::Tensor y = randn_in({batch, width}, s.dtype);
      return [params, x, y, layers] {
        torch::Tensor h = x;
        for (int64_t l = 0; l < layers; ++l) {
          h = torch::linear(h, params[2 * l], params[2 * l + 1]);
          if (l + 1 < layers) h = torch::relu(h);
        }
        torch::mse_loss(h, y).backward();
        torch::NoGradGuard no_grad;
        for (const torch::Tensor& p : params) {
          torch::Tensor q = p;
          q.sub_(p.grad(), 0.01);
          q.mutable_grad() = torch::Tensor();
        }
      };
    }
  }
  return nullptr;
}

}  // namespace ferry::bench
