// WeightShare (weight_share.h): a controller's model images offered to other controllers, and
// the directory of their holders, served on background threads over ferry/transport.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <utility>

#include "ferry/core/error.h"
#include "ferry/switch/weight_share.h"
#include "ferry/switch/weight_share_wire.h"

namespace ferry::switch_ {

using namespace weight_wire;

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
    const std::string op = string_field(request, "op");
    if (op == "list") return list_reply(/*rotate=*/true);
    if (op == "fetch") {
      const auto model = string_field(request, "model");
      const auto arch = string_field(request, "arch");
      const auto weights_id = string_field(request, "weights_id");
      const auto nbytes = unsigned_field(request, "nbytes");
      const auto fingerprint = unsigned_field(request, "fingerprint");
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
      const std::string address = string_field(request, "address");
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

}  // namespace ferry::switch_
