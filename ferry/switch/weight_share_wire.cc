// The weight share's wire and the public helpers of weight_share.h (see weight_share_wire.h).
#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>

#include "ferry/core/error.h"
#include "ferry/ops/factories.h"
#include "ferry/switch/weight_share_wire.h"

namespace ferry::switch_ {
namespace weight_wire {

Tensor text_tensor(const std::string& text) {
  Tensor t = empty({static_cast<int64_t>(text.size())}, TensorOptions().dtype(kUInt8));
  if (!text.empty()) std::memcpy(t.data_ptr(), text.data(), text.size());
  return t;
}

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

namespace {

const json& checked_field(const json& object, const char* key, bool is_string) {
  const auto it = object.find(key);
  bool ok = it != object.end();
  if (is_string) {
    ok = ok && it->is_string() && it->get_ref<const std::string&>().size() <= 4096;
  } else {
    ok = ok && it->is_number_unsigned();
  }
  FERRY_CHECK_AS(TransportError, ok, "weight share: expected field \"", key, "\" (",
                 is_string ? "a string of at most 4096 bytes" : "an unsigned integer", "), got ",
                 it == object.end() ? std::string("none") : it->dump());
  return *it;
}

}  // namespace

std::string string_field(const json& object, const char* key) {
  return checked_field(object, key, /*is_string=*/true).get<std::string>();
}

uint64_t unsigned_field(const json& object, const char* key) {
  return checked_field(object, key, /*is_string=*/false).get<uint64_t>();
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
  e.model = string_field(j, "model");
  e.arch = string_field(j, "arch");
  e.weights_id = string_field(j, "weights_id");
  e.nbytes = unsigned_field(j, "nbytes");
  e.fingerprint = unsigned_field(j, "fingerprint");
  e.content_hash = unsigned_field(j, "content_hash");
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

void send_message(transport::Endpoint& ep, PeerId peer, uint64_t tag, const json& message) {
  ep.send(text_tensor(message.dump()), peer, tag).wait();
}

}  // namespace weight_wire

using transport::TransportError;

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

}  // namespace ferry::switch_
