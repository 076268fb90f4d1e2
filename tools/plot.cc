// Finds and runs the plot script: $FERRY_PLOT_SCRIPT, else ../share/ferry/plot_bench.py beside
// an installed tool, else tools/plot_bench.py in the source tree it was built from; the
// interpreter is $FERRY_PYTHON, else /usr/bin/python3 (Debian's, with python3-matplotlib).
#include "tools/plot.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ferry/core/error.h"

extern char** environ;

namespace ferry::tools {
namespace {

namespace fs = std::filesystem;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string python() {
  return env_or("FERRY_PYTHON", fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3");
}

std::string script() {
  if (const char* v = std::getenv("FERRY_PLOT_SCRIPT"); v != nullptr && *v != '\0') return v;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path() / FERRY_BIN_TO_DATA / "plot_bench.py";
    if (fs::exists(installed)) return installed.lexically_normal().string();
  }
  const fs::path source = fs::path(FERRY_SOURCE_DIR) / "tools" / "plot_bench.py";
  FERRY_CHECK(fs::exists(source), "--plot: cannot find plot_bench.py (looked beside the tool in ",
              (exe.parent_path() / FERRY_BIN_TO_DATA).lexically_normal().string(), " and in ",
              source.parent_path().string(), "); set FERRY_PLOT_SCRIPT to its path");
  return source.string();
}

// Runs argv, waits, returns its exit status (127 when it could not start).
int run(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
  if (err != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

void check_plot(const std::string& png) {
  const fs::path out(png);
  const fs::path dir = out.has_parent_path() ? out.parent_path() : fs::path(".");
  FERRY_CHECK(
      access(dir.c_str(), W_OK) == 0 && (!fs::exists(out) || access(out.c_str(), W_OK) == 0),
      "--plot: cannot write \"", png, "\" (", std::strerror(errno), ")");
  const std::string py = python();
  const int status = run({py, script(), "--check"});
  FERRY_CHECK(status != 127, "--plot: cannot run ", py,
              "; install Debian's python3 and python3-matplotlib (scripts/install-deps.sh does), "
              "or set FERRY_PYTHON");
  FERRY_CHECK(status == 0, "--plot: ", py,
              " cannot import matplotlib; install Debian's python3-matplotlib "
              "(scripts/install-deps.sh does)");
}

void plot_json(const std::string& json, const std::string& png, const std::string& title) {
  char path[] = "/tmp/ferry-plot-XXXXXX.json";
  const int fd = mkstemps(path, 5);
  FERRY_CHECK(fd >= 0, "--plot: cannot create a temporary file (", std::strerror(errno), ")");
  close(fd);
  {
    std::ofstream out(path);
    out << json;
  }
  const int status = run({python(), script(), path, png, "--title", title});
  std::remove(path);
  FERRY_CHECK(status == 0, "--plot: plot_bench.py failed (exit status ", status, ")");
}

}  // namespace ferry::tools
