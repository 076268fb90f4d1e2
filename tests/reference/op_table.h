// The C++ side of the PyTorch comparison's case table: for every operator name the Python side
// registers (reference_ops.py), the ferry call that does the same. An entry names the dispatcher
// operator it needs (a case whose operator is not registered in this build is skipped with its
// name) and a function from the case's inputs and parameters to ferry's outputs.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ferry/core/tensor.h"

namespace ferry::reference {

// A case the C++ side cannot run as written (a missing parameter, an argument no schema has):
// a bug in the case table, never an expected ferry error.
class CaseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One call: the inputs as the op sees them (views on the device; undefined where the case passes
// None), their PyTorch argument names, and the parameters as the case's JSON. Parameter reads
// without a default raise CaseError when the case lacks them.
class Call {
 public:
  Call(std::vector<Tensor> inputs, std::vector<std::string> names, const nlohmann::json& params)
      : inputs_(std::move(inputs)), names_(std::move(names)), params_(params) {}

  const Tensor& t(size_t i) const;
  size_t size() const { return inputs_.size(); }
  const std::vector<Tensor>& inputs() const { return inputs_; }
  const std::vector<std::string>& names() const { return names_; }
  const nlohmann::json& params() const { return params_; }

  bool has(const std::string& name) const;
  Scalar scalar(const std::string& name, std::optional<Scalar> fallback = std::nullopt) const;
  int64_t i64(const std::string& name, std::optional<int64_t> fallback = std::nullopt) const;
  // Absent or null: nullopt.
  std::optional<int64_t> opt_i64(const std::string& name) const;
  double f64(const std::string& name, std::optional<double> fallback = std::nullopt) const;
  bool flag(const std::string& name, std::optional<bool> fallback = std::nullopt) const;
  std::vector<int64_t> ints(const std::string& name,
                            std::optional<std::vector<int64_t>> fallback = std::nullopt) const;
  std::string str(const std::string& name,
                  std::optional<std::string> fallback = std::nullopt) const;
  // A dtype name ("float64"); absent or null: nullopt.
  std::optional<ScalarType> dtype(const std::string& name) const;

 private:
  const nlohmann::json& param(const std::string& name) const;  // raises CaseError when absent

  std::vector<Tensor> inputs_;
  std::vector<std::string> names_;
  const nlohmann::json& params_;
};

using OpFn = std::function<std::vector<Tensor>(const Call&)>;

struct OpEntry {
  std::string ferry_op;  // "ferry::add.Tensor": looked up with Dispatcher::try_find
  OpFn fn;
};

// Every entry, by the Python side's operator name.
const std::map<std::string, OpEntry>& op_table();

// An entry that calls `ferry_op` through the dispatcher's boxed path, filling the schema's
// arguments by name from the case's inputs and parameters, then from `defaults` (JSON values,
// for schema arguments PyTorch's Python API fills itself), then from the schema's defaults.
// Parameters as PyTorch's Python API gives them are converted to the schema's types: a
// reduction "mean"/"sum"/"none" to its int, one int to an int[N], a dtype name to a ScalarType.
// The outputs are every tensor the operator returns, tensor lists flattened.
OpEntry boxed(std::string ferry_op, nlohmann::json defaults = nlohmann::json::object());

}  // namespace ferry::reference
