// Parameter initialization for the nn layers and models: torch.nn.init's schemes (uniform,
// normal, constant, Kaiming, Xavier) filling tensors in place without recording gradients, drawn
// from a seeded ferry::Generator. InitSeed makes every layer built on this thread while it lives
// draw from one generator, so a model built under the same seed has the same weights, bit for bit.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "ferry/core/generator.h"
#include "ferry/core/tensor.h"

namespace ferry::nn::init {

// While alive, layers built on this thread draw their initial values from Generator(seed)
// (nestable; the previous generator comes back when it ends). Without one, the default generator.
class InitSeed {
 public:
  explicit InitSeed(uint64_t seed);
  InitSeed(const InitSeed&) = delete;
  InitSeed& operator=(const InitSeed&) = delete;
  ~InitSeed();

 private:
  Generator generator_;
  Generator* previous_;
};

// While alive, the random schemes on this thread (uniform_, normal_, and Kaiming and Xavier
// through them) leave the tensor as it was allocated (its values undefined) and draw nothing from
// the generator: for building a module whose every parameter is about to be overwritten (loaded
// strictly from a file, or laid over another process's image), where drawing is most of the
// build's time (a ResNet-18: 0.6 s of a 0.61 s load). Constant schemes (zeros_, ones_,
// constant_) still fill. Nestable. PyTorch's torch.nn.utils.skip_init does the same.
class SkipRandomInit {
 public:
  SkipRandomInit();
  SkipRandomInit(const SkipRandomInit&) = delete;
  SkipRandomInit& operator=(const SkipRandomInit&) = delete;
  ~SkipRandomInit();

 private:
  bool previous_;
};

// The generator layers draw from now (nullptr: the default generator).
Generator* current_generator();

// fan_in and fan_out of a weight: [out, in, k...] -> (in * prod(k), out * prod(k)); at least
// 2 dims (ferry::Error naming the given shape otherwise).
std::pair<int64_t, int64_t> fans(const Tensor& tensor);
// torch.nn.init.calculate_gain for "linear", "conv2d", "sigmoid", "tanh", "relu", "leaky_relu"
// (with param as the negative slope, default 0.01).
double calculate_gain(std::string_view nonlinearity, std::optional<double> param = std::nullopt);

// In place, no gradient recorded; each returns `tensor`.
Tensor& uniform_(Tensor& tensor, double low = 0.0, double high = 1.0);
Tensor& normal_(Tensor& tensor, double mean = 0.0, double std = 1.0);
Tensor& constant_(Tensor& tensor, double value);
Tensor& zeros_(Tensor& tensor);
Tensor& ones_(Tensor& tensor);
// mode "fan_in" or "fan_out"; gain = calculate_gain(nonlinearity, a).
Tensor& kaiming_uniform_(Tensor& tensor, double a = 0.0, std::string_view mode = "fan_in",
                         std::string_view nonlinearity = "leaky_relu");
Tensor& kaiming_normal_(Tensor& tensor, double a = 0.0, std::string_view mode = "fan_in",
                        std::string_view nonlinearity = "leaky_relu");
Tensor& xavier_uniform_(Tensor& tensor, double gain = 1.0);

}  // namespace ferry::nn::init
