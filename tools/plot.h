// The bench commands' --plot: runs tools/plot_bench.py with Debian's python3 and matplotlib to
// draw a benchmark's JSON as a PNG. Everything that can fail is checked before the benchmark
// runs (check_plot), so a long run never ends in "cannot plot".
#pragma once

#include <string>

namespace ferry::tools {

// Raises ferry::Error when `png` cannot be written, or python3, the script or matplotlib is
// missing (saying what to install).
void check_plot(const std::string& png);

// Draws `json` (the bench's --json text) into `png`; raises ferry::Error when the script fails.
void plot_json(const std::string& json, const std::string& png, const std::string& title);

}  // namespace ferry::tools
