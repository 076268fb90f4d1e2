// The cases where ferry knowingly differs from PyTorch 1.13, each with the reason (found when
// the comparison landed; docs/ops.md lists them). A listed case still runs: each of its
// failures must contain the entry's text (anything else still fails), and a case listed by
// name must still differ, so that a fix shows up asking to remove its line here. The first
// entry that matches a case applies: specific names before "op/*".
#include <vector>

#include "tests/reference/reference_harness.h"

namespace ferry::reference {
namespace {

const std::vector<KnownDifference>& known() {
  static const std::vector<KnownDifference> list = {
      {"gelu_backward/*", "", "does not support automatic differentiation",
       "gelu_backward has no autograd formula: gelu has no double backward in ferry"},
      {"threshold_backward/f64_half", "", "only threshold 0",
       "ferry's threshold_backward takes only threshold 0 (relu's)"},
      {"threshold_backward/*", "", "only threshold 0",
       "ferry's threshold_backward takes only threshold 0 (relu's)"},
  };
  return list;
}

bool matches(const std::string& pattern, const std::string& name) {
  if (pattern.size() >= 2 && pattern.compare(pattern.size() - 2, 2, "/*") == 0) {
    return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  }
  return pattern == name;
}

}  // namespace

const KnownDifference* known_difference(const std::string& name, Mode mode) {
  const std::string where = mode == Mode::kCpu ? "cpu" : "sim";
  for (const KnownDifference& k : known()) {
    if (matches(k.pattern, name) && (k.mode.empty() || k.mode == where)) return &k;
  }
  return nullptr;
}

}  // namespace ferry::reference
