// Reading a case's parameters (Call) and calling an operator through the dispatcher's boxed path
// with its arguments matched by name against the schema (boxed()): how the comparison reaches
// operators whose typed front-ends this build does not have yet.
#include <cstdlib>
#include <set>
#include <utility>

#include "ferry/dispatch/dispatcher.h"
#include "tests/reference/op_table.h"

namespace ferry::reference {
namespace {

using nlohmann::json;

Scalar scalar_of(const json& v, const std::string& name) {
  if (v.is_boolean()) return Scalar(v.get<bool>());
  if (v.is_number_integer()) return Scalar(v.get<int64_t>());
  if (v.is_number()) return Scalar(v.get<double>());
  throw CaseError("parameter '" + name + "' is not a number: " + v.dump());
}

// PyTorch's Reduction enum (aten/src/ATen/core/Reduction.h).
int64_t reduction_of(const std::string& s) {
  if (s == "none") return 0;
  if (s == "mean") return 1;
  if (s == "sum") return 2;
  throw CaseError("unknown reduction '" + s + "'");
}

// The list length of "int[2]" (0 for "int[]").
size_t fixed_length(const SchemaType& type) {
  const size_t open = type.suffix.find('[');
  if (open == std::string::npos || type.suffix[open + 1] == ']') return 0;
  return static_cast<size_t>(std::strtoul(type.suffix.c_str() + open + 1, nullptr, 10));
}

// A JSON value (from the case, or from a schema default parsed to JSON) as the IValue the
// schema's type wants.
IValue ivalue_of(const json& v, const SchemaArgument& arg) {
  const SchemaType& type = arg.type;
  const std::string base = type.base == "SymInt" ? "int" : type.base;
  if (v.is_null()) {
    if (!type.is_optional()) throw CaseError("argument '" + arg.name + "' is not optional");
    return IValue();
  }
  if (type.is_list()) {
    if (base != "int") throw CaseError("argument '" + arg.name + "': unsupported list type");
    std::vector<int64_t> list;
    if (v.is_number_integer()) {
      list.assign(std::max<size_t>(fixed_length(type), 1), v.get<int64_t>());
    } else {
      for (const json& x : v) list.push_back(x.get<int64_t>());
    }
    return IValue(std::move(list));
  }
  if (base == "int") {
    if (v.is_string()) return IValue(reduction_of(v.get<std::string>()));
    return IValue(v.get<int64_t>());
  }
  if (base == "float") return IValue(v.get<double>());
  if (base == "bool") return IValue(v.get<bool>());
  if (base == "Scalar") return IValue(scalar_of(v, arg.name));
  if (base == "str") return IValue(v.get<std::string>());
  if (base == "ScalarType") return IValue(parse_scalar_type(v.get<std::string>()));
  throw CaseError("argument '" + arg.name +
                  "' has a type the reference cases do not fill: " + type.str());
}

// A schema default as written ("None", "True", "Mean", "[]", "1e-05", "'none'") as JSON.
json default_of(const std::string& text) {
  if (text == "None") return nullptr;
  if (text == "True") return true;
  if (text == "False") return false;
  if (text == "Mean") return "mean";
  if (text == "Sum") return "sum";
  if (text.size() >= 2 && (text.front() == '\'' || text.front() == '"'))
    return text.substr(1, text.size() - 2);
  const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) throw CaseError("cannot read the schema default '" + text + "'");
  return parsed;
}

std::vector<Tensor> call_boxed(const std::string& name, const json& defaults, const Call& c) {
  const std::optional<OperatorHandle> op = Dispatcher::singleton().try_find(name);
  if (!op) throw CaseError(name + " is not registered");
  const FunctionSchema& schema = op->schema();
  Stack stack;
  std::set<std::string> used;
  for (const SchemaArgument& arg : schema.arguments) {
    const bool is_list = arg.type.is_list() && arg.type.base == "Tensor";
    if (arg.type.base == "Tensor" && !is_list) {
      bool found = false;
      for (size_t i = 0; i < c.size(); ++i) {
        if (c.names()[i] != arg.name) continue;
        stack.emplace_back(c.t(i).defined() || !arg.type.is_optional() ? IValue(c.t(i)) : IValue());
        found = true;
      }
      if (!found) {
        if (!arg.default_value) throw CaseError("the case has no input '" + arg.name + "'");
        stack.emplace_back(ivalue_of(default_of(*arg.default_value), arg));
      }
      used.insert(arg.name);
      continue;
    }
    if (is_list) {
      std::vector<Tensor> list;
      for (size_t i = 0; i < c.size(); ++i) {
        if (c.names()[i] == arg.name) list.push_back(c.t(i));
      }
      stack.emplace_back(std::move(list));
      used.insert(arg.name);
      continue;
    }
    if (c.params().contains(arg.name)) {
      stack.push_back(ivalue_of(c.params()[arg.name], arg));
    } else if (defaults.contains(arg.name)) {
      stack.push_back(ivalue_of(defaults[arg.name], arg));
    } else if (arg.default_value) {
      stack.push_back(ivalue_of(default_of(*arg.default_value), arg));
    } else {
      throw CaseError("the case gives no '" + arg.name + "' for " + schema.str());
    }
    used.insert(arg.name);
  }
  for (const std::string& n : c.names()) {
    if (!used.count(n)) throw CaseError("input '" + n + "' is no argument of " + schema.str());
  }
  for (const auto& [key, value] : c.params().items()) {
    if (!used.count(key))
      throw CaseError("parameter '" + key + "' is no argument of " + schema.str());
  }
  op->call_boxed(&stack);
  std::vector<Tensor> outs;
  for (const IValue& v : stack) {
    if (v.is_tensor()) outs.push_back(v.to_tensor());
    if (v.is_tensor_list()) {
      for (const Tensor& t : v.to_tensor_list()) outs.push_back(t);
    }
  }
  return outs;
}

}  // namespace

