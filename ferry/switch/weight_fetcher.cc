// WeightFetcher and fetching_loader (weight_share.h): a model's image taken from the holders a
// directory lists, checked, into pinned memory; the model's own file when none has it.
#include <map>
#include <mutex>
#include <utility>

#include "ferry/core/error.h"
#include "ferry/switch/weight_share.h"
#include "ferry/switch/weight_share_wire.h"

namespace ferry::switch_ {

using namespace weight_wire;

// --- the fetcher ------------------------------------------------------------------------------

struct WeightFetcher::State {
  std::unique_ptr<transport::Endpoint> endpoint;
  std::string directory_address;
  std::optional<PeerId> directory;        // connected again after a failed exchange
  std::map<std::string, PeerId> holders;  // connected holders other than the directory
  std::mutex mutex;

  json call(PeerId peer, const json& request) {
    transport::Future<Tensor> reply = endpoint->recv(peer, kReplyTag);
    send_message(*endpoint, peer, kRequestTag, request);
    json value = parse_message(reply.get(), "reply");
    const auto ok = value.find("ok");
    if (ok == value.end() || !ok->is_boolean() || !ok->get<bool>()) {
      const auto error = value.find("error");
      throw Refused(error != value.end() && error->is_string()
                        ? error->get<std::string>()
                        : "weight share: the reply is neither ok nor an error: " + value.dump());
    }
    return value;
  }

  PeerId directory_peer() {
    if (!directory) {
      const auto [host, port] = parse_address(directory_address);
      directory = endpoint->connect(host, port);
    }
    return *directory;
  }

  PeerId holder_peer(const std::string& holder) {
    if (holder.empty()) return directory_peer();
    auto it = holders.find(holder);
    if (it != holders.end()) return it->second;
    const auto [host, port] = parse_address(holder);
    const PeerId peer = endpoint->connect(host, port);
    holders.emplace(holder, peer);
    return peer;
  }

