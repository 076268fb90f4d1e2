// `ferry ops`: the dispatch table, operators × dispatch keys (highest priority first), with what
// serves each cell: the operator's kernel, a key's fallback (by name), a fallthrough, or — (a
// call landing there raises NotImplementedError); then each operator's schema, C++ signature and
// kernel names. `--json` prints the same as one JSON object; `--op` filters by name.
#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ferry/core/json_text.h"
#include "ferry/dispatch/dispatcher.h"
#include "tools/command.h"

namespace ferry::tools {
namespace {

// Key columns in priority order, highest first.
std::vector<DispatchKey> keys_by_priority() {
  std::vector<DispatchKey> keys;
  for (int k = kNumDispatchKeys - 1; k >= 0; --k) keys.push_back(static_cast<DispatchKey>(k));
  return keys;
}

std::string cell_text(const DispatchCell& c) {
  switch (c.kind) {
    case DispatchCell::Kind::Fallback:
      return "fallback:" + c.name;
    default:
      return std::string(c.kind_name());
  }
}

std::string_view cell_kind_json(DispatchCell::Kind kind) {
  switch (kind) {
    case DispatchCell::Kind::None:
      return "none";
    case DispatchCell::Kind::Kernel:
      return "kernel";
    case DispatchCell::Kind::BoxedKernel:
      return "boxed_kernel";
    case DispatchCell::Kind::Fallthrough:
      return "fallthrough";
    case DispatchCell::Kind::Fallback:
      return "fallback";
    case DispatchCell::Kind::FallthroughFallback:
      return "fallthrough_fallback";
  }
  return "unknown";
}

// Columns on a terminal: UTF-8 continuation bytes take none.
size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string padded(const std::string& s, size_t width) {
  const size_t w = display_width(s);
  return w < width ? s + std::string(width - w, ' ') : s;
}

std::string json_cell(const DispatchCell& c) {
  std::string out = "{\"kind\": " + json_quoted(cell_kind_json(c.kind));
  if (!c.name.empty()) out += ", \"name\": " + json_quoted(c.name);
  return out + "}";
}

int print_json(const std::vector<OperatorInfo>& ops,
               const std::array<DispatchCell, kNumDispatchKeys>& fallbacks) {
  const auto keys = keys_by_priority();
  std::string out = "{\n  \"keys\": [";
  for (size_t i = 0; i < keys.size(); ++i) {
    out += (i ? ", " : "") + json_quoted(dispatch_key_name(keys[i]));
  }
  out += "],\n  \"fallbacks\": {";
  bool first = true;
  for (DispatchKey k : keys) {
    const DispatchCell& c = fallbacks[static_cast<size_t>(k)];
    if (c.kind == DispatchCell::Kind::None) continue;
    out += std::string(first ? "" : ", ") + json_quoted(dispatch_key_name(k)) + ": " + json_cell(c);
    first = false;
  }
  out += "},\n  \"operators\": [";
  for (size_t i = 0; i < ops.size(); ++i) {
    const OperatorInfo& op = ops[i];
    out += std::string(i ? "," : "") + "\n    {\"name\": " + json_quoted(op.name);
    out += ", \"schema\": " + (op.schema ? json_quoted(*op.schema) : "null");
    out += ", \"cpp_signature\": " + (op.cpp_signature ? json_quoted(*op.cpp_signature) : "null");
    out += ", \"cells\": {";
    for (size_t j = 0; j < keys.size(); ++j) {
      out += (j ? ", " : "") + json_quoted(dispatch_key_name(keys[j])) + ": " +
             json_cell(op.cells[static_cast<size_t>(keys[j])]);
    }
    out += "}}";
  }
  out += ops.empty() ? "]\n}\n" : "\n  ]\n}\n";
  std::fputs(out.c_str(), stdout);
  return 0;
}

int print_table(const std::vector<OperatorInfo>& ops,
                const std::array<DispatchCell, kNumDispatchKeys>& fallbacks) {
  // A key column (other than a backend's) where nothing serves any operator says nothing.
  std::vector<DispatchKey> keys;
  for (DispatchKey k : keys_by_priority()) {
    bool used =
        is_backend_key(k) || fallbacks[static_cast<size_t>(k)].kind != DispatchCell::Kind::None;
    for (const auto& op : ops) {
      used |= op.cells[static_cast<size_t>(k)].kind != DispatchCell::Kind::None;
    }
    if (used) keys.push_back(k);
  }
  std::printf(
      "ferry ops: %zu operator(s); dispatch keys from the highest priority down.\n"
      "  kernel: the operator's own kernel   fallback:NAME: the key's backend fallback\n"
      "  fallthrough: the key is skipped     —: no kernel (a call landing there raises "
      "NotImplementedError)\n\n",
      ops.size());

  std::vector<std::vector<std::string>> rows;
  rows.push_back({"operator"});
  for (DispatchKey k : keys) rows.back().push_back(std::string(dispatch_key_name(k)));
  for (const auto& op : ops) {
    rows.push_back({op.name});
    for (DispatchKey k : keys) rows.back().push_back(cell_text(op.cells[static_cast<size_t>(k)]));
  }
  rows.push_back({"(fallbacks)"});
  for (DispatchKey k : keys) rows.back().push_back(cell_text(fallbacks[static_cast<size_t>(k)]));
  std::vector<size_t> widths(keys.size() + 1, 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], display_width(row[i]));
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += i + 1 == row.size() ? row[i] : padded(row[i], widths[i]) + "  ";
    }
    std::printf("%s\n", line.c_str());
  }

  for (const auto& op : ops) {
    std::printf("\n%s\n", op.schema ? op.schema->c_str() : (op.name + " (no schema yet)").c_str());
    if (op.cpp_signature) std::printf("  C++: %s\n", op.cpp_signature->c_str());
    for (DispatchKey k : keys_by_priority()) {
      const DispatchCell& c = op.cells[static_cast<size_t>(k)];
      if (c.kind == DispatchCell::Kind::Kernel || c.kind == DispatchCell::Kind::BoxedKernel) {
        std::printf("  %-14s %s %s\n", (std::string(dispatch_key_name(k)) + ":").c_str(),
                    c.kind == DispatchCell::Kind::Kernel ? "kernel" : "boxed kernel",
                    c.name.c_str());
      }
    }
  }
  return 0;
}

int run_ops(bool json, const std::string& filter) {
  Dispatcher& d = Dispatcher::singleton();
  std::vector<OperatorInfo> ops = d.describe();
  if (!filter.empty()) {
    std::erase_if(
        ops, [&](const OperatorInfo& op) { return op.name.find(filter) == std::string::npos; });
  }
  const auto fallbacks = d.describe_fallbacks();
  return json ? print_json(ops, fallbacks) : print_table(ops, fallbacks);
}

}  // namespace

FERRY_REGISTER_COMMAND("ops",
                       "Print the dispatch table: operators x dispatch keys, and what serves "
                       "each (kernel, fallback, fallthrough), with each operator's schema",
                       [](CLI::App& sub) -> std::function<int()> {
                         auto json = std::make_shared<bool>(false);
                         auto filter = std::make_shared<std::string>();
                         sub.add_flag("--json", *json, "Print one JSON object");
                         sub.add_option("--op", *filter,
                                        "Only operators whose name contains this text");
                         return [json, filter] { return run_ops(*json, *filter); };
                       });

}  // namespace ferry::tools
