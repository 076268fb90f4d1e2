// Operator schemas (parsing, canonical printing, the errors for malformed ones), the check of C++
// signatures against schemas, and IValue.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "ferry/core/error.h"
#include "ferry/dispatch/function_schema.h"
#include "ferry/dispatch/ivalue.h"
#include "ferry/dispatch/kernel_function.h"
#include "tests/dispatch/dispatch_test_util.h"

namespace ferry {
namespace {

std::string parse_error(std::string_view text) {
  try {
    parse_schema(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(parsed)";
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(FunctionSchema, ParsesCopy) {
  const FunctionSchema s = parse_schema(
      "ferry::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)");
  EXPECT_EQ(s.ns, "ferry");
  EXPECT_EQ(s.name, "copy_");
  EXPECT_EQ(s.overload, "");
  EXPECT_EQ(s.qualified_name(), "ferry::copy_");
  ASSERT_EQ(s.arguments.size(), 3u);
  EXPECT_EQ(s.arguments[0].name, "self");
  EXPECT_EQ(s.arguments[0].type.base, "Tensor");
  EXPECT_EQ(s.arguments[0].type.alias_set, "a");
  EXPECT_TRUE(s.arguments[0].type.is_write);
  EXPECT_EQ(s.arguments[1].type.str(), "Tensor");
  EXPECT_FALSE(s.arguments[1].type.is_write);
  EXPECT_EQ(s.arguments[2].type.base, "bool");
  EXPECT_EQ(s.arguments[2].default_value, "False");
  ASSERT_EQ(s.returns.size(), 1u);
  EXPECT_EQ(s.returns[0].type.str(), "Tensor(a!)");
  EXPECT_TRUE(s.is_mutable());
  EXPECT_EQ(s.str(),
            "ferry::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)");
}

TEST(FunctionSchema, PrintsCanonically) {
  EXPECT_EQ(parse_schema("  ferry::to.dtype( Tensor(a) self,ScalarType dtype ,bool non_blocking = "
                         "False , * , MemoryFormat? memory_format=None )->Tensor(a)")
                .str(),
            "ferry::to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, *, "
            "MemoryFormat? memory_format=None) -> Tensor(a)");
  EXPECT_EQ(parse_schema("ferry::sizes(Tensor self) -> int[]").str(),
            "ferry::sizes(Tensor self) -> int[]");
  EXPECT_EQ(parse_schema("ferry::nothing() -> ()").str(), "ferry::nothing() -> ()");
  EXPECT_EQ(parse_schema("ferry::pair(Tensor x) -> (Tensor a, Tensor b)").str(),
            "ferry::pair(Tensor x) -> (Tensor a, Tensor b)");
  EXPECT_EQ(parse_schema("ferry::two(Tensor x) -> (Tensor, Tensor)").str(),
            "ferry::two(Tensor x) -> (Tensor, Tensor)");
}

TEST(FunctionSchema, TypesWithListsAndOptionals) {
  const FunctionSchema s = parse_schema(
      "ferry::empty_strided(SymInt[] size, int[2] stride, Tensor?[] maybe, int[]? opt, "
      "ScalarType? dtype=None, Device? device=None, float eps=1e-5, int k=-1, "
      "int[] dims=[0, 1]) -> Tensor");
  EXPECT_EQ(s.arguments[0].type.plain(), "int[]");
  EXPECT_EQ(s.arguments[1].type.str(), "int[2]");
  EXPECT_EQ(s.arguments[1].type.plain(), "int[]");
  EXPECT_TRUE(s.arguments[1].type.is_list());
  EXPECT_EQ(s.arguments[2].type.plain(), "Tensor?[]");
  EXPECT_TRUE(s.arguments[3].type.is_optional());
  EXPECT_EQ(s.arguments[3].type.plain(), "int[]?");
  EXPECT_EQ(s.arguments[6].default_value, "1e-5");
  EXPECT_EQ(s.arguments[7].default_value, "-1");
  EXPECT_EQ(s.arguments[8].default_value, "[0, 1]");
  EXPECT_FALSE(s.is_mutable());
}

TEST(FunctionSchema, KeywordOnlyArguments) {
  const FunctionSchema s = parse_schema("ferry::f(Tensor a, *, bool b=True, int c=0) -> Tensor");
  EXPECT_FALSE(s.arguments[0].kwarg_only);
  EXPECT_TRUE(s.arguments[1].kwarg_only);
  EXPECT_TRUE(s.arguments[2].kwarg_only);
}

TEST(FunctionSchema, MalformedSchemasSayWhatIsWrong) {
  EXPECT_CONTAINS(parse_error("copy_(Tensor self) -> Tensor"), "\"::\" after the namespace");
  EXPECT_CONTAINS(parse_error("ferry::f(Tensor self) Tensor"), "expected \"->\" at position 22");
  EXPECT_CONTAINS(parse_error("ferry::f(Tensr self) -> Tensor"), "unknown type \"Tensr\"");
  EXPECT_CONTAINS(parse_error("ferry::f(int(a!) self) -> Tensor"),
                  "only Tensor may carry an alias annotation");
  EXPECT_CONTAINS(parse_error("ferry::f(Tensor a, Tensor a) -> Tensor"), "argument 'a' repeats");
  EXPECT_CONTAINS(parse_error("ferry::f(Tensor) -> Tensor"), "expected an argument name");
  EXPECT_CONTAINS(parse_error("ferry::f(Tensor a -> Tensor"), "expected ')'");
  EXPECT_CONTAINS(parse_error("ferry::f(Tensor a) -> Tensor out junk"), "the end of the schema");
  EXPECT_CONTAINS(parse_error("ferry::f(bool b=1) -> Tensor"),
                  "the default of 'b' (bool) must be True or False, but it is \"1\"");
  EXPECT_CONTAINS(parse_error("ferry::f(int n=None) -> Tensor"), "None needs an optional type");
  EXPECT_CONTAINS(parse_error("ferry::f(int n=1.5) -> Tensor"), "must be an integer");
  EXPECT_CONTAINS(parse_error("ferry::f(float x=abc) -> Tensor"), "must be a number");
  EXPECT_CONTAINS(parse_error("ferry::f(int[x] n) -> Tensor"), "list length is digits");
  EXPECT_CONTAINS(parse_error("ferry::f(Tensor a, *, *, Tensor b) -> Tensor"), "'*' appears twice");
  EXPECT_CONTAINS(parse_error("ferry::f(Tensor a=) -> Tensor"), "a default value after '='");
  EXPECT_CONTAINS(parse_error(""), "expected an operator name");
  EXPECT_CONTAINS(parse_error("ferry::f(Tensor a) -> Tensor out junk"),
                  "invalid operator schema \"ferry::f(Tensor a) -> Tensor out junk\"");
}

TEST(CppSignature, NamesAndSchemaTypes) {
  const auto sig = CppSignature::of<Tensor&(Tensor&, const Tensor&, bool)>();
  EXPECT_EQ(sig.name(), "ferry::Tensor& (ferry::Tensor&, ferry::Tensor const&, bool)");
  ASSERT_EQ(sig.arguments().size(), 3u);
  EXPECT_TRUE(sig.arguments()[0].mutable_ref);
  EXPECT_FALSE(sig.arguments()[1].mutable_ref);
  EXPECT_EQ(sig.arguments()[2].schema_type, "bool");
  EXPECT_TRUE(sig.results()[0].mutable_ref);
  EXPECT_EQ(
      CppSignature::of<Tensor(IntArrayRef, std::optional<ScalarType>)>().arguments()[1].schema_type,
      "ScalarType?");
  EXPECT_TRUE(CppSignature::of<void(Tensor)>() == CppSignature::of<void(Tensor)>());
  EXPECT_FALSE(CppSignature::of<void(Tensor)>() == CppSignature::of<void(const Tensor&)>());
}

TEST(CppSignature, CheckedAgainstSchemas) {
  const FunctionSchema copy = parse_schema(
      "ferry::copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)");
  EXPECT_NO_THROW(check_signature_matches_schema(
      "copy_", CppSignature::of<Tensor&(Tensor&, const Tensor&, bool)>(), copy));
  try {
    check_signature_matches_schema(
        "ferry::copy_", CppSignature::of<Tensor&(Tensor&, const Tensor&, double)>(), copy);
    FAIL();
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(),
                    "ferry::copy_: the C++ signature ferry::Tensor& (ferry::Tensor&, "
                    "ferry::Tensor const&, double) does not fit the schema "
                    "ferry::copy_(Tensor(a!) self, Tensor src, bool "
                    "non_blocking=False) -> Tensor(a!): argument 3 ('non_blocking') "
                    "is bool in the schema, but its C++ type is float");
  }
  const FunctionSchema view = parse_schema("ferry::alias(Tensor(a) self) -> Tensor(a)");
  EXPECT_THROW(check_signature_matches_schema("alias", CppSignature::of<Tensor&(Tensor&)>(), view),
               Error);  // Tensor& where the schema does not write
  const FunctionSchema pure = parse_schema("ferry::clone(Tensor self) -> Tensor");
  EXPECT_THROW(
      check_signature_matches_schema("clone", CppSignature::of<void(const Tensor&)>(), pure),
      Error);  // result count
}

TEST(IValue, HoldsEachTypeAndReadsItBack) {
  const Tensor t = testing::tensor_on(Device("cpu"));
  EXPECT_TRUE(IValue().is_none());
  EXPECT_TRUE(IValue(std::nullopt).is_none());
  EXPECT_TRUE(IValue(t).to_tensor().is_same(t));
  EXPECT_EQ(IValue(3).to_int(), 3);
  EXPECT_EQ(IValue(int64_t{-5}).tag(), IValue::Tag::Int);
  EXPECT_EQ(IValue(2.5).to_double(), 2.5);
  EXPECT_EQ(IValue(3).to_double(), 3.0);  // ints widen to float
  EXPECT_TRUE(IValue(true).to_bool());
  EXPECT_EQ(IValue(Scalar(1.5)).to_scalar().to<double>(), 1.5);
  EXPECT_EQ(IValue(7).to_scalar().to<int64_t>(), 7);
  EXPECT_TRUE(IValue(true).to_scalar().is_bool());
  EXPECT_EQ(IValue(kHalf).to_scalar_type(), kHalf);
  EXPECT_EQ(IValue(Device("sim:1")).to_device(), Device("sim:1"));
  EXPECT_EQ(IValue(MemoryFormat::ChannelsLast).to_memory_format(), MemoryFormat::ChannelsLast);
  EXPECT_EQ(IValue(IntArrayRef({1, 2})).to_int_list(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(IValue(std::vector<Tensor>{t, t}).to_tensor_list().size(), 2u);
  EXPECT_EQ(IValue(std::optional<int64_t>(4)).to_int(), 4);
  EXPECT_TRUE(IValue(std::optional<Tensor>()).is_none());
}

TEST(IValue, WrongTypeNamesBoth) {
  try {
    IValue(2.5).to_tensor();
    FAIL();
  } catch (const Error& e) {
    EXPECT_CONTAINS(e.what(), "expected an IValue holding Tensor, but it holds float (2.5)");
  }
  EXPECT_THROW(IValue().to_int(), Error);
  EXPECT_THROW(IValue(1).to_bool(), Error);
}

TEST(IValue, EqualityAndPrinting) {
  const Tensor t = testing::tensor_on(Device("cpu"));
  EXPECT_EQ(IValue(t), IValue(t));
  EXPECT_FALSE(IValue(t) == IValue(testing::tensor_on(Device("cpu"))));  // identity, not values
  EXPECT_EQ(IValue(2), IValue(int64_t{2}));
  EXPECT_FALSE(IValue(2) == IValue(2.0));
  EXPECT_EQ(IValue(Scalar(1.5)), IValue(Scalar(1.5)));
  std::ostringstream out;
  out << IValue(t) << "; " << IValue() << "; " << IValue(true) << "; " << IValue(kBFloat16) << "; "
      << IValue(IntArrayRef({2, 3})) << "; " << IValue(Device("cuda:0"));
  EXPECT_EQ(out.str(), "Tensor[4] float32 cpu; None; True; bfloat16; [2, 3]; cuda:0");
}

}  // namespace
}  // namespace ferry
