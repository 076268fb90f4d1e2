// Authentication of a transport connection by a shared secret, without sending it: each side
// proves it knows the secret with an HMAC-SHA256 over both sides' fresh nonces and its role
// (OpenSSL's libcrypto computes it). Guarantees: a proof made for one connection (nonces) or one
// role does not verify for another; verification compares in constant time.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "ferry/transport/wire.h"

namespace ferry::transport {

using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

// Fresh random bytes from the kernel (getrandom); raises TransportError if it fails.
Nonce make_nonce();

enum class Role { server, client };

Proof make_proof(const std::string& secret, Role role, const Nonce& client_nonce,
                 const Nonce& server_nonce);
bool verify_proof(const std::string& secret, Role role, const Nonce& client_nonce,
                  const Nonce& server_nonce, const Proof& proof);

// The secret to use: `given` when not empty, else $FERRY_TRANSPORT_SECRET; raises TransportError
// naming both when neither is set (a connection is never accepted without one).
std::string resolve_secret(const std::string& given);

}  // namespace ferry::transport
