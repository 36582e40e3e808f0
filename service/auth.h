// Bearer-token authentication for kfused: the tokens allowed to call, loaded
// from a file, checked against a call's "authorization" metadata in constant
// time. Tokens are kept only as SHA-256 digests and never logged.
//
//   KFUSE_ASSIGN_OR_RETURN(TokenSet tokens, TokenSet::LoadFile("/etc/kfuse/tokens"));
//   absl::Status s = tokens.Check("Bearer s3cret");   // OK or UNAUTHENTICATED
#ifndef KFUSE_SERVICE_AUTH_H_
#define KFUSE_SERVICE_AUTH_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kfuse {

class TokenSet {
 public:
  // One token per line; blank lines and lines starting with '#' are skipped,
  // surrounding whitespace is trimmed. INVALID_ARGUMENT for a file with no
  // token or a token shorter than 16 characters; PERMISSION_DENIED for a file
  // readable by others.
  static absl::StatusOr<TokenSet> LoadFile(const std::string& path);
  static absl::StatusOr<TokenSet> FromText(absl::string_view text);

  // `authorization` is the metadata value, "Bearer <token>". UNAUTHENTICATED
  // (naming what is missing, never echoing the value) unless it carries one
  // of the tokens. Takes the same time whichever token matches.
  absl::Status Check(absl::string_view authorization) const;

  size_t size() const { return digests_.size(); }

 private:
  std::vector<std::array<uint8_t, 32>> digests_;
};

// True for gRPC's unix: and unix-abstract: socket addresses.
bool IsUnixSocketAddress(absl::string_view address);

// OK for unix: sockets and HOST:PORT with a port of 0 (any free one) to
// 65535; otherwise InvalidArgument naming `flag`.
absl::Status CheckListenAddress(absl::string_view flag, absl::string_view address);
// FailedPrecondition naming `flag` when a listener on HOST:PORT could bind
// none of its addresses now: one is in use (another kfused), or none is
// this host's.
// Tried before the service starts (opening the store, starting GPU
// workers), so a second kfused says so at once, in one line. OK for unix:
// sockets, port 0, a host that does not resolve, and other errors, which
// the listener itself reports.
absl::Status CheckAddressFree(absl::string_view flag, absl::string_view address);
// --metrics_address: HOST:PORT as above, or a bare PORT (the HTTP server
// takes both); not a unix: socket.
absl::Status CheckMetricsAddress(absl::string_view flag, absl::string_view address);
// HOST:PORT with its port replaced by `port` (the one bound for :0);
// unix: addresses as they are.
std::string WithPort(absl::string_view address, int port);

// OK when `key_pem` holds a private key and `cert_pem` a certificate (its
// first: the server's own, before any chain) of that key; otherwise
// InvalidArgument naming --tls_key or --tls_cert.
absl::Status CheckTlsKeyPair(const std::string& key_pem, const std::string& cert_pem);

// True for addresses only this host can reach: 127.0.0.0/8, [::1],
// localhost, unix: sockets. kfused refuses others without TLS.
bool IsLoopbackAddress(absl::string_view address);

}  // namespace kfuse

#endif  // KFUSE_SERVICE_AUTH_H_
