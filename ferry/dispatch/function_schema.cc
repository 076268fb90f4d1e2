// A recursive-descent parser for operator schemas, and their canonical printing.
#include "ferry/dispatch/function_schema.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include "ferry/core/error.h"

namespace ferry {
namespace {

// The types a schema may name. Tensor is the only one that may carry an alias annotation.
constexpr std::string_view kKnownTypes[] = {
    "Tensor", "int",    "float",        "bool", "complex",   "Scalar", "ScalarType",
    "Device", "Layout", "MemoryFormat", "str",  "Generator", "SymInt", "Stream"};

bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  FunctionSchema parse(bool require_namespace) {
    FunctionSchema s;
    parse_name(s, require_namespace);
    expect('(');
    parse_arguments(s);
    expect(')');
    skip_space();
    expect_text("->");
    parse_returns(s);
    skip_space();
    if (pos_ != text_.size()) fail("the end of the schema");
    return s;
  }

 private:
  [[noreturn]] void fail(std::string_view expected) const {
    const std::string_view rest = text_.substr(pos_);
    FERRY_FAIL_AS(Error, "invalid operator schema \"", text_, "\": expected ", expected,
                  " at position ", pos_, ", but got ",
                  rest.empty() ? std::string("the end") : "\"" + std::string(rest) + "\"");
  }
  [[noreturn]] void fail_at(size_t pos, std::string_view message) const {
    FERRY_FAIL_AS(Error, "invalid operator schema \"", text_, "\": ", message, " (at position ",
                  pos, ")");
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < text_.size() && text_[pos_] == c;
  }
  bool accept(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("'") + c + "'");
  }
  void expect_text(std::string_view t) {
    skip_space();
    if (text_.substr(pos_, t.size()) != t) fail("\"" + std::string(t) + "\"");
    pos_ += t.size();
  }
  bool peek_ident() {
    skip_space();
    return pos_ < text_.size() && is_ident_start(text_[pos_]);
  }
  std::string ident(std::string_view what) {
    if (!peek_ident()) fail(what);
    const size_t start = pos_;
    while (pos_ < text_.size() && is_ident_char(text_[pos_])) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  void parse_name(FunctionSchema& s, bool require_namespace) {
    std::string first = ident("an operator name");
    if (text_.substr(pos_, 2) == "::") {
      pos_ += 2;
      s.ns = std::move(first);
      s.name = ident("an operator name after \"::\"");
    } else if (require_namespace) {
      fail("\"::\" after the namespace (operator names are qualified, as in \"ferry::copy_\")");
    } else {
      s.name = std::move(first);
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      s.overload = ident("an overload name after '.'");
    }
  }

  SchemaType parse_type() {
    const size_t start = (skip_space(), pos_);
    SchemaType t;
    t.base = ident("a type");
    if (std::find(std::begin(kKnownTypes), std::end(kKnownTypes), t.base) ==
        std::end(kKnownTypes)) {
      std::string known;
      for (std::string_view k : kKnownTypes) known += (known.empty() ? "" : ", ") + std::string(k);
      fail_at(start, "unknown type \"" + t.base + "\" (known: " + known + ")");
    }
    if (pos_ < text_.size() && text_[pos_] == '(') {  // alias annotation, directly after the type
      if (t.base != "Tensor") fail_at(pos_, "only Tensor may carry an alias annotation");
      ++pos_;
      t.alias_set = ident("an alias set name such as 'a'");
      t.is_write = accept('!');
      expect(')');
    }
    while (pos_ < text_.size() && (text_[pos_] == '?' || text_[pos_] == '[')) {
      if (text_[pos_] == '?') {
        t.suffix += '?';
        ++pos_;
        continue;
      }
      const size_t open = pos_++;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      if (pos_ >= text_.size() || text_[pos_] != ']') fail("']' (a list length is digits)");
      ++pos_;
      t.suffix += text_.substr(open, pos_ - open);
    }
    return t;
  }

  // A default value: everything up to the next ',' or ')' outside brackets and quotes.
  std::string parse_default() {
    skip_space();
    const size_t start = pos_;
    int depth = 0;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '"' || c == '\'') {
        const size_t close = text_.find(c, pos_ + 1);
        if (close == std::string_view::npos) fail_at(pos_, "unterminated string in a default");
        pos_ = close + 1;
        continue;
      }
      if (c == '[' || c == '(') ++depth;
      if (c == ']' || c == ')') {
        if (depth == 0) break;
        --depth;
      }
      if (c == ',' && depth == 0) break;
      ++pos_;
    }
    std::string_view v = text_.substr(start, pos_ - start);
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
    if (v.empty()) fail("a default value after '='");
    return std::string(v);
  }

  void check_default(const SchemaArgument& a, size_t pos) const {
    const std::string& v = *a.default_value;
    auto bad = [&](std::string_view want) {
      fail_at(pos, "the default of '" + a.name + "' (" + a.type.str() + ") must be " +
                       std::string(want) + ", but it is \"" + v + "\"");
    };
    if (v == "None") {
      if (!a.type.is_optional()) bad("a value of its type (None needs an optional type, T?)");
      return;
    }
    if (a.type.suffix.empty() || a.type.suffix == "?") {
      if (a.type.base == "bool" && v != "True" && v != "False") bad("True or False");
      if (a.type.base == "int" || a.type.base == "SymInt") {
        const size_t digits = v.find_first_not_of("-");
        if (digits > 1 || digits == v.size() ||
            v.find_first_not_of("0123456789", digits) != std::string::npos) {
          bad("an integer");
        }
      }
      if (a.type.base == "float") {
        char* end = nullptr;
        std::strtod(v.c_str(), &end);
        if (end != v.c_str() + v.size()) bad("a number");
      }
    }
  }

  void parse_arguments(FunctionSchema& s) {
    if (peek(')')) return;
    bool kwarg_only = false;
    std::set<std::string> names;
    do {
      if (accept('*')) {
        if (kwarg_only) fail_at(pos_ - 1, "'*' appears twice");
        kwarg_only = true;
        continue;
      }
      SchemaArgument a;
      a.type = parse_type();
      const size_t name_pos = (skip_space(), pos_);
      a.name = ident("an argument name");
      if (!names.insert(a.name).second) fail_at(name_pos, "argument '" + a.name + "' repeats");
      a.kwarg_only = kwarg_only;
      if (accept('=')) {
        const size_t default_pos = (skip_space(), pos_);
        a.default_value = parse_default();
        check_default(a, default_pos);
      }
      s.arguments.push_back(std::move(a));
    } while (accept(','));
  }

  SchemaArgument parse_return() {
    SchemaArgument r;
    r.type = parse_type();
    if (peek_ident()) r.name = ident("a return name");
    return r;
  }

  void parse_returns(FunctionSchema& s) {
    skip_space();
    if (accept('(')) {
      if (accept(')')) return;
      do {
        s.returns.push_back(parse_return());
      } while (accept(','));
      expect(')');
      return;
    }
    s.returns.push_back(parse_return());
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::string SchemaType::str() const {
  std::string out = base;
  if (!alias_set.empty()) out += "(" + alias_set + (is_write ? "!" : "") + ")";
  return out + suffix;
}

std::string SchemaType::plain() const {
  std::string out = base == "SymInt" ? "int" : base;
  for (size_t i = 0; i < suffix.size(); ++i) {
    if (suffix[i] == '[') {
      out += "[]";
      i = suffix.find(']', i);
    } else {
      out += suffix[i];
    }
  }
  return out;
}

std::string FunctionSchema::qualified_name() const {
  std::string out = ns.empty() ? name : ns + "::" + name;
  if (!overload.empty()) out += "." + overload;
  return out;
}

std::string FunctionSchema::str() const {
  std::string out = qualified_name() + "(";
  bool marked = false;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const SchemaArgument& a = arguments[i];
    if (i) out += ", ";
    if (a.kwarg_only && !marked) {
      out += "*, ";
      marked = true;
    }
    out += a.type.str() + " " + a.name;
    if (a.default_value) out += "=" + *a.default_value;
  }
  out += ") -> ";
  const bool bare = returns.size() == 1 && returns[0].name.empty();
  if (bare) return out + returns[0].type.str();
  out += "(";
  for (size_t i = 0; i < returns.size(); ++i) {
    if (i) out += ", ";
    out += returns[i].type.str();
    if (!returns[i].name.empty()) out += " " + returns[i].name;
  }
  return out + ")";
}

bool FunctionSchema::is_mutable() const {
  return std::any_of(arguments.begin(), arguments.end(),
                     [](const SchemaArgument& a) { return a.type.is_write; });
}

FunctionSchema parse_schema(std::string_view text, bool require_namespace) {
  return Parser(text).parse(require_namespace);
}

}  // namespace ferry
