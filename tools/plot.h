// The bench commands' figures (--plot, --timeline): each runs one small script in tools/
// (plot_<kind>.py) with Debian's python3 and matplotlib to draw a JSON text as a PNG. Everything
// that can fail is checked before the benchmark runs (check_figure), so a long run never ends in
// "cannot plot".
#pragma once

#include <cstdio>
#include <string>

namespace ferry::tools {

// One figure a command was asked for: the option that asked ("--plot"), the PNG path given to it
// ("" when the option was not given) and the script that draws it ("plot_ops.py").
struct Figure {
  std::string option;
  std::string png;
  std::string script;
  bool wanted() const { return !png.empty(); }
};

// Raises ferry::Error when `figure.png` cannot be written, or python3, the script or matplotlib
// is missing (saying what to install). Does nothing for a figure that was not asked for.
void check_figure(const Figure& figure);

// Draws `json` into `figure.png` with its script (the title on top) and prints "wrote PNG" on
// `log`; raises ferry::Error when the script fails. Does nothing for a figure not asked for.
void draw_figure(const Figure& figure, const std::string& json, const std::string& title,
                 std::FILE* log);

}  // namespace ferry::tools
