// Model weights shared between serving controllers on different hosts, over ferry/transport.
//
// A WeightShare runs in a controller: it offers the pinned images of the controller's models to
// peers and keeps the directory of who holds which model's weights (itself, and the controllers
// that announced they hold them too, typically after fetching them from it). A controller that
// starts elsewhere asks a directory with a WeightFetcher, takes a model's image from a holder
// straight into its own pinned memory and builds the model over those bytes, instead of reading
// its weights file (fetching_loader plugs this into a serving handler).
//
// Guarantees:
// - bytes are taken only for the same model: name, architecture, weights identity (the weights
//   file's name or the seed), byte count and layout fingerprint must all equal the fetcher's,
//   and the bytes must hash to what the holder computed when it offered them;
// - every wait is bounded by the endpoint's timeout; a holder that refuses, fails or goes away
//   mid-fetch is skipped for the next one, and with no holder left the model is loaded from its
//   own weights file (the reasons are logged);
// - a request is a JSON object of at most kMaxRequestBytes, checked before use; a bad one is
//   answered with an error naming what was expected, and the connection stays usable;
// - at most max_clients connections are served at once; an idle one is closed after
//   idle_timeout; destruction stops serving within about a tenth of a second plus the time a
//   transfer in flight needs to finish or fail.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ferry/switch/model_config.h"
#include "ferry/switch/served_model.h"
#include "ferry/transport/endpoint.h"

namespace ferry::switch_ {

inline constexpr size_t kMaxRequestBytes = 64 * 1024;

// One model's weights as a directory lists them.
struct WeightEntry {
  std::string model;
  std::string arch;
  std::string weights_id;  // weights_id_of(config)
  uint64_t nbytes = 0;
  uint64_t fingerprint = 0;   // ModelImage::fingerprint
  uint64_t content_hash = 0;  // weights_hash of the image bytes
  // Where to fetch them: "host:port" of each holder; the directory itself is listed as "".
  std::vector<std::string> holders;
};

// What identifies a configuration's weights beyond its architecture: "file:<file name>" for a
// weights file, "seed:<seed>" for seeded initialization.
std::string weights_id_of(const ModelConfig& config);

// "host:port" split into host and port (1-65535, or 0 too when `any_port`: a port to listen
// on); TransportError naming the text otherwise.
std::pair<std::string, uint16_t> parse_address(const std::string& address, bool any_port = false);

// A 64-bit hash of `nbytes` bytes (four independent multiply-rotate lanes, ~memory speed), to
// catch bytes corrupted or mixed up in transit; not a defence against a malicious holder, which
// authentication keeps out.
uint64_t weights_hash(const void* data, size_t nbytes);

struct WeightShareOptions {
  transport::EndpointOptions endpoint;
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port
  size_t max_clients = 16;
  std::chrono::milliseconds idle_timeout{30000};
  std::function<void(const std::string&)> log;
};

class WeightShare {
 public:
  // Listens on options.host:port and serves on background threads until destroyed.
  explicit WeightShare(WeightShareOptions options);
  ~WeightShare();
  WeightShare(const WeightShare&) = delete;
  WeightShare& operator=(const WeightShare&) = delete;

  uint16_t port() const;
  // Offers `model`'s weights (its image's pinned host bytes, kept alive while offered) as
  // `config`'s; hashes them once here. A model offered again replaces the earlier offer.
  void offer(const ModelConfig& config, const ServedModel& model);
  // The directory: every offered model, with this share ("") and announced holders.
  std::vector<WeightEntry> entries() const;
  // Fetches answered with bytes (counted as the bytes start out) and connections accepted.
  uint64_t fetches_served() const;
  uint64_t connections_accepted() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

struct FetchedWeights {
  Tensor bytes;  // uint8 [nbytes], pinned
  std::string holder;
  double milliseconds = 0;  // request to verified bytes
};

class WeightFetcher {
 public:
  // Connects to the directory at host:port (raises TransportError as Endpoint::connect does).
  WeightFetcher(const std::string& host, uint16_t port, transport::EndpointOptions options = {});
  ~WeightFetcher();
  WeightFetcher(const WeightFetcher&) = delete;
  WeightFetcher& operator=(const WeightFetcher&) = delete;

  // The directory's entries.
  std::vector<WeightEntry> list();
  // `config`'s weights laid out as `layout`, from the first holder that has them; nothing when
  // none does, with each holder's reason appended to `why`.
  std::optional<FetchedWeights> fetch(const ModelConfig& config, const ModelImage::Layout& layout,
                                      std::vector<std::string>* why = nullptr);
  // Tells the directory that the share at `address` ("host:port", reachable from its other
  // clients) holds `model`'s weights too; raises TransportError if the directory refuses.
  void announce(const std::string& address, const ModelConfig& config, const ServedModel& model);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A ModelLoader that fetches each model's weights through `fetcher` and falls back to the
// model's own weights file or seed; `log` hears where each model came from and why.
ModelLoader fetching_loader(std::shared_ptr<WeightFetcher> fetcher,
                            std::function<void(const std::string&)> log = {});

}  // namespace ferry::switch_
