// Helpers for the safetensors and Module tests: file images built from header text, a scratch
// directory removed at exit, and writing/reading whole files.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace ferry::testing {

// 8-byte little-endian length + header text + `data_bytes` bytes (value i & 0xFF at i).
inline std::string file_image(const std::string& header, uint64_t data_bytes = 0) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) {
    out[static_cast<size_t>(i)] = static_cast<char>(n & 0xFF);
    n >>= 8;
  }
  out += header;
  for (uint64_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<char>(i & 0xFF));
  return out;
}

// A directory of this process under the test temp dir, created on first use.
inline std::string scratch_dir() {
  static const std::string dir = [] {
    const std::string d = ::testing::TempDir() + "ferry-nn-test-" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// A path in scratch_dir() unique to the running test and `name`.
inline std::string scratch_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test =
      info == nullptr ? "x" : std::string(info->test_suite_name()) + "." + info->name();
  for (char& c : test) {
    if (c == '/') c = '_';
  }
  return scratch_dir() + "/" + test + "." + name;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace ferry::testing
