// A model-zoo model as the local handler serves it: built from a ModelConfig, its weights loaded,
// on one device, in eval mode. It states the inputs it accepts (names, dtypes, shapes with free
// dimensions) and checks a request's tensors against them before running, so a wrong input is a
// SwitchError(bad_input) naming what was expected and what was given, never a crash.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/nn/module.h"
#include "ferry/switch/model_config.h"
#include "ferry/switch/types.h"

namespace ferry::switch_ {

struct InputSpec {
  std::string name;
  ScalarType dtype;
  std::vector<int64_t> shape;  // -1: any size
  bool optional = false;
};

class ServedModel;
std::unique_ptr<ServedModel> build_served_model(const ModelConfig& config, Device device);

class ServedModel {
 public:
  virtual ~ServedModel() = default;
  const std::vector<InputSpec>& inputs() const { return inputs_; }
  nn::Module& module() { return *module_; }
  Device device() const { return device_; }

  // The request's inputs in inputs()'s order (absent optional inputs undefined). A model with one
  // input takes a single tensor whatever its name. Raises SwitchError(bad_input).
  std::vector<Tensor> match_inputs(const std::string& model_name,
                                   const std::vector<NamedTensor>& given) const;
  // Runs the model on inputs already on device() (from match_inputs, moved), under no-grad.
  virtual std::vector<NamedTensor> run(const std::vector<Tensor>& inputs) = 0;
  // Extra checks on values (token ids in range); inputs are still on the host.
  virtual void check_values(const std::string& /*model_name*/,
                            const std::vector<Tensor>& /*inputs*/) const {}

 protected:
  friend std::unique_ptr<ServedModel> build_served_model(const ModelConfig&, Device);
  std::vector<InputSpec> inputs_;
  std::shared_ptr<nn::Module> module_;
  Device device_;
};

// Builds `config`'s model, loads its weights (or seeds it), moves it to `device`, sets eval mode.
// Raises ConfigError or the loader's error (naming the file) when that fails.
std::unique_ptr<ServedModel> build_served_model(const ModelConfig& config, Device device);

}  // namespace ferry::switch_
