// Weight sharing between serving controllers (weight_share.h). The protocol is three tags on one
// transport connection: a request (a JSON object in a uint8 tensor), its reply (the same), and
// for a fetch the image's bytes as one uint8 tensor sent straight from the holder's pinned image.
#include "ferry/switch/weight_share.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "ferry/core/error.h"

namespace ferry::switch_ {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using transport::PeerId;
using transport::TransportError;

constexpr uint64_t kRequestTag = 1;
constexpr uint64_t kReplyTag = 2;
constexpr uint64_t kBytesTag = 3;
// A request holds at most a few brackets; more means someone is probing the parser.
constexpr size_t kMaxRequestBrackets = 16;
constexpr size_t kMaxEntries = 1024;
constexpr size_t kMaxHolders = 64;
constexpr auto kStopPoll = std::chrono::milliseconds(100);

Tensor text_tensor(const std::string& text) {
  Tensor t = empty({static_cast<int64_t>(text.size())}, TensorOptions().dtype(kUInt8));
  if (!text.empty()) std::memcpy(t.data_ptr(), text.data(), text.size());
  return t;
}

// The JSON object in `t`, or a TransportError naming what is wrong with it.
json parse_message(const Tensor& t, const std::string& what) {
  FERRY_CHECK_AS(TransportError, t.dtype() == kUInt8 && t.dim() == 1, "weight share: expected a ",
                 what, " as a 1-d uint8 tensor, got ", t.dtype(), " ", t.sizes());
  FERRY_CHECK_AS(TransportError, static_cast<size_t>(t.numel()) <= kMaxRequestBytes,
                 "weight share: expected a ", what, " of at most ", kMaxRequestBytes,
                 " bytes, got ", t.numel());
  const Tensor dense = t.contiguous();
  const auto* begin = static_cast<const char*>(dense.data_ptr());
  const std::string_view text(begin, static_cast<size_t>(dense.numel()));
  const size_t brackets = static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return c == '[' || c == '{'; }));
  FERRY_CHECK_AS(TransportError, brackets <= kMaxRequestBrackets, "weight share: expected a ", what,
                 " nested at most ", kMaxRequestBrackets, " brackets, got ", brackets);
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  FERRY_CHECK_AS(TransportError, value.is_object(), "weight share: expected a ", what,
                 " holding a JSON object, got ",
                 value.is_discarded() ? std::string("text that is not JSON") : value.type_name());
  return value;
}

// Field `key` of `object`, of JSON type T, or a TransportError naming the field.
template <typename T>
T field(const json& object, const char* key) {
  const auto it = object.find(key);
  bool ok = it != object.end();
  if constexpr (std::is_same_v<T, std::string>) {
    ok = ok && it->is_string() && it->get_ref<const std::string&>().size() <= 4096;
  } else {
    ok = ok && it->is_number_unsigned();
  }
  FERRY_CHECK_AS(
      TransportError, ok, "weight share: expected field \"", key, "\" (",
      std::is_same_v<T, std::string> ? "a string of at most 4096 bytes" : "an unsigned integer",
      "), got ", it == object.end() ? std::string("none") : it->dump());
  return it->template get<T>();
}

json entry_json(const WeightEntry& e) {
  return json{{"model", e.model},
              {"arch", e.arch},
              {"weights_id", e.weights_id},
              {"nbytes", e.nbytes},
              {"fingerprint", e.fingerprint},
              {"content_hash", e.content_hash},
              {"holders", e.holders}};
}

WeightEntry entry_of(const json& j) {
  WeightEntry e;
  e.model = field<std::string>(j, "model");
  e.arch = field<std::string>(j, "arch");
  e.weights_id = field<std::string>(j, "weights_id");
  e.nbytes = field<uint64_t>(j, "nbytes");
  e.fingerprint = field<uint64_t>(j, "fingerprint");
  e.content_hash = field<uint64_t>(j, "content_hash");
  return e;
}

