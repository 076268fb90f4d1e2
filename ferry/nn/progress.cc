// The load progress reporter: the callback on every update, the bar throttled to ten redraws a
// second, drawn with a carriage return and ended with a newline.
#include "ferry/nn/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace ferry::safetensors {
namespace {

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : (bytes < 10 ? "%.2f %s" : "%.1f %s"), bytes,
                units[u]);
  return buf;
}

}  // namespace

double Progress::eta_seconds() const {
  if (bytes_done == 0 || bytes_done >= bytes_total || seconds <= 0) return 0;
  return seconds * static_cast<double>(bytes_total - bytes_done) / static_cast<double>(bytes_done);
}

std::string format_progress(const std::string& label, const Progress& p, int bar_width) {
  const double fraction =
      p.bytes_total == 0
          ? 1.0
          : std::min(1.0, static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total));
  const int filled = static_cast<int>(std::floor(fraction * bar_width));
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(bar_width - filled), ' ');
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.2f GB/s", p.gb_per_s());
  char eta[64];
  if (p.bytes_done >= p.bytes_total) {
    std::snprintf(eta, sizeof eta, "%.1f s", p.seconds);
  } else {
    std::snprintf(eta, sizeof eta, "ETA %.1f s", p.eta_seconds());
  }
  return label + " [" + bar + "] " + human_bytes(static_cast<double>(p.bytes_done)) + " / " +
         human_bytes(static_cast<double>(p.bytes_total)) + "  " + rate + "  " + eta;
}

ProgressReporter::ProgressReporter(std::string label, uint64_t total, ProgressCallback callback,
                                   ProgressBar bar, std::FILE* out, bool is_terminal)
    : label_(std::move(label)), callback_(std::move(callback)), out_(out) {
  progress_.bytes_total = total;
  draw_ =
      out_ != nullptr && is_terminal &&
      (bar == ProgressBar::kAlways || (bar == ProgressBar::kAuto && total > kProgressBarMinBytes));
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

ProgressReporter::ProgressReporter(std::string label, uint64_t total, const LoadOptions& options)
    : ProgressReporter(std::move(label), total, options.progress, options.progress_bar, stderr,
                       ::isatty(STDERR_FILENO) == 1) {}

ProgressReporter::~ProgressReporter() {
  if (drawn_ && !finished_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
}

void ProgressReporter::advance(uint64_t bytes) {
  progress_.bytes_done += bytes;
  report(false);
}

void ProgressReporter::finish() {
  if (finished_) return;
  report(true);
  finished_ = true;
}

void ProgressReporter::report(bool final) {
  const auto now = std::chrono::steady_clock::now();
  progress_.seconds = std::chrono::duration<double>(now - start_).count();
  if (callback_) callback_(progress_);
  if (!draw_) return;
  if (!final && drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;
  std::fprintf(out_, "\r%s%s", format_progress(label_, progress_).c_str(), final ? "\n" : "");
  std::fflush(out_);
}

}  // namespace ferry::safetensors
