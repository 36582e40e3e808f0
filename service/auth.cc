#include "service/auth.h"

#include <netdb.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sodium.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fstream>
#include <memory>
#include <sstream>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kfuse {
namespace {

constexpr size_t kMinTokenLength = 16;

std::array<uint8_t, 32> Digest(absl::string_view s) {
  std::array<uint8_t, 32> d;
  crypto_hash_sha256(d.data(), reinterpret_cast<const unsigned char*>(s.data()), s.size());
  return d;
}

}  // namespace

absl::StatusOr<TokenSet> TokenSet::FromText(absl::string_view text) {
  if (sodium_init() < 0) return absl::InternalError("libsodium failed to initialise");
  TokenSet set;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    if (line.size() < kMinTokenLength) {
      return absl::InvalidArgumentError(absl::StrCat("token file line ", line_no, ": a token needs at least ",
                                                     kMinTokenLength, " characters"));
    }
    set.digests_.push_back(Digest(line));
  }
  if (set.digests_.empty()) return absl::InvalidArgumentError("the token file holds no token");
  return set;
}

absl::StatusOr<TokenSet> TokenSet::LoadFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat("cannot read token file ", path));
  if ((st.st_mode & 007) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("token file ", path, " is readable by others; chmod o-rwx it"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read token file ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<TokenSet> set = FromText(text.str());
  if (!set.ok()) return absl::Status(set.status().code(), absl::StrCat(path, ": ", set.status().message()));
  return set;
}

absl::Status TokenSet::Check(absl::string_view authorization) const {
  if (authorization.empty()) {
    return absl::UnauthenticatedError("this server requires a token: send metadata 'authorization: Bearer <token>'");
  }
  absl::string_view token = authorization;
  if (!absl::ConsumePrefix(&token, "Bearer ") && !absl::ConsumePrefix(&token, "bearer ")) {
    return absl::UnauthenticatedError("the authorization metadata is not 'Bearer <token>'");
  }
  token = absl::StripAsciiWhitespace(token);
  // Digests make every comparison the same length; every token is compared
  // so the time does not say which one matched.
  std::array<uint8_t, 32> d = Digest(token);
  int matched = 0;
  for (const auto& t : digests_) matched |= (sodium_memcmp(t.data(), d.data(), d.size()) == 0);
  sodium_memzero(d.data(), d.size());
  if (!matched) return absl::UnauthenticatedError("the token is not accepted by this server");
  return absl::OkStatus();
}

bool IsUnixSocketAddress(absl::string_view address) {
  return absl::StartsWith(address, "unix:") || absl::StartsWith(address, "unix-abstract:");
}

absl::Status CheckListenAddress(absl::string_view flag, absl::string_view address) {
  if (IsUnixSocketAddress(address)) return absl::OkStatus();
  const size_t colon = address.rfind(':');
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", address, ": ", why));
  };
  if (colon == absl::string_view::npos || colon == 0) return bad("expected HOST:PORT or unix:PATH");
  const absl::string_view port = address.substr(colon + 1);
  int value = 0;
  if (port.empty() || port.size() > 5 || !absl::c_all_of(port, absl::ascii_isdigit) ||
      !absl::SimpleAtoi(port, &value) || value > 65535) {
    return bad("the port must be a number from 0 (any free port) to 65535");
  }
  return absl::OkStatus();
}

namespace {

// A socket at unix:PATH that answers a connect is another server's: gRPC
// would unlink it and listen in its place, leaving that server orphaned. A
// stale socket (refused) is gRPC's to replace.
absl::Status CheckUnixSocketFree(absl::string_view flag, absl::string_view address) {
  absl::string_view path = address;
  if (!absl::ConsumePrefix(&path, "unix:")) return absl::OkStatus();  // unix-abstract: has no file.
  if (absl::StartsWith(path, "//")) path.remove_prefix(2);            // unix:///abs/path
  sockaddr_un sun{};
  struct stat st;
  if (path.empty() || path.size() >= sizeof(sun.sun_path) || ::stat(std::string(path).c_str(), &st) != 0 ||
      !S_ISSOCK(st.st_mode)) {
    return absl::OkStatus();
  }
  sun.sun_family = AF_UNIX;
  std::memcpy(sun.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::OkStatus();
  const bool answered = connect(fd, reinterpret_cast<const sockaddr*>(&sun), sizeof(sun)) == 0;
  close(fd);
  if (!answered) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("cannot listen on ", address, " (", flag, "): a server answers on that socket (another kfused?)"));
}

}  // namespace

