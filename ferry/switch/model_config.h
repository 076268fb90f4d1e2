// models.toml, the list of models a server offers: one [models.NAME] table each, with an `arch`
// from the model zoo and optional `weights` (a safetensors file, relative to the TOML file's
// directory; without it the model is initialized from `seed`). Parsing checks every key and type
// and raises ConfigError naming the file, the model, what was expected and what was found;
// unknown keys are errors (a typo must not silently fall back to a default).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/nn/models/bert.h"

namespace ferry::switch_ {

class ConfigError : public Error {
 public:
  using Error::Error;
};

struct ModelConfig {
  std::string name;
  // "mlp", "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "bert-base" or "bert"
  // (BERT with the bert_* keys below; bert-base ignores them).
  std::string arch;
  std::string weights;  // absolute after parsing; empty: random init from `seed`
  uint64_t seed = 0;
  // mlp: in_features -> hidden... -> out_features.
  int64_t in_features = 0;
  std::vector<int64_t> hidden;
  int64_t out_features = 0;
  std::string activation = "relu";
  // resnet
  int64_t num_classes = 1000;
  // bert
  nn::models::BertConfig bert;
};

struct ServeConfig {
  std::vector<ModelConfig> models;  // by name (toml++ keeps tables sorted)
};

// The architectures `arch` may name.
const std::vector<std::string>& known_archs();

ServeConfig parse_models_toml_file(const std::string& path);
// `base_dir` resolves relative weights paths; `source` names the text in errors.
ServeConfig parse_models_toml(std::string_view text, const std::string& base_dir,
                              const std::string& source = "models.toml");

// `config` as models.toml text that parse_models_toml reads back to the same models (weights paths
// only when `with_weights`; a seed above INT64_MAX is left out). How a controller hands its
// configuration to worker processes, which take their weights from shared memory instead.
std::string to_models_toml(const ServeConfig& config, bool with_weights = true);

}  // namespace ferry::switch_
