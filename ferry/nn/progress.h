// The progress of a load: a callback for library users and a one-line bar (bytes, GB/s, ETA) on
// stderr. The bar is drawn only when stderr is a terminal (and, by default, only for loads above
// 256 MiB), is redrawn at most ten times a second, and always ends with a newline, so it never
// mixes into redirected output. The callback sees every update.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "ferry/nn/safetensors.h"

namespace ferry::safetensors {

// The bar's text for `p` (no carriage return or newline), e.g.
// "model.safetensors [#######             ]  356.0 MiB / 1.00 GiB  5.21 GB/s  ETA 0.1 s".
std::string format_progress(const std::string& label, const Progress& p, int bar_width = 24);

class ProgressReporter {
 public:
  // `out` is where the bar goes when it is drawn (stderr in loads; tests pass a file);
  // `is_terminal` says whether `out` is one.
  ProgressReporter(std::string label, uint64_t total, ProgressCallback callback, ProgressBar bar,
                   std::FILE* out, bool is_terminal);
  // The load's reporter: stderr, asking isatty.
  ProgressReporter(std::string label, uint64_t total, const LoadOptions& options);
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;
  // Ends the bar's line if it was drawn and finish() was not called.
  ~ProgressReporter();

  void advance(uint64_t bytes);
  // Reports the final state (the callback once more, the bar with its newline).
  void finish();

  bool draws_bar() const { return draw_; }
  const Progress& progress() const { return progress_; }

 private:
  void report(bool final);

  std::string label_;
  Progress progress_;
  ProgressCallback callback_;
  std::FILE* out_;
  bool draw_ = false;
  bool drawn_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace ferry::safetensors
