// PyTorch's side of the copy benchmark (built with -DFERRY_BENCH_TORCH=ON): the same cases on
// libtorch tensors, timed in the same process by copy_bench.cc.
#include <torch/torch.h>
#include <torch/version.h>

#include <cstdlib>

#include "bench/copy_bench.h"
#include "bench/torch_dtype.h"

namespace ferry::bench {

Op make_torch_op(const Spec& s) {
  torch::NoGradGuard no_grad;
  const auto src_opts = torch::TensorOptions().dtype(torch_dtype(s.src_dtype));
  const auto dst_opts = torch::TensorOptions().dtype(torch_dtype(s.dst_dtype));
  auto random = [&](std::vector<int64_t> sizes) {
    return is_floating_point(s.src_dtype) || is_complex(s.src_dtype)
               ? torch::rand(sizes, src_opts)
               : torch::randint(0, 100, sizes, src_opts);
  };
  const std::vector<int64_t>& z = s.sizes;
  torch::Tensor src, dst;
  switch (s.layout) {
    case Layout::Contig:
      src = random(z);
      dst = torch::empty(z, dst_opts);
      break;
    case Layout::Transpose2D:
      src = random(z).t();
      dst = torch::empty(z, dst_opts);
      break;
    case Layout::ToChannelsLast:
      src = random(z);
      dst = torch::empty(z, dst_opts.memory_format(torch::MemoryFormat::ChannelsLast));
      break;
    case Layout::FromChannelsLast:
      src = random({z[0], z[2], z[3], z[1]}).permute({0, 3, 1, 2});
      dst = torch::empty(z, dst_opts);
      break;
    case Layout::Permute210:
      src = random(z).permute({2, 1, 0});
      dst = torch::empty(z, dst_opts);
      break;
    case Layout::Permute: {
      std::vector<int64_t> base(z.size());
      for (size_t d = 0; d < z.size(); ++d) base[static_cast<size_t>(s.perm[d])] = z[d];
      src = random(base).permute(s.perm);
      dst = torch::empty(z, dst_opts);
      break;
    }
    case Layout::ExpandCol:
      src = random({z[0], 1}).expand(z);
      dst = torch::empty(z, dst_opts);
      break;
    case Layout::SliceStep2:
      src = random({z[0], 2 * z[1]}).slice(1, 0, c10::nullopt, 2);
      dst = torch::empty(z, dst_opts);
      break;
    case Layout::PerCallCopy: {
      src = random(z);
      dst = torch::empty(z, dst_opts);
      const int calls = s.calls;
      return [src, dst, calls]() mutable {
        torch::NoGradGuard guard;
        for (int i = 0; i < calls; ++i) dst.copy_(src);
      };
    }
    case Layout::PerCallTo: {
      src = random(z);
      const int calls = s.calls;
      const auto to = torch_dtype(s.dst_dtype);
      return [src, calls, to]() {
        torch::NoGradGuard guard;
        for (int i = 0; i < calls; ++i) {
          torch::Tensor out = src.to(to);
          if (out.data_ptr() == nullptr) std::abort();
        }
      };
    }
  }
  return [src, dst]() mutable {
    torch::NoGradGuard guard;
    dst.copy_(src);
  };
}

void set_torch_threads(int n) { torch::set_num_threads(n); }

const char* torch_version() { return TORCH_VERSION; }

}  // namespace ferry::bench
