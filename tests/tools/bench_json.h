// Helpers for the tests that run a `ferry bench*` command as a process and read its --json file:
// whether this build has the benchmarks, the run with its records, and a number in one record.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/tool.h"

namespace ferry::testing {

// The tool is built without the benchmarks in the sanitizer configurations (FERRY_BUILD_BENCH
// is OFF there to save build time); CMake tells the tools suite which configuration it is in.
inline bool bench_built() {
#if defined(FERRY_TEST_BENCH_BUILT)
  return true;
#else
  return false;
#endif
}

// The numeric value of `"key": <number>` in one JSON record, or -1 when absent.
inline double json_field(const std::string& record, const std::string& key) {
  const std::string needle = "\"" + key + "\": ";
  const size_t at = record.find(needle);
  if (at == std::string::npos) return -1;
  return std::strtod(record.c_str() + at + needle.size(), nullptr);
}

// Every line of a bench's JSON file that holds one case record.
inline std::vector<std::string> json_records(const std::string& json) {
  std::vector<std::string> out;
  std::istringstream in(json);
  for (std::string line; std::getline(in, line);) {
    if (line.find("{\"case\": ") != std::string::npos) out.push_back(line);
  }
  return out;
}

// `ferry <args> --json <temp file>`: what the tool printed, its exit status, and the case records
// of the file it wrote (`json` empty when it wrote none). The file is removed.
struct BenchJsonRun {
  ToolRun run;
  std::string json;
  std::vector<std::string> records;
};
inline BenchJsonRun run_bench_with_json(const std::string& args) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("ferry_bench_json_" + std::to_string(::getpid()));
  BenchJsonRun out;
  out.run = run_ferry_tool(args + " --json " + path.string());
  std::ifstream in(path);
  if (in.good()) {
    std::stringstream text;
    text << in.rdbuf();
    out.json = text.str();
    out.records = json_records(out.json);
  }
  std::filesystem::remove(path);
  return out;
}

}  // namespace ferry::testing
