// fork, join and the phony tensor (see dependency.h).
#include "ferry/pipeline/dependency.h"

#include "ferry/autograd/grad_mode.h"
#include "ferry/ops/factories.h"
#include "ferry/pipeline/function.h"

namespace ferry::pipeline {

Tensor get_phony(Device device, bool requires_grad) {
  Tensor phony = empty({0}, TensorOptions(kFloat32).device(device));
  if (requires_grad) phony.requires_grad_(true);
  return phony;
}

std::pair<Tensor, Tensor> fork(const Tensor& input) {
  if (!autograd::GradMode::is_enabled() || !input.requires_grad()) {
    return {input, get_phony(input.device(), false)};
  }
  variable_list out{input.detach(), get_phony(input.device(), false)};
  record_function("ferry::pipeline::ForkBackward", {input}, out,
                  [](variable_list grads) { return variable_list{grads[0]}; });
  return {out[0], out[1]};
}

Tensor join(const Tensor& input, const Tensor& phony) {
  if (!autograd::GradMode::is_enabled() || !(input.requires_grad() || phony.requires_grad())) {
    return input;
  }
  variable_list out{input.detach()};
  record_function("ferry::pipeline::JoinBackward", {input, phony}, out, [](variable_list grads) {
    return variable_list{grads[0], Tensor()};
  });
  return out[0];
}

void depend(autograd::variable_list& fork_from, autograd::variable_list& join_to,
            const std::optional<AbstractStream>& fork_on,
            const std::optional<AbstractStream>& join_on) {
  Tensor phony;
  {
    std::optional<use_stream> on;
    if (fork_on) on.emplace(*fork_on);
    std::tie(fork_from[0], phony) = fork(fork_from[0]);
  }
  std::optional<use_stream> on;
  if (join_on) on.emplace(*join_on);
  join_to[0] = join(join_to[0], phony);
}

}  // namespace ferry::pipeline