  // Closes the connection to `holder` after a failed exchange, which may have left a late
  // reply or late bytes on it; the next use connects again.
  void forget(const std::string& holder) {
    std::optional<PeerId> peer;
    if (holder.empty()) {
      peer = std::exchange(directory, std::nullopt);
    } else if (auto it = holders.find(holder); it != holders.end()) {
      peer = it->second;
      holders.erase(it);
    }
    if (!peer) return;
    try {
      endpoint->disconnect(*peer);
    } catch (const std::exception&) {
      // already gone
    }
  }
};

WeightFetcher::WeightFetcher(const std::string& host, uint16_t port,
                             transport::EndpointOptions options)
    : state_(std::make_unique<State>()) {
  state_->endpoint = std::make_unique<transport::Endpoint>(std::move(options));
  state_->directory_address = host + ":" + std::to_string(port);
  state_->directory_peer();
}

WeightFetcher::~WeightFetcher() = default;

std::vector<WeightEntry> WeightFetcher::list() {
  std::lock_guard lock(state_->mutex);
  json reply;
  try {
    reply = state_->call(state_->directory_peer(), json{{"op", "list"}});
  } catch (const Refused&) {
    throw;
  } catch (const TransportError&) {
    state_->forget("");
    throw;
  }
  const auto entries = reply.find("entries");
  FERRY_CHECK_AS(TransportError, entries != reply.end() && entries->is_array(),
                 "weight share: expected a list of entries from the directory, got ", reply.dump());
  std::vector<WeightEntry> out;
  for (const json& j : *entries) {
    WeightEntry e = entry_of(j);
    const auto holders = j.find("holders");
    FERRY_CHECK_AS(TransportError, holders != j.end() && holders->is_array(),
                   "weight share: expected the holders of '", e.model, "', got ", j.dump());
    for (const json& h : *holders) {
      FERRY_CHECK_AS(TransportError, h.is_string(), "weight share: expected a holder address, got ",
                     h.dump());
      e.holders.push_back(h.get<std::string>());
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::optional<FetchedWeights> WeightFetcher::fetch(const ModelConfig& config,
                                                   const ModelImage::Layout& layout,
                                                   std::vector<std::string>* why) {
  const auto note = [&](const std::string& reason) {
    if (why) why->push_back(reason);
  };
  std::vector<WeightEntry> entries;
  try {
    entries = list();
  } catch (const TransportError& e) {
    note(std::string("directory ") + state_->directory_address + ": " + e.what());
    return std::nullopt;
  }
  const std::string weights_id = weights_id_of(config);
  std::lock_guard lock(state_->mutex);
  bool listed = false;
  for (const WeightEntry& entry : entries) {
    if (entry.model != config.name) continue;
    listed = true;
    if (const auto differs = mismatch(entry, config.name, config.arch, weights_id, layout.nbytes,
                                      layout.fingerprint)) {
      note("directory " + state_->directory_address + ": " + *differs);
      continue;
    }
    for (const std::string& holder : entry.holders) {
      const std::string name = holder.empty() ? state_->directory_address : holder;
      const auto start = Clock::now();
      try {
        const PeerId peer = state_->holder_peer(holder);
        const json reply = state_->call(peer, json{{"op", "fetch"},
                                                   {"model", config.name},
                                                   {"arch", config.arch},
                                                   {"weights_id", weights_id},
                                                   {"nbytes", layout.nbytes},
                                                   {"fingerprint", layout.fingerprint}});
        const Tensor got =
            state_->endpoint->recv(peer, kBytesTag, TensorOptions().pinned_memory(true)).get();
        FERRY_CHECK_AS(TransportError,
                       got.dtype() == kUInt8 && got.dim() == 1 &&
                           static_cast<uint64_t>(got.numel()) == layout.nbytes,
                       "expected uint8 [", layout.nbytes, "], got ", got.dtype(), " ", got.sizes());
        const uint64_t hash = weights_hash(got.data_ptr(), layout.nbytes);
        FERRY_CHECK_AS(TransportError, hash == entry.content_hash, "the bytes hash to ", hash,
                       ", expected ", entry.content_hash, ": corrupted or not the listed weights");
        const auto reply_hash = reply.find("content_hash");
        FERRY_CHECK_AS(TransportError, reply_hash != reply.end() && *reply_hash == hash,
                       "the holder's hash ",
                       reply_hash != reply.end() ? reply_hash->dump() : "none",
                       " is not the directory's ", entry.content_hash);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        return FetchedWeights{got, name, ms};
      } catch (const Refused& e) {
        note(name + ": " + e.what());
      } catch (const TransportError& e) {
        note(name + ": " + e.what());
        state_->forget(holder);
      }
    }
  }
  if (!listed)
    note("directory " + state_->directory_address + ": no holder of '" + config.name + "'");
  return std::nullopt;
}

void WeightFetcher::announce(const std::string& address, const ModelConfig& config,
                             const ServedModel& model) {
  parse_address(address);
  const ModelImage& image = model.image();
  FERRY_CHECK(image.nbytes() > 0, "WeightFetcher::announce: model '", config.name,
              "' has no weights");
  const WeightEntry e =
      entry_of(config, image, weights_hash(image.host().data_ptr(), image.nbytes()));
  json request = entry_json(e);
  request.erase("holders");
  request["op"] = "announce";
  request["address"] = address;
  std::lock_guard lock(state_->mutex);
  try {
    state_->call(state_->directory_peer(), request);
  } catch (const Refused&) {
    throw;
  } catch (const TransportError&) {
    state_->forget("");
    throw;
  }
}

ModelLoader fetching_loader(std::shared_ptr<WeightFetcher> fetcher,
                            std::function<void(const std::string&)> log) {
  return [fetcher = std::move(fetcher), log = std::move(log)](const ModelConfig& config,
                                                              ZooInputShape shape) {
    const auto say = [&](const std::string& line) {
      if (log) log(line);
    };
    return std::make_unique<ServedModel>(
        config, shape, [&](const ModelImage::Layout& layout) -> Tensor {
          std::vector<std::string> why;
          const std::optional<FetchedWeights> got = fetcher->fetch(config, layout, &why);
          std::string reasons;
          for (const std::string& r : why) reasons += (reasons.empty() ? "" : "; ") + r;
          if (got) {
            say(detail::str_cat("model '", config.name, "': weights fetched from ", got->holder,
                                " (", layout.nbytes, " bytes in ", got->milliseconds, " ms",
                                reasons.empty() ? "" : "; skipped " + reasons, ")"));
            return got->bytes;
          }
          say("model '" + config.name + "': weights loaded here (" + reasons + ")");
          return Tensor();
        });
  };
}

}  // namespace ferry::switch_
