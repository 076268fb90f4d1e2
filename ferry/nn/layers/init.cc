// torch.nn.init's schemes on ferry tensors: values drawn on the host in float64 from the current
// init generator (so every device gets the same values for a seed), then copied into the tensor.
#include "ferry/nn/layers/init.h"

#include <cmath>
#include <string>

#include "ferry/autograd/grad_mode.h"
#include "ferry/core/error.h"
#include "ferry/ops/factories.h"

namespace ferry::nn::init {
namespace {

thread_local Generator* tls_generator = nullptr;
thread_local bool tls_skip_random = false;

// Copies host values (drawn in float64) into tensor, keeping its dtype, device and layout.
Tensor& assign(Tensor& tensor, const Tensor& values) {
  NoGradGuard no_grad;
  tensor.copy_(values);
  return tensor;
}

}  // namespace

InitSeed::InitSeed(uint64_t seed) : generator_(seed), previous_(tls_generator) {
  tls_generator = &generator_;
}
InitSeed::~InitSeed() { tls_generator = previous_; }

Generator* current_generator() { return tls_generator; }

SkipRandomInit::SkipRandomInit() : previous_(tls_skip_random) { tls_skip_random = true; }
SkipRandomInit::~SkipRandomInit() { tls_skip_random = previous_; }

std::pair<int64_t, int64_t> fans(const Tensor& tensor) {
  FERRY_CHECK(tensor.dim() >= 2,
              "Fan in and fan out can not be computed for a tensor with fewer than 2 dimensions "
              "(expected at least 2, given ",
              tensor.dim(), ")");
  int64_t receptive = 1;
  for (int64_t d = 2; d < tensor.dim(); ++d) receptive *= tensor.size(d);
  return {tensor.size(1) * receptive, tensor.size(0) * receptive};
}

double calculate_gain(std::string_view nonlinearity, std::optional<double> param) {
  if (nonlinearity == "linear" || nonlinearity == "conv2d" || nonlinearity == "sigmoid") return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    const double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1.0 + slope * slope));
  }
  FERRY_CHECK(false,
              "calculate_gain: expected one of linear, conv2d, sigmoid, tanh, relu, "
              "leaky_relu; given '",
              std::string(nonlinearity), "'");
  return 1.0;
}

Tensor& uniform_(Tensor& tensor, double low, double high) {
  if (tls_skip_random) return tensor;
  Tensor u = rand(tensor.sizes(), TensorOptions().dtype(kFloat64), current_generator());
  return assign(tensor, u.mul(high - low).add(low));
}

Tensor& normal_(Tensor& tensor, double mean, double std) {
  if (tls_skip_random) return tensor;
  Tensor n = randn(tensor.sizes(), TensorOptions().dtype(kFloat64), current_generator());
  return assign(tensor, n.mul(std).add(mean));
}

Tensor& constant_(Tensor& tensor, double value) {
  NoGradGuard no_grad;
  tensor.fill_(value);
  return tensor;
}
Tensor& zeros_(Tensor& tensor) { return constant_(tensor, 0.0); }
Tensor& ones_(Tensor& tensor) { return constant_(tensor, 1.0); }

namespace {
double kaiming_std(const Tensor& tensor, double a, std::string_view mode,
                   std::string_view nonlinearity) {
  FERRY_CHECK(mode == "fan_in" || mode == "fan_out",
              "kaiming init: expected mode fan_in or fan_out, given '", std::string(mode), "'");
  const auto [fan_in, fan_out] = fans(tensor);
  const double fan = static_cast<double>(mode == "fan_in" ? fan_in : fan_out);
  return calculate_gain(nonlinearity, a) / std::sqrt(fan);
}
}  // namespace

Tensor& kaiming_uniform_(Tensor& tensor, double a, std::string_view mode,
                         std::string_view nonlinearity) {
  const double bound = std::sqrt(3.0) * kaiming_std(tensor, a, mode, nonlinearity);
  return uniform_(tensor, -bound, bound);
}

Tensor& kaiming_normal_(Tensor& tensor, double a, std::string_view mode,
                        std::string_view nonlinearity) {
  return normal_(tensor, 0.0, kaiming_std(tensor, a, mode, nonlinearity));
}

Tensor& xavier_uniform_(Tensor& tensor, double gain) {
  const auto [fan_in, fan_out] = fans(tensor);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform_(tensor, -bound, bound);
}

}  // namespace ferry::nn::init
