// The weight share's wire (weight_share.h): three tags on one transport connection (a request
// as a JSON object in a uint8 tensor, its reply the same way, and a fetch's image bytes as one
// uint8 tensor), the checked reading of messages and fields, and an entry's identity. Shared by
// the share (weight_share.cc) and the fetcher (weight_fetcher.cc); not part of the public API.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ferry/switch/weight_share.h"

namespace ferry::switch_::weight_wire {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using transport::PeerId;
using transport::TransportError;

inline constexpr uint64_t kRequestTag = 1;
inline constexpr uint64_t kReplyTag = 2;
inline constexpr uint64_t kBytesTag = 3;
// A request holds at most a few brackets; more means someone is probing the parser.
inline constexpr size_t kMaxRequestBrackets = 16;
inline constexpr size_t kMaxEntries = 1024;
inline constexpr size_t kMaxHolders = 64;
inline constexpr auto kStopPoll = std::chrono::milliseconds(100);

Tensor text_tensor(const std::string& text);
// The JSON object in `t`, or a TransportError naming what is wrong with it.
json parse_message(const Tensor& t, const std::string& what);
// Field `key` of `object` as a string (at most 4096 bytes) or an unsigned integer, or a
// TransportError naming the field.
std::string string_field(const json& object, const char* key);
uint64_t unsigned_field(const json& object, const char* key);

json entry_json(const WeightEntry& e);
WeightEntry entry_of(const json& j);  // without holders
WeightEntry entry_of(const ModelConfig& config, const ModelImage& image, uint64_t content_hash);
// Why `e` does not hold the weights described, or nothing when it does.
std::optional<std::string> mismatch(const WeightEntry& e, const std::string& model,
                                    const std::string& arch, const std::string& weights_id,
                                    uint64_t nbytes, uint64_t fingerprint);

// A holder's clean "no": the connection is still in step, nothing follows the reply.
class Refused : public TransportError {
 public:
  using TransportError::TransportError;
};

void send_message(transport::Endpoint& ep, PeerId peer, uint64_t tag, const json& message);

}  // namespace ferry::switch_::weight_wire
