// HMAC-SHA256 proofs for the transport's handshake (see auth.h).
#include "ferry/transport/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ferry::transport {

Nonce make_nonce() {
  Nonce nonce;
  size_t filled = 0;
  while (filled < nonce.size()) {
    const ssize_t n = getrandom(nonce.data() + filled, nonce.size() - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    FERRY_CHECK_AS(TransportError, n > 0, "transport: getrandom failed: ", std::strerror(errno));
    filled += static_cast<size_t>(n);
  }
  return nonce;
}

Proof make_proof(const std::string& secret, Role role, const Nonce& client_nonce,
                 const Nonce& server_nonce) {
  // The role goes first, so that the server's proof can never be replayed as the client's.
  std::array<uint8_t, 1 + 2 * kNonceBytes> message{};
  message[0] = role == Role::server ? 'S' : 'C';
  std::memcpy(message.data() + 1, client_nonce.data(), kNonceBytes);
  std::memcpy(message.data() + 1 + kNonceBytes, server_nonce.data(), kNonceBytes);
  Proof proof{};
  unsigned int length = 0;
  const unsigned char* ok = HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
                                 message.data(), message.size(), proof.data(), &length);
  FERRY_CHECK_AS(TransportError, ok != nullptr && length == proof.size(),
                 "transport: HMAC-SHA256 failed (expected a ", proof.size(), "-byte digest, got ",
                 length, ")");
  return proof;
}

bool verify_proof(const std::string& secret, Role role, const Nonce& client_nonce,
                  const Nonce& server_nonce, const Proof& proof) {
  const Proof expected = make_proof(secret, role, client_nonce, server_nonce);
  return CRYPTO_memcmp(expected.data(), proof.data(), proof.size()) == 0;
}

std::string resolve_secret(const std::string& given) {
  if (!given.empty()) return given;
  const char* env = std::getenv("FERRY_TRANSPORT_SECRET");
  FERRY_CHECK_AS(TransportError, env != nullptr && env[0] != '\0',
                 "transport: expected a shared secret in EndpointOptions::secret or "
                 "FERRY_TRANSPORT_SECRET, but neither is set (connections are never accepted "
                 "without one)");
  return env;
}

}  // namespace ferry::transport