absl::Status CheckAddressFree(absl::string_view flag, absl::string_view address) {
  if (IsUnixSocketAddress(address)) return CheckUnixSocketFree(flag, address);
  if (!CheckListenAddress(flag, address).ok()) return absl::OkStatus();
  const size_t colon = address.rfind(':');
  std::string host(address.substr(0, colon));
  const std::string port(address.substr(colon + 1));
  if (port == "0") return absl::OkStatus();
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found) != 0) {
    return absl::OkStatus();
  }
  // As the listener: it serves when any of the addresses binds.
  bool bound = false, in_use = false, not_here = false;
  for (addrinfo* a = found; a != nullptr && !bound; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      bound = true;  // Not ours to judge: the listener reports it.
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // As the listener does.
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0) {
      bound = true;
    } else if (errno == EADDRINUSE) {
      in_use = true;
    } else if (errno == EADDRNOTAVAIL) {
      not_here = true;
    } else {
      bound = true;  // Another error: the listener's to report.
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (bound || (!in_use && !not_here)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("cannot listen on ", address, " (", flag, "): ",
                   in_use ? "the address is in use (another kfused?)" : "not an address of this host"));
}

absl::Status CheckMetricsAddress(absl::string_view flag, absl::string_view address) {
  if (IsUnixSocketAddress(address)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", address, ": metrics are served over TCP, not a unix socket"));
  }
  if (!address.empty() && absl::c_all_of(address, absl::ascii_isdigit)) {  // A bare port.
    return CheckListenAddress(flag, absl::StrCat("0.0.0.0:", address)).ok()
               ? absl::OkStatus()
               : absl::InvalidArgumentError(
                     absl::StrCat(flag, " ", address, ": the port must be a number from 0 (any free port) to 65535"));
  }
  return CheckListenAddress(flag, address);
}

std::string WithPort(absl::string_view address, int port) {
  if (IsUnixSocketAddress(address)) return std::string(address);
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return std::string(address);
  return absl::StrCat(address.substr(0, colon + 1), port);
}

bool IsLoopbackAddress(absl::string_view address) {
  if (IsUnixSocketAddress(address)) return true;
  absl::string_view host = address;
  if (absl::ConsumePrefix(&host, "[")) {
    size_t end = host.find(']');
    if (end == absl::string_view::npos) return false;
    return host.substr(0, end) == "::1";
  }
  size_t colon = host.rfind(':');
  if (colon != absl::string_view::npos) host = host.substr(0, colon);
  if (host == "localhost") return true;
  // 127.x.y.z, digits and dots only.
  if (!absl::StartsWith(host, "127.")) return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.') {
      ++dots;
    } else if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return dots == 3;
}

absl::Status CheckTlsKeyPair(const std::string& key_pem, const std::string& cert_pem) {
  // Parsed as gRPC's TLS will, so that a pair it cannot use is named here,
  // before the store is made, not as an address the listener could not bind.
  const auto bio = [](const std::string& pem) {
    return std::unique_ptr<BIO, decltype(&BIO_free)>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                                                      &BIO_free);
  };
  auto key_bio = bio(key_pem), cert_bio = bio(cert_pem);
  if (key_bio == nullptr || cert_bio == nullptr) return absl::ResourceExhaustedError("out of memory reading PEM");
  // No passphrase: OpenSSL's default would ask the terminal for one.
  pem_password_cb* no_passphrase = [](char*, int, int, void*) { return 0; };
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, no_passphrase, nullptr), &EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr),
                                                   &X509_free);
  const bool key_read = key != nullptr, cert_read = cert != nullptr;
  const bool match = key_read && cert_read && X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();  // What failed is said below; nothing is left for gRPC's TLS to report.
  if (!key_read) {
    return absl::InvalidArgumentError(
        "--tls_key holds no private key this build can read (a certificate, or a key protected by a passphrase?)");
  }
  if (!cert_read) return absl::InvalidArgumentError("--tls_cert holds no certificate");
  if (!match) {
    return absl::InvalidArgumentError("--tls_key is not the key of the first certificate in --tls_cert");
  }
  return absl::OkStatus();
}

}  // namespace kfuse
