// models.toml parsing with toml++ (model_config.h).
#include "ferry/switch/model_config.h"

#include <toml++/toml.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace ferry::switch_ {
namespace {

[[noreturn]] void bad(const std::string& source, const std::string& message) {
  throw ConfigError(source + ": " + message);
}

class ModelTable {
 public:
  ModelTable(const toml::table& table, std::string source, std::string model)
      : table_(table), source_(std::move(source)), model_(std::move(model)) {}

  template <typename T>
  bool get(const char* key, T& out) {
    used_.push_back(key);
    const toml::node* node = table_.get(key);
    if (node == nullptr) return false;
    if constexpr (std::is_same_v<T, std::string>) {
      if (auto v = node->value_exact<std::string>()) {
        out = *v;
        return true;
      }
      fail(key, "a string", *node);
    } else if constexpr (std::is_same_v<T, double>) {
      if (auto v = node->value<double>()) {
        out = *v;
        return true;
      }
      fail(key, "a number", *node);
    } else if constexpr (std::is_same_v<T, bool>) {
      if (auto v = node->value_exact<bool>()) {
        out = *v;
        return true;
      }
      fail(key, "true or false", *node);
    } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
      const toml::array* array = node->as_array();
      if (array == nullptr) fail(key, "an array of positive integers", *node);
      out.clear();
      for (const toml::node& element : *array) {
        auto v = element.value_exact<int64_t>();
        if (!v || *v <= 0) fail(key, "an array of positive integers", *node);
        out.push_back(*v);
      }
      return true;
    } else {
      auto v = node->value_exact<int64_t>();
      if (!v || *v < 0) fail(key, "a non-negative integer", *node);
      out = static_cast<T>(*v);
      return true;
    }
  }

  void positive(const char* key, int64_t value) {
    if (value <= 0) {
      bad(source_, detail::str_cat("model '", model_, "': expected a positive `", key,
                                   "`, but got ", value));
    }
  }

  void require(const char* key, bool present, const char* what) {
    if (!present) {
      bad(source_, detail::str_cat("model '", model_, "': expected `", key, "` (", what,
                                   "), but it is missing"));
    }
  }

  // Every key of the table must have been asked for.
  void no_unknown_keys() const {
    for (auto&& [key, value] : table_) {
      if (std::find(used_.begin(), used_.end(), key.str()) == used_.end()) {
        std::string known;
        for (const auto& k : used_) known += (known.empty() ? "" : ", ") + k;
        bad(source_, detail::str_cat("model '", model_, "': unknown key `", key.str(),
                                     "` (expected one of: ", known, ")"));
      }
    }
  }

 private:
  [[noreturn]] void fail(const char* key, const char* expected, const toml::node& node) const {
    std::ostringstream found;
    found << node.type();
    bad(source_,
        detail::str_cat("model '", model_, "': expected `", key, "` to be ", expected,
                        ", but it is ", found.str(), " (line ", node.source().begin.line, ")"));
  }

  const toml::table& table_;
  std::string source_, model_;
  std::vector<std::string> used_;
};

ModelConfig parse_model(const std::string& name, const toml::table& t, const std::string& base_dir,
                        const std::string& source) {
  ModelConfig m;
  m.name = name;
  ModelTable table(t, source, name);
  table.require("arch", table.get("arch", m.arch), "one of the model zoo's architectures");
  const auto& archs = known_archs();
  if (std::find(archs.begin(), archs.end(), m.arch) == archs.end()) {
    std::string list;
    for (const auto& a : archs) list += (list.empty() ? "" : ", ") + a;
    bad(source, detail::str_cat("model '", name, "': expected `arch` to be one of ", list,
                                ", but got \"", m.arch, "\""));
  }
  if (table.get("weights", m.weights) && !m.weights.empty()) {
    std::filesystem::path p(m.weights);
    if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
    m.weights = p.lexically_normal().string();
  }
  table.get("seed", m.seed);
  if (m.arch == "mlp") {
    table.require("in_features", table.get("in_features", m.in_features), "a positive integer");
    table.require("out_features", table.get("out_features", m.out_features), "a positive integer");
    table.positive("in_features", m.in_features);
    table.positive("out_features", m.out_features);
    table.get("hidden", m.hidden);
    if (table.get("activation", m.activation) && m.activation != "relu" && m.activation != "gelu") {
      bad(source, detail::str_cat("model '", name,
                                  "': expected `activation` \"relu\" or \"gelu\", but got \"",
                                  m.activation, "\""));
    }
  } else if (m.arch.rfind("resnet", 0) == 0) {
    if (table.get("num_classes", m.num_classes)) table.positive("num_classes", m.num_classes);
  } else if (m.arch == "bert") {
    auto& b = m.bert;
    table.get("vocab_size", b.vocab_size);
    table.get("hidden_size", b.hidden_size);
    table.get("num_hidden_layers", b.num_hidden_layers);
    table.get("num_attention_heads", b.num_attention_heads);
    table.get("intermediate_size", b.intermediate_size);
    table.get("max_position_embeddings", b.max_position_embeddings);
    table.get("type_vocab_size", b.type_vocab_size);
    table.get("add_pooling_layer", b.add_pooling_layer);
    for (auto [key, value] :
         {std::pair{"vocab_size", b.vocab_size}, std::pair{"hidden_size", b.hidden_size},
          std::pair{"num_attention_heads", b.num_attention_heads},
          std::pair{"intermediate_size", b.intermediate_size},
          std::pair{"max_position_embeddings", b.max_position_embeddings},
          std::pair{"type_vocab_size", b.type_vocab_size}}) {
      table.positive(key, value);
    }
    if (b.hidden_size % b.num_attention_heads != 0) {
      bad(source, detail::str_cat("model '", name, "': expected hidden_size (", b.hidden_size,
                                  ") to be a multiple of num_attention_heads (",
                                  b.num_attention_heads, ")"));
    }
  }
  m.bert.seed = m.seed;
  table.no_unknown_keys();
  return m;
}

}  // namespace

