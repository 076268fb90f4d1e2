// Helpers for the tests of the bench commands' figures (--plot, --timeline): whether Debian's
// matplotlib is there to draw them, a fresh PNG path in the temporary folder, and whether a file
// is a non-empty PNG (its 8-byte signature, then more).
#pragma once

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace ferry::testing {

// The interpreter the tool runs (FERRY_PYTHON, else /usr/bin/python3) can import matplotlib.
inline bool matplotlib_available() {
  const char* py = std::getenv("FERRY_PYTHON");
  const std::string python = py != nullptr && *py != '\0' ? py : "/usr/bin/python3";
  const std::string command = "'" + python + "' -c 'import matplotlib' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

// <temp>/ferry_<name>_<pid>.png, removed if it is there.
inline std::filesystem::path temp_png(const std::string& name) {
  const std::filesystem::path p = std::filesystem::temp_directory_path() /
                                  ("ferry_" + name + "_" + std::to_string(::getpid()) + ".png");
  std::filesystem::remove(p);
  return p;
}

// The file starts with the PNG signature and holds more than a header's worth of bytes.
inline bool is_png(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<unsigned char, 8> head{};
  in.read(reinterpret_cast<char*>(head.data()), head.size());
  const std::array<unsigned char, 8> signature = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::error_code ec;
  return in.gcount() == 8 && head == signature && std::filesystem::file_size(path, ec) > 100;
}

}  // namespace ferry::testing

// In a test body: skips the test when matplotlib cannot be imported, saying what to install.
#define FERRY_SKIP_WITHOUT_MATPLOTLIB()                                                     \
  do {                                                                                      \
    if (!::ferry::testing::matplotlib_available())                                          \
      GTEST_SKIP() << "matplotlib is missing: install Debian's python3-matplotlib to test " \
                      "--plot and --timeline";                                              \
  } while (0)
