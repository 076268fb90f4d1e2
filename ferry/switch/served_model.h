// A model as `ferry serve` holds it: built once from its ModelConfig through the model zoo
// (make_zoo_model), its weights loaded (or seeded) and then moved into one pinned ModelImage, so
// the host keeps exactly one copy and the model can be switched onto any device group by group.
// It states the inputs it accepts (names, dtypes, shapes with free dimensions) and checks a
// request's tensors against them before anything runs, so a wrong input is a
// SwitchError(bad_input) naming what was expected and what was given, never a crash.
//
// A run goes through the model's switch layers: begin_run turns the request's inputs into the
// first layer's input (for BERT it also hands the mask and token types to the layers), the layers
// run (resident, or behind a pipelined switch_in), and end_run names the outputs. Running the
// layers gives the model's own forward() bit for bit, so a switched model answers exactly what
// the resident one does. One run at a time per model: the caller serializes them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/nn/module.h"
#include "ferry/switch/model_config.h"
#include "ferry/switch/model_image.h"
#include "ferry/switch/types.h"
#include "ferry/switch/zoo_model.h"

namespace ferry::switch_ {

struct InputSpec {
  std::string name;
  ScalarType dtype;
  std::vector<int64_t> shape;  // -1: any size
  bool optional = false;
};

class ServedModel {
 public:
  // Builds `config`'s model on the CPU, loads its weights (strict) or seeds it, sets eval mode
  // and moves the weights into a pinned image. `example_shape` is the shape of example_input
  // (used to profile the model for the planner). Raises ConfigError or the loader's error.
  explicit ServedModel(const ModelConfig& config, ZooInputShape example_shape = {});
  // The same model whose weights are the bytes of `image_bytes` (uint8, pinned or registered
  // host memory: another process's image of this configuration, see ModelImage::adopt): the
  // weights file is not read and the host holds no copy of its own. Raises as above, or
  // ferry::Error when the bytes are laid out for another model.
  ServedModel(const ModelConfig& config, ZooInputShape example_shape, const Tensor& image_bytes,
              uint64_t image_fingerprint);

  // Where an image's bytes may come from instead of the weights file: given the layout the
  // model needs, it returns uint8 [layout.nbytes] of pinned host memory holding the weights in
  // that layout, or an undefined tensor when it has none (the weights file or seed is used).
  using ImageSource = std::function<Tensor(const ModelImage::Layout& layout)>;
  // The model built, then its image taken from `source` if it has one, else loaded as the first
  // constructor does. Raises as above, or ferry::Error when the bytes do not fit the layout.
  ServedModel(const ModelConfig& config, ZooInputShape example_shape, const ImageSource& source);

  const std::string& name() const { return name_; }
  const std::string& arch() const { return zoo_.arch; }
  const std::vector<InputSpec>& inputs() const { return inputs_; }
  nn::Module& module() { return *zoo_.module; }
  const std::vector<SwitchLayer>& layers() const { return zoo_.layers; }
  const ModelImage& image() const { return *image_; }
  ModelImage& image() { return *image_; }
  // Bytes of device memory the model's weights take when resident (its image).
  size_t weight_bytes() const { return image_->nbytes(); }
  // A random input for the first layer, of the example shape, on `device`.
  Tensor example_input(Device device, uint64_t seed = 0) const {
    return zoo_.example_input(device, seed);
  }

  // The request's inputs in inputs()'s order (absent optional inputs undefined). A model with one
  // input takes a single tensor whatever its name. Raises SwitchError(bad_input).
  std::vector<Tensor> match_inputs(const std::vector<NamedTensor>& given) const;
  // Checks on values (BERT: sequence length, token-id ranges); inputs are still on the host.
  void check_values(const std::vector<Tensor>& inputs) const;

  // From match_inputs' tensors, moved to the device the weights are on: the first layer's input.
  Tensor begin_run(const std::vector<Tensor>& device_inputs);
  // The named outputs, from the last layer's output; forgets the run's state.
  std::vector<NamedTensor> end_run(const Tensor& output);
  // begin_run, every layer in order with the weights where they are, end_run.
  std::vector<NamedTensor> run(const std::vector<Tensor>& device_inputs);

 private:
  // Builds the zoo model (eval mode) and the input specs; without `random_init` its random
  // weights are left undefined (nn::init::SkipRandomInit), for a caller that overwrites every
  // one of them.
  void build(const ModelConfig& config, ZooInputShape example_shape, bool random_init);

  std::string name_;
  ZooModel zoo_;
  std::vector<InputSpec> inputs_;
  std::unique_ptr<ModelImage> image_;
};

// How a serving handler gets each configured model (e.g. fetching its weights from another
// host, weight_share.h); unset, it constructs ServedModel(config, example_shape).
using ModelLoader =
    std::function<std::unique_ptr<ServedModel>(const ModelConfig& config, ZooInputShape shape)>;

}  // namespace ferry::switch_