const Tensor& Call::t(size_t i) const {
  if (i >= inputs_.size()) throw CaseError("the case has no input " + std::to_string(i));
  return inputs_[i];
}

bool Call::has(const std::string& name) const {
  return params_.contains(name) && !params_[name].is_null();
}

const json& Call::param(const std::string& name) const {
  if (!params_.contains(name)) throw CaseError("the case has no parameter '" + name + "'");
  return params_[name];
}

Scalar Call::scalar(const std::string& name, std::optional<Scalar> fallback) const {
  if (!has(name) && fallback) return *fallback;
  return scalar_of(param(name), name);
}

int64_t Call::i64(const std::string& name, std::optional<int64_t> fallback) const {
  if (!has(name) && fallback) return *fallback;
  return param(name).get<int64_t>();
}

std::optional<int64_t> Call::opt_i64(const std::string& name) const {
  if (!has(name)) return std::nullopt;
  return params_[name].get<int64_t>();
}

double Call::f64(const std::string& name, std::optional<double> fallback) const {
  if (!has(name) && fallback) return *fallback;
  return param(name).get<double>();
}

bool Call::flag(const std::string& name, std::optional<bool> fallback) const {
  if (!has(name) && fallback) return *fallback;
  return param(name).get<bool>();
}

std::vector<int64_t> Call::ints(const std::string& name,
                                std::optional<std::vector<int64_t>> fallback) const {
  if (!has(name) && fallback) return *fallback;
  return param(name).get<std::vector<int64_t>>();
}

std::string Call::str(const std::string& name, std::optional<std::string> fallback) const {
  if (!has(name) && fallback) return *fallback;
  return param(name).get<std::string>();
}

std::optional<ScalarType> Call::dtype(const std::string& name) const {
  if (!has(name)) return std::nullopt;
  return parse_scalar_type(params_[name].get<std::string>());
}

OpEntry boxed(std::string ferry_op, json defaults) {
  OpEntry entry;
  entry.ferry_op = ferry_op;
  entry.fn = [name = std::move(ferry_op), defaults = std::move(defaults)](const Call& c) {
    return call_boxed(name, defaults, c);
  };
  return entry;
}

}  // namespace ferry::reference
