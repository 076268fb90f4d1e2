// FunctionSchema: an operator's signature in PyTorch's schema language, parsed and checked,
//   "ferry::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)".
// A parsed schema is well-formed: known types, alias annotations only on tensors, unique argument
// names, defaults that fit their types. str() prints it back in canonical form.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry {

struct SchemaType {
  std::string base;       // "Tensor", "int", "float", "bool", "Scalar", "ScalarType", ...
  std::string alias_set;  // "a" in Tensor(a!), empty when unannotated
  bool is_write = false;  // the '!' of Tensor(a!): the operator writes through this alias
  std::string suffix;     // list and optional marks as written: "", "?", "[]", "[2]", "[]?", "?[]"

  bool is_optional() const { return !suffix.empty() && suffix.back() == '?'; }
  bool is_list() const { return !suffix.empty() && suffix.back() == ']'; }
  // As written: "Tensor(a!)", "int[2]", "ScalarType?".
  std::string str() const;
  // Without alias annotations and list lengths ("int[2]" -> "int[]", SymInt -> int): what a C++
  // type must match.
  std::string plain() const;
};

struct SchemaArgument {
  std::string name;  // may be empty for returns
  SchemaType type;
  std::optional<std::string> default_value;  // as written: "False", "None", "[0, 1]", "-1"
  bool kwarg_only = false;                   // after the '*' marker
};

struct FunctionSchema {
  std::string ns;        // "ferry"
  std::string name;      // "copy_"
  std::string overload;  // "dtype" in ferry::to.dtype, empty when none
  std::vector<SchemaArgument> arguments;
  std::vector<SchemaArgument> returns;

  // "ferry::to.dtype": the name the dispatcher knows the operator by.
  std::string qualified_name() const;
  // Canonical text: single spaces, "->" between arguments and returns.
  std::string str() const;
  // Whether some argument is written to (an alias annotation with '!').
  bool is_mutable() const;
};

// Parses a schema; raises ferry::Error naming the schema, the position and what was expected.
// When `require_namespace` is false a bare name ("copy_(...)") is accepted with ns empty.
FunctionSchema parse_schema(std::string_view text, bool require_namespace = true);

}  // namespace ferry
