// C++ signatures: names, and the check against an operator's schema; boxing errors.
#include "ferry/dispatch/kernel_function.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

#include "ferry/core/error.h"

namespace ferry {

std::string CppSignature::demangled_name(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(mangled);
}

void check_signature_matches_schema(std::string_view op, const CppSignature& sig,
                                    const FunctionSchema& schema) {
  auto fail = [&](const std::string& why) {
    FERRY_FAIL_AS(Error, op, ": the C++ signature ", sig.name(), " does not fit the schema ",
                  schema.str(), ": ", why);
  };
  const auto& args = sig.arguments();
  if (args.size() != schema.arguments.size()) {
    fail(detail::str_cat("the C++ signature has ", args.size(), " argument(s), the schema ",
                         schema.arguments.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const SchemaArgument& a = schema.arguments[i];
    const std::string where = detail::str_cat("argument ", i + 1, " ('", a.name, "')");
    if (args[i].schema_type != a.type.plain()) {
      fail(detail::str_cat(where, " is ", a.type.str(), " in the schema, but its C++ type is ",
                           args[i].schema_type, " in schema terms"));
    }
    if (args[i].mutable_ref && !a.type.is_write) {
      fail(where +
           " is Tensor& in C++, but the schema does not write to it (annotate it as "
           "Tensor(a!))");
    }
    if (!args[i].mutable_ref && a.type.is_write) {
      fail(where + " is written by the operator (" + a.type.str() +
           "), so its C++ type must be Tensor&");
    }
  }
  const auto& results = sig.results();
  if (results.size() != schema.returns.size()) {
    fail(detail::str_cat("the C++ signature returns ", results.size(), " value(s), the schema ",
                         schema.returns.size()));
  }
  for (size_t i = 0; i < results.size(); ++i) {
    const SchemaArgument& r = schema.returns[i];
    if (results[i].schema_type != r.type.plain()) {
      fail(detail::str_cat("result ", i + 1, " is ", r.type.str(),
                           " in the schema, but its C++ type is ", results[i].schema_type,
                           " in schema terms"));
    }
    if (results[i].mutable_ref && r.type.alias_set.empty()) {
      fail(detail::str_cat("result ", i + 1,
                           " is Tensor& in C++, but the schema's result is no alias of an "
                           "argument (annotate it as Tensor(a!))"));
    }
  }
}

namespace detail {

void fail_result_count(std::string_view op, size_t want, size_t got) {
  FERRY_FAIL_AS(Error, op, ": expected the boxed kernel to leave ", want,
                " result(s) on the stack, but it left ", got);
}

void fail_result_alias(std::string_view op, size_t index) {
  FERRY_FAIL_AS(Error, op, ": result ", index + 1,
                " is returned as Tensor&, but the boxed kernel returned a tensor that is none of "
                "the caller's Tensor& arguments");
}

}  // namespace detail
}  // namespace ferry