WeightEntry entry_of(const ModelConfig& config, const ModelImage& image, uint64_t content_hash) {
  WeightEntry e;
  e.model = config.name;
  e.arch = config.arch;
  e.weights_id = weights_id_of(config);
  e.nbytes = image.nbytes();
  e.fingerprint = image.fingerprint();
  e.content_hash = content_hash;
  return e;
}

// Whether `e` holds the weights `config` laid out as `layout` needs; if not, why.
std::optional<std::string> mismatch(const WeightEntry& e, const std::string& model,
                                    const std::string& arch, const std::string& weights_id,
                                    uint64_t nbytes, uint64_t fingerprint) {
  const auto differs = [&](const char* what, const auto& expected, const auto& got) {
    return detail::str_cat(what, ": expected ", expected, ", the holder has ", got);
  };
  if (e.model != model) return differs("model", model, e.model);
  if (e.arch != arch) return differs("arch", arch, e.arch);
  if (e.weights_id != weights_id) return differs("weights", weights_id, e.weights_id);
  if (e.nbytes != nbytes) return differs("image bytes", nbytes, e.nbytes);
  if (e.fingerprint != fingerprint)
    return differs("layout fingerprint", fingerprint, e.fingerprint);
  return std::nullopt;
}

// A holder's clean "no": the connection is still in step, nothing follows the reply.
class Refused : public TransportError {
 public:
  using TransportError::TransportError;
};

void send_message(transport::Endpoint& ep, PeerId peer, uint64_t tag, const json& message) {
  ep.send(text_tensor(message.dump()), peer, tag).wait();
}

}  // namespace

std::pair<std::string, uint16_t> parse_address(const std::string& address, bool any_port) {
  const size_t colon = address.rfind(':');
  bool ok = colon != std::string::npos && colon > 0 && colon + 1 < address.size() &&
            address.size() - colon - 1 <= 5 && address.size() <= 255;
  unsigned long port = 0;
  for (size_t i = colon + 1; ok && i < address.size(); ++i) {
    ok = address[i] >= '0' && address[i] <= '9';
    port = port * 10 + static_cast<unsigned long>(address[i] - '0');
  }
  ok = ok && port >= (any_port ? 0u : 1u) && port <= 65535;
  FERRY_CHECK_AS(TransportError, ok, "weight share: expected an address host:port (port ",
                 any_port ? 0 : 1, "-65535), got \"", address, "\"");
  return {address.substr(0, colon), static_cast<uint16_t>(port)};
}

std::string weights_id_of(const ModelConfig& config) {
  if (config.weights.empty()) return "seed:" + std::to_string(config.seed);
  return "file:" + std::filesystem::path(config.weights).filename().string();
}

uint64_t weights_hash(const void* data, size_t nbytes) {
  constexpr uint64_t kMulA = 0x9E3779B185EBCA87ull;
  constexpr uint64_t kMulB = 0xC2B2AE3D27D4EB4Full;
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t lane[4] = {kMulA + kMulB, kMulB, 1, 0 - kMulA};
  size_t i = 0;
  for (; i + 32 <= nbytes; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t word;
      std::memcpy(&word, bytes + i + 8 * l, sizeof word);
      lane[l] = std::rotl(lane[l] + word * kMulB, 31) * kMulA;
    }
  }
  uint64_t h = std::rotl(lane[0], 1) + std::rotl(lane[1], 7) + std::rotl(lane[2], 12) +
               std::rotl(lane[3], 18);
  h ^= static_cast<uint64_t>(nbytes) * kMulA;
  for (; i < nbytes; ++i) h = (h ^ bytes[i]) * kMulB;
  h ^= h >> 33;
  h *= kMulB;
  h ^= h >> 29;
  return h;
}

// --- the share and directory ------------------------------------------------------------------

struct WeightShare::State {
  WeightShareOptions options;
  std::unique_ptr<transport::Endpoint> endpoint;
  uint16_t port = 0;