const std::vector<std::string>& known_archs() {
  static const std::vector<std::string> archs = {"mlp",       "resnet18",  "resnet34",  "resnet50",
                                                 "resnet101", "resnet152", "bert-base", "bert"};
  return archs;
}

ServeConfig parse_models_toml(std::string_view text, const std::string& base_dir,
                              const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream where;
    where << e.source().begin;
    bad(source, detail::str_cat("not valid TOML at ", where.str(), ": ", e.description()));
  }
  ServeConfig config;
  const toml::node* models = root.get("models");
  if (models == nullptr || !models->is_table() || models->as_table()->empty()) {
    bad(source, "expected at least one [models.NAME] table, but found none");
  }
  for (auto&& [key, value] : root) {
    if (key.str() != "models") {
      bad(source, detail::str_cat("unknown top-level key `", key.str(),
                                  "` (expected only [models.NAME] tables)"));
    }
  }
  for (auto&& [name, value] : *models->as_table()) {
    const toml::table* t = value.as_table();
    if (t == nullptr) {
      bad(source, detail::str_cat("expected [models.", name.str(), "] to be a table"));
    }
    config.models.push_back(parse_model(std::string(name.str()), *t, base_dir, source));
  }
  return config;
}

ServeConfig parse_models_toml_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(detail::str_cat("could not open the models file \"", path, "\""));
  std::stringstream text;
  text << in.rdbuf();
  const std::string dir = std::filesystem::absolute(path).parent_path().string();
  return parse_models_toml(text.str(), dir, path);
}

std::string to_models_toml(const ServeConfig& config, bool with_weights) {
  toml::table models;
  for (const ModelConfig& m : config.models) {
    toml::table t;
    t.insert("arch", m.arch);
    if (with_weights && !m.weights.empty()) t.insert("weights", m.weights);
    if (m.seed <= static_cast<uint64_t>(INT64_MAX)) t.insert("seed", static_cast<int64_t>(m.seed));
    if (m.arch == "mlp") {
      t.insert("in_features", m.in_features);
      t.insert("out_features", m.out_features);
      toml::array hidden;
      for (int64_t h : m.hidden) hidden.push_back(h);
      t.insert("hidden", std::move(hidden));
      t.insert("activation", m.activation);
    } else if (m.arch.rfind("resnet", 0) == 0) {
      t.insert("num_classes", m.num_classes);
    } else if (m.arch == "bert") {
      const nn::models::BertConfig& b = m.bert;
      t.insert("vocab_size", b.vocab_size);
      t.insert("hidden_size", b.hidden_size);
      t.insert("num_hidden_layers", b.num_hidden_layers);
      t.insert("num_attention_heads", b.num_attention_heads);
      t.insert("intermediate_size", b.intermediate_size);
      t.insert("max_position_embeddings", b.max_position_embeddings);
      t.insert("type_vocab_size", b.type_vocab_size);
      t.insert("add_pooling_layer", b.add_pooling_layer);
    }
    models.insert(m.name, std::move(t));
  }
  toml::table root;
  root.insert("models", std::move(models));
  std::ostringstream out;
  out << root;
  return out.str();
}

}  // namespace ferry::switch_
