// `ferry bench-weights` (bench/weights_bench.h).
#include "bench/weights_bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include "bench/timing.h"
#include "bench/transport_perftest.h"
#include "ferry/core/error.h"
#include "ferry/nn/safetensors.h"
#include "ferry/switch/weight_share.h"

namespace ferry::bench {
namespace {

using switch_::ModelConfig;
using switch_::ServedModel;

// Drops the file's pages from the page cache (they are clean after the fsync).
void evict_from_page_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  FERRY_CHECK(fd >= 0, "bench-weights: cannot open ", path, ": ", std::strerror(errno));
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

struct Row {
  std::string what;
  double ms = 0;
  double gbps = 0;  // image bytes per second, 0: not a transfer
};

void print_rows(const std::vector<Row>& rows) {
  std::printf("  %-52s %10s %10s\n", "", "median ms", "GB/s");
  for (const Row& r : rows) {
    if (r.gbps > 0) {
      std::printf("  %-52s %10.1f %10.2f\n", r.what.c_str(), r.ms, r.gbps);
    } else {
      std::printf("  %-52s %10.1f %10s\n", r.what.c_str(), r.ms, "");
    }
  }
  std::fflush(stdout);
}

std::string ucx_tls(const std::string& choice) { return choice == "shm" ? "sm,tcp" : "tcp"; }

}  // namespace

int run_weights_bench(const WeightsBenchOptions& o) {
  FERRY_CHECK(o.repeat >= 1, "bench-weights: expected --repeat >= 1, got ", o.repeat);
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ferry-bench-weights-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "holder");
  std::filesystem::create_directories(dir / "fetcher");
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};

  ModelConfig config;
  config.name = "bench";
  config.arch = o.arch;
  config.seed = 7;
  std::printf("bench-weights: %s, seed %llu, %d repeats (median)\n", o.arch.c_str(),
              static_cast<unsigned long long>(config.seed), o.repeat);
  std::fflush(stdout);
  const std::string file = (dir / "holder" / "weights.safetensors").string();
  {
    ServedModel seeded(config);
    safetensors::save(file, seeded.module().state_dict());
  }
  ModelConfig local = config;
  local.weights = file;
  const std::string toml = (dir / "holder" / "models.toml").string();
  {
    std::ofstream out(toml);
    out << "[models.bench]\narch = \"" << o.arch << "\"\nweights = \"weights.safetensors\"\n";
  }

  // Local loads: the whole ServedModel, as `ferry serve` builds it.
  std::unique_ptr<ServedModel> reference;
  std::vector<double> warm, cold;
  reference = std::make_unique<ServedModel>(local);  // warms the page cache
  const double image_bytes = static_cast<double>(reference->weight_bytes());
  for (int r = 0; r < o.repeat; ++r) {
    warm.push_back(time_ms([&] { ServedModel m(local); }));
    evict_from_page_cache(file);
    cold.push_back(time_ms([&] { ServedModel m(local); }));
  }
  std::vector<double> build;
  for (int r = 0; r < o.repeat; ++r) {
    build.push_back(time_ms([&] {
      ServedModel m(config, {}, [](const switch_::ModelImage::Layout&) {
        return Tensor();  // no image: the seeded weights, no file
      });
    }));
  }
  const auto gbps = [&](double ms) { return image_bytes / (ms * 1e-3) / 1e9; };
  std::printf("image %.1f MB, weights file %.1f MB\n", image_bytes / 1e6,
              static_cast<double>(std::filesystem::file_size(file)) / 1e6);
  print_rows({{"model built with seeded weights (no file, no fetch)", median(build), 0},
              {"local load, file in the page cache", median(warm), gbps(median(warm))},
              {"local load, file evicted from the page cache", median(cold), gbps(median(cold))}});

  ModelConfig remote = config;
  remote.weights = (dir / "fetcher" / "weights.safetensors").string();  // absent: fetched or fail
  for (const std::string& tls : o.tls) {
    const uint16_t port = free_loopback_port();
    const std::string secret = random_secret();
    ChildProcess holder(
        {this_exe_path(), "serve", "--in-process", "--devices", "sim:0", "--models", toml,
         "--socket", (dir / ("run-" + tls) / "s.sock").string(), "--share-weights",
         "127.0.0.1:" + std::to_string(port), "--profile-image-size", "32", "--profile-seq-len",
         "16"},
        environment_with({{"UCX_TLS", ucx_tls(tls)}, {"FERRY_TRANSPORT_SECRET", secret}}),
        /*capture=*/false);
    ScopedEnv env({{"UCX_TLS", ucx_tls(tls)}});
    transport::EndpointOptions eo;
    eo.name = "bench-weights";
    eo.secret = secret;
    eo.timeout = std::chrono::seconds(o.timeout_s);
    // The holder loads and profiles its model first: connect once it listens.
    const auto deadline = BenchClock::now() + std::chrono::seconds(o.timeout_s);
    std::shared_ptr<switch_::WeightFetcher> fetcher;
    while (!fetcher) {
      FERRY_CHECK(holder.running(), "bench-weights: the holder (ferry serve) exited with status ",
                  holder.exit_status());
      FERRY_CHECK(BenchClock::now() < deadline, "bench-weights: the holder did not listen within ",
                  o.timeout_s, " s");
      try {
        transport::EndpointOptions quick = eo;
        quick.timeout = std::chrono::seconds(2);
        fetcher = std::make_shared<switch_::WeightFetcher>("127.0.0.1", port, quick);
      } catch (const transport::TransportError&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    fetcher.reset();
    std::vector<double> connect, fetch, total;
    const switch_::ModelImage::Layout layout{reference->image().nbytes(),
                                             reference->image().fingerprint()};
    std::string holder_name;
    for (int r = 0; r < o.repeat + 1; ++r) {  // the first round warms up
      std::shared_ptr<switch_::WeightFetcher> f;
      const double c =
          time_ms([&] { f = std::make_shared<switch_::WeightFetcher>("127.0.0.1", port, eo); });
      std::vector<std::string> why;
      std::optional<switch_::FetchedWeights> got;
      const double t = time_ms([&] { got = f->fetch(remote, layout, &why); });
      std::string reasons;
      for (const auto& w : why) reasons += " " + w;
      FERRY_CHECK(got.has_value(), "bench-weights: the fetch over ", tls, " failed:", reasons);
      FERRY_CHECK(std::memcmp(got->bytes.data_ptr(), reference->image().host().data_ptr(),
                              reference->weight_bytes()) == 0,
                  "bench-weights: the fetched image differs from the local one");
      std::unique_ptr<ServedModel> built;
      const double whole = time_ms([&] { built = switch_::fetching_loader(f)(remote, {}); });
      FERRY_CHECK(std::memcmp(built->image().host().data_ptr(),
                              reference->image().host().data_ptr(), reference->weight_bytes()) == 0,
                  "bench-weights: the model built over fetched bytes differs from the local one");
      if (r == 0) continue;
      connect.push_back(c);
      fetch.push_back(t);
      total.push_back(whole);
    }
    std::printf("fetched from a `ferry serve --share-weights` process, UCX_TLS=%s:\n",
                ucx_tls(tls).c_str());
    print_rows(
        {{"connect and authenticate", median(connect), 0},
         {"fetch: request to verified bytes in pinned memory", median(fetch), gbps(median(fetch))},
         {"model built over fetched bytes (fetch included)", median(total), gbps(median(total))}});
    std::printf("  fetch / local load: %.2fx the warm load's time, %.2fx the cold load's\n",
                median(total) / median(warm), median(total) / median(cold));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace ferry::bench