  mutable std::mutex mutex;
  struct Offer {
    WeightEntry entry;  // holders: announced ones (this share is implied when bytes are held)
    Tensor bytes;       // the image's pinned bytes, when this share holds them
  };
  std::vector<Offer> offers;
  uint64_t list_rotation = 0;

  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> fetches{0}, accepted{0};
  struct Session {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Session> sessions;  // touched by the acceptor thread only
  std::thread acceptor;

  void say(const std::string& line) const {
    if (options.log) options.log(line);
  }

  void accept_loop() {
    while (!stopping.load()) {
      std::optional<PeerId> peer;
      try {
        peer = endpoint->accept(kStopPoll);
      } catch (const std::exception& e) {
        say(std::string("weight share: accept failed: ") + e.what());
        continue;
      }
      reap_sessions(/*all=*/false);
      if (!peer) continue;
      accepted.fetch_add(1);
      if (sessions.size() >= options.max_clients) {
        say(detail::str_cat("weight share: refusing ", endpoint->peer_name(*peer), ": ",
                            options.max_clients, " clients are connected already"));
        endpoint->disconnect(*peer);
        continue;
      }
      auto done = std::make_shared<std::atomic<bool>>(false);
      sessions.push_back({std::thread([this, p = *peer, done] {
                            serve_session(p);
                            done->store(true);
                          }),
                          done});
    }
    reap_sessions(/*all=*/true);
  }

  void reap_sessions(bool all) {
    for (auto it = sessions.begin(); it != sessions.end();) {
      if (all || it->done->load()) {
        it->thread.join();
        it = sessions.erase(it);
      } else {
        ++it;
      }
    }
  }

  void serve_session(PeerId peer) {
    const std::string who = endpoint->peer_name(peer);
    try {
      while (!stopping.load()) {
        transport::Future<Tensor> request = endpoint->recv(peer, kRequestTag);
        const auto idle_until = Clock::now() + options.idle_timeout;
        bool got = false;
        while (!got && !stopping.load() && Clock::now() < idle_until) {
          got = request.wait_for(kStopPoll);
        }
        if (!got) break;
        Tensor bytes_to_send;
        json reply;
        try {
          reply = answer(parse_message(request.get(), "request"), &bytes_to_send);
        } catch (const TransportError& e) {
          reply = json{{"ok", false}, {"error", e.what()}};
        }
        send_message(*endpoint, peer, kReplyTag, reply);
        if (bytes_to_send.defined()) {
          fetches.fetch_add(1);
          endpoint->send(bytes_to_send, peer, kBytesTag).wait();
        }
      }
    } catch (const std::exception& e) {
      say("weight share: connection with " + who + " ended: " + e.what());
    }
    try {
      endpoint->disconnect(peer);
    } catch (const std::exception&) {
      // already gone
    }
  }

  json answer(const json& request, Tensor* bytes_to_send) {
    const std::string op = field<std::string>(request, "op");
    if (op == "list") return list_reply(/*rotate=*/true);
    if (op == "fetch") {
      const auto model = field<std::string>(request, "model");
      const auto arch = field<std::string>(request, "arch");
      const auto weights_id = field<std::string>(request, "weights_id");
      const auto nbytes = field<uint64_t>(request, "nbytes");
      const auto fingerprint = field<uint64_t>(request, "fingerprint");
      std::lock_guard lock(mutex);
      for (const Offer& offer : offers) {
        if (!offer.bytes.defined() || offer.entry.model != model) continue;
        const auto why = mismatch(offer.entry, model, arch, weights_id, nbytes, fingerprint);
        if (why) return json{{"ok", false}, {"error", "weight share: " + model + ": " + *why}};
        *bytes_to_send = offer.bytes;
        return json{{"ok", true}, {"content_hash", offer.entry.content_hash}};
      }
      return json{{"ok", false},
                  {"error", "weight share: this holder has no weights of model '" + model + "'"}};
    }
    if (op == "announce") {
      const WeightEntry announced = entry_of(request);
      const std::string address = field<std::string>(request, "address");
      parse_address(address);
      std::lock_guard lock(mutex);
      auto it = std::find_if(offers.begin(), offers.end(), [&](const Offer& o) {
        return !mismatch(o.entry, announced.model, announced.arch, announced.weights_id,
                         announced.nbytes, announced.fingerprint);
      });
      if (it == offers.end()) {
        FERRY_CHECK_AS(TransportError, offers.size() < kMaxEntries,
                       "weight share: expected at most ", kMaxEntries,
                       " models in the directory, it is full");
        offers.push_back({announced, Tensor()});
        it = std::prev(offers.end());
      }
      FERRY_CHECK_AS(TransportError, it->entry.content_hash == announced.content_hash,
                     "weight share: announced weights of '", announced.model, "' hash to ",
                     announced.content_hash, ", but the directory's hash to ",
                     it->entry.content_hash, ": not the same weights");
      auto& holders = it->entry.holders;
      if (std::find(holders.begin(), holders.end(), address) == holders.end()) {
        FERRY_CHECK_AS(TransportError, holders.size() < kMaxHolders,
                       "weight share: expected at most ", kMaxHolders, " holders of '",
                       announced.model, "', it has that many");
        holders.push_back(address);
      }
      say("weight share: " + address + " holds '" + announced.model + "' too");
      return json{{"ok", true}};
    }
    throw TransportError("weight share: expected op \"list\", \"fetch\" or \"announce\", got \"" +
                         op + "\"");
  }

