// Finds and runs a figure's script: $FERRY_PLOT_DIR/<script>, else ../share/ferry/<script> beside
// an installed tool, else tools/<script> in the source tree it was built from; the interpreter is
// $FERRY_PYTHON, else /usr/bin/python3 (Debian's, with python3-matplotlib). The JSON goes to the
// script through a temporary file, removed afterwards.
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

std::string script_path(const Figure& f) {
  if (const char* dir = std::getenv("FERRY_PLOT_DIR"); dir != nullptr && *dir != '\0') {
    const fs::path p = fs::path(dir) / f.script;
    FERRY_CHECK(fs::exists(p), f.option, ": expected ", f.script, " in FERRY_PLOT_DIR (\"", dir,
                "\"), but it is not there");
    return p.string();
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  const fs::path data = (exe.parent_path() / FERRY_BIN_TO_DATA).lexically_normal();
  if (!ec && fs::exists(data / f.script)) return (data / f.script).string();
  const fs::path source = fs::path(FERRY_SOURCE_DIR) / "tools" / f.script;
  FERRY_CHECK(fs::exists(source), f.option, ": cannot find ", f.script,
              " (looked beside the tool in ", data.string(), " and in ",
              source.parent_path().string(), "); set FERRY_PLOT_DIR to the folder that holds it");
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

void check_figure(const Figure& f) {
  if (!f.wanted()) return;
  const fs::path out(f.png);
  const fs::path dir = out.has_parent_path() ? out.parent_path() : fs::path(".");
  FERRY_CHECK(!fs::is_directory(out), f.option, ": expected a PNG file to write, but \"", f.png,
              "\" is a directory");
  FERRY_CHECK(
      access(dir.c_str(), W_OK) == 0 && (!fs::exists(out) || access(out.c_str(), W_OK) == 0),
      f.option, ": cannot write \"", f.png, "\" (", std::strerror(errno), ")");
  const std::string py = python();
  const int status = run({py, script_path(f), "--check"});
  FERRY_CHECK(status != 127, f.option, ": cannot run ", py,
              "; install Debian's python3 and python3-matplotlib (scripts/install-deps.sh does), "
              "or set FERRY_PYTHON");
  FERRY_CHECK(status == 0, f.option, ": ", py,
              " cannot import matplotlib; install Debian's python3-matplotlib "
              "(scripts/install-deps.sh does)");
}

void draw_figure(const Figure& f, const std::string& json, const std::string& title,
                 std::FILE* log) {
  if (!f.wanted()) return;
  char path[] = "/tmp/ferry-plot-XXXXXX.json";
  const int fd = mkstemps(path, 5);
  FERRY_CHECK(fd >= 0, f.option, ": cannot create a temporary file (", std::strerror(errno), ")");
  close(fd);
  {
    std::ofstream out(path);
    out << json;
  }
  const int status = run({python(), script_path(f), path, f.png, "--title", title});
  std::remove(path);
  FERRY_CHECK(status == 0, f.option, ": ", f.script, " failed (exit status ", status,
              ") drawing \"", f.png, "\"");
  std::fprintf(log, "wrote %s\n", f.png.c_str());
}

}  // namespace ferry::tools
