// gradcheck: full Jacobians, numerical (central differences on host copies) against analytical
// (one vector-Jacobian product per output element).
#include "ferry/autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "ferry/autograd/engine.h"
#include "ferry/autograd/grad_mode.h"
#include "ferry/ops/factories.h"

namespace ferry::autograd {
namespace {

// Every output as a flat float64 host tensor.
std::vector<Tensor> flat_outputs(const variable_list& outputs) {
  std::vector<Tensor> out;
  for (const Tensor& o : outputs) {
    out.push_back(o.detach().to(Device(DeviceType::CPU), kFloat64).contiguous().reshape({-1}));
  }
  return out;
}

double at(const Tensor& flat, int64_t i) { return flat.data_ptr<double>()[i]; }

}  // namespace

GradcheckResult gradcheck(const std::function<variable_list(const variable_list&)>& fn,
                          const variable_list& inputs, const GradcheckOptions& options) {
  GradcheckResult result;
  // Analytical: J^T e_k for every output element k.
  variable_list outputs = fn(inputs);
  std::vector<size_t> checked;
  variable_list diff_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined() && inputs[i].requires_grad()) {
      checked.push_back(i);
      diff_inputs.push_back(inputs[i]);
    }
  }
  if (checked.empty()) return result;
  // analytical[input][output][k] : a host float64 tensor of the input's numel.
  std::vector<std::vector<std::vector<Tensor>>> analytical(checked.size());
  for (auto& per_input : analytical) per_input.resize(outputs.size());
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (!outputs[o].requires_grad()) continue;
    const int64_t n = outputs[o].numel();
    for (int64_t k = 0; k < n; ++k) {
      Tensor seed = zeros({n}, TensorOptions(kFloat64));
      seed.data_ptr<double>()[k] = 1;
      const Tensor grad_out =
          seed.view(outputs[o].sizes()).to(outputs[o].device(), outputs[o].dtype());
      const variable_list grads = grad({outputs[o]}, diff_inputs, {grad_out},
                                       /*retain_graph=*/true, false, /*allow_unused=*/true);
      for (size_t i = 0; i < checked.size(); ++i) {
        const Tensor g = grads[i].defined()
                             ? grads[i].to(Device(DeviceType::CPU), kFloat64).contiguous()
                             : zeros(inputs[checked[i]].sizes(), TensorOptions(kFloat64));
        analytical[i][o].push_back(g.reshape({-1}));
      }
    }
  }
  // Numerical: perturb each element of each checked input.
  NoGradGuard no_grad;
  for (size_t i = 0; i < checked.size(); ++i) {
    const Tensor& x = inputs[checked[i]];
    const Tensor host = x.detach().to(Device(DeviceType::CPU), kFloat64).contiguous();
    for (int64_t e = 0; e < host.numel(); ++e) {
      auto evaluate = [&](double delta) {
        Tensor moved = host.clone();
        moved.data_ptr<double>()[e] += delta;
        variable_list perturbed = inputs;
        perturbed[checked[i]] = moved.view(x.sizes()).to(x.device(), x.dtype());
        return flat_outputs(fn(perturbed));
      };
      const std::vector<Tensor> plus = evaluate(options.eps);
      const std::vector<Tensor> minus = evaluate(-options.eps);
      for (size_t o = 0; o < outputs.size(); ++o) {
        if (!outputs[o].requires_grad()) continue;
        for (int64_t k = 0; k < plus[o].numel(); ++k) {
          const double numeric = (at(plus[o], k) - at(minus[o], k)) / (2 * options.eps);
          const double analytic = at(analytical[i][o][static_cast<size_t>(k)], e);
          if (std::abs(numeric - analytic) > options.atol + options.rtol * std::abs(numeric) ||
              std::isnan(analytic) != std::isnan(numeric)) {
            std::ostringstream msg;
            msg << "Jacobian mismatch for output " << o << " with respect to input " << checked[i]
                << ": d out[" << k << "] / d in[" << e << "] is " << analytic << " by autograd and "
                << numeric << " by finite differences";
            result.ok = false;
            result.message = msg.str();
            return result;
          }
        }
      }
    }
  }
  return result;
}

}  // namespace ferry::autograd