  json list_reply(bool rotate) {
    std::lock_guard lock(mutex);
    json entries = json::array();
    for (const Offer& offer : offers) {
      WeightEntry e = offer.entry;
      if (offer.bytes.defined()) e.holders.insert(e.holders.begin(), "");
      // Each listing starts at the next holder, so that fetchers spread over them.
      if (!e.holders.empty()) {
        std::rotate(
            e.holders.begin(),
            e.holders.begin() + static_cast<std::ptrdiff_t>(list_rotation % e.holders.size()),
            e.holders.end());
      }
      entries.push_back(entry_json(e));
    }
    if (rotate) ++list_rotation;
    return json{{"ok", true}, {"entries", entries}};
  }
};

WeightShare::WeightShare(WeightShareOptions options) : state_(std::make_shared<State>()) {
  state_->options = std::move(options);
  transport::EndpointOptions endpoint = state_->options.endpoint;
  endpoint.max_message_bytes = std::min<uint64_t>(endpoint.max_message_bytes, kMaxRequestBytes);
  state_->endpoint = std::make_unique<transport::Endpoint>(endpoint);
  state_->port = state_->endpoint->listen(state_->options.host, state_->options.port);
  state_->acceptor = std::thread([s = state_.get()] { s->accept_loop(); });
}

WeightShare::~WeightShare() {
  state_->stopping.store(true);
  state_->acceptor.join();
}

uint16_t WeightShare::port() const { return state_->port; }

void WeightShare::offer(const ModelConfig& config, const ServedModel& model) {
  const ModelImage& image = model.image();
  FERRY_CHECK(image.nbytes() > 0, "WeightShare::offer: model '", config.name,
              "' has no weights to offer");
  const Tensor& bytes = image.host();
  WeightEntry entry = entry_of(config, image, weights_hash(bytes.data_ptr(), image.nbytes()));
  std::lock_guard lock(state_->mutex);
  auto it = std::find_if(state_->offers.begin(), state_->offers.end(),
                         [&](const State::Offer& o) { return o.entry.model == config.name; });
  if (it == state_->offers.end()) {
    state_->offers.push_back({std::move(entry), bytes});
  } else {
    *it = {std::move(entry), bytes};
  }
}

std::vector<WeightEntry> WeightShare::entries() const {
  const json reply = state_->list_reply(/*rotate=*/false);
  std::vector<WeightEntry> out;
  for (const json& j : reply["entries"]) {
    WeightEntry e = entry_of(j);
    e.holders = j["holders"].get<std::vector<std::string>>();
    out.push_back(std::move(e));
  }
  return out;
}

uint64_t WeightShare::fetches_served() const { return state_->fetches.load(); }
uint64_t WeightShare::connections_accepted() const { return state_->accepted.load(); }

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
