#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "clients/cli.h"
#include "clients/cli_format.h"
#include "clients/json.h"
#include "clients/verify.h"
#include "core/decimal.h"
#include "core/limits.h"
#include "core/status.h"
#include "core/utf8.h"
#include "google/protobuf/struct.pb.h"

namespace kfuse::client {

absl::StatusOr<kfuse::v1::Target> ParseArch(const std::string& arch, const char* flag) {
  kfuse::v1::Target target;
  absl::string_view s = arch;
  if (s.empty() || s == "native") return target;  // 0: the server's GPU.
  absl::ConsumePrefix(&s, "sm_") || absl::ConsumePrefix(&s, "compute_");
  if (absl::ConsumeSuffix(&s, "a")) target.set_arch_specific(true);
  // Digits only: SimpleAtoi alone takes "+90", " 90" and "090".
  const bool digits = !s.empty() && s[0] != '0' && std::all_of(s.begin(), s.end(), [](char ch) {
    return absl::ascii_isdigit(static_cast<unsigned char>(ch));
  });
  uint32_t cc = 0;
  if (!digits || !absl::SimpleAtoi(s, &cc) || cc < 50 || cc > 200) {
    return absl::InvalidArgumentError(absl::StrCat(*flag != '\0' ? absl::StrCat(flag, " ", arch) : absl::StrCat("'", arch, "'"),
                                                   ": expected sm_XY or sm_XYa (sm_80, sm_90a, ...)"));
  }
  target.set_compute_capability(cc);
  return target;
}

absl::StatusOr<kfuse::v1::TuningPolicy::Mode> ParsePolicyMode(
    const std::string& mode, const char* flag) {
  const std::string m = absl::AsciiStrToLower(mode);
  if (m == "heuristic") return kfuse::v1::TuningPolicy::MODE_HEURISTIC;
  if (m == "quick") return kfuse::v1::TuningPolicy::MODE_QUICK;
  if (m == "full") return kfuse::v1::TuningPolicy::MODE_FULL;
  if (m == "default") return kfuse::v1::TuningPolicy::MODE_UNSPECIFIED;
  return absl::InvalidArgumentError(absl::StrCat(
      flag, " '", mode, "': expected heuristic, quick or full"));
}

absl::Status CheckBudget(double seconds, const char* flag) {
  if (std::isfinite(seconds) && seconds >= 0 && seconds <= kMaxBudgetSeconds) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(flag, " ", ShortestDecimal(seconds), ": expected a number of seconds from 0 to ",
                                                 kMaxBudgetSeconds, " (0: the server's default)"));
}

bool IsSafeFileStem(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') {
      return false;
    }
  }
  return true;
}

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kExitUnavailable;
    default:
      return kExitFailed;
  }
}

void PrintJsonError(const absl::Status& status, std::ostream& out) {
  google::protobuf::Struct error;
  auto& fields = *(*error.mutable_fields())["error"].mutable_struct_value()->mutable_fields();
  fields["code"].set_string_value(absl::StatusCodeToString(status.code()));
  // A string field must be UTF-8 (protobuf drops what is not): bytes that
  // are not, from a flag or a file, are written as \x escapes.
  fields["message"].set_string_value(IsUtf8(status.message()) ? std::string(status.message())
                                                                : absl::CHexEscape(status.message()));
  out << ToJson(error, /*pretty=*/false) << "\n";
}

int ReportError(const GlobalOptions& g, const absl::Status& status, CliIo& io) {
  std::string hint;
  if (status.code() == absl::StatusCode::kUnavailable) {
    hint = absl::StrCat("is kfused running at ", g.server,
                        "? (set --server or KFUSE_SERVER)");
    // A TLS handshake that failed reads as a closed socket or an SSL error:
    // the server is there, and the flags are what to check.
    bool handshake = false;
    for (absl::string_view word : {"SSL", "ssl", "TLS", "handshake", "certificate", "wrong version number",
                                   "Socket closed"}) {
      handshake = handshake || absl::StrContains(status.message(), word);
    }
    if (handshake) {
      const bool tls = g.tls || !g.tls_ca.empty() || !g.tls_cert.empty() || !g.tls_key.empty();
      absl::StrAppend(&hint, "\nkfuse: if it is, ",
                      tls ? "check that it serves TLS, --tls-ca signs its certificate, and that "
                            "--tls-cert and --tls-key are given where it asks for client certificates"
                          : "it may serve TLS: give --tls or --tls-ca (and --tls-cert, --tls-key where "
                            "it asks for client certificates)");
    }
  } else if (status.code() == absl::StatusCode::kUnauthenticated) {
    hint = g.token.empty() && g.token_file.empty()
               ? "give kfused's bearer token with --token-file (or KFUSE_TOKEN)"
               : "kfused did not accept the token given (--token-file, --token or KFUSE_TOKEN): check it";
  } else if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    hint = absl::StrCat("no answer within ", g.timeout_seconds,
                        " s; raise --timeout");
  }
  if (g.json) PrintJsonError(status, io.out);
  // Escaped: the text may come from a server or a file, and must not drive
  // the terminal.
  io.err << "kfuse: " << absl::StatusCodeToString(status.code()) << ": "
         << PrintableLines(status.message()) << "\n";
  if (!hint.empty()) io.err << "kfuse: " << hint << "\n";
  return ExitCodeFor(status);
}

int ReportUsageError(const GlobalOptions& g, const absl::Status& status, CliIo& io) {
  ReportError(g, status, io);
  return kExitUsage;
}

namespace {

absl::StatusOr<std::string> ReadFlagFile(const std::string& path, const char* flag) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, " ", text.status().message()));
  return text;
}

}  // namespace

absl::Status ApplySecurityFlags(const GlobalOptions& g, ClientOptions& options) {
  options.tls = g.tls || !g.tls_ca.empty() || !g.tls_cert.empty() || !g.tls_key.empty();
  if (!g.tls_ca.empty()) {
    KFUSE_ASSIGN_OR_RETURN(options.tls_root_certs_pem, ReadFlagFile(g.tls_ca, "--tls-ca"));
  }
  if (g.tls_cert.empty() != g.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!g.tls_cert.empty()) {
    KFUSE_ASSIGN_OR_RETURN(options.tls_cert_chain_pem, ReadFlagFile(g.tls_cert, "--tls-cert"));
    KFUSE_ASSIGN_OR_RETURN(options.tls_private_key_pem, ReadFlagFile(g.tls_key, "--tls-key"));
  }
  options.token = std::string(absl::StripAsciiWhitespace(g.token));
  if (!g.token_file.empty()) {
    KFUSE_ASSIGN_OR_RETURN(std::string text, ReadFlagFile(g.token_file, "--token-file"));
    options.token = std::string(absl::StripAsciiWhitespace(text.substr(0, text.find('\n'))));
    if (options.token.empty()) return absl::InvalidArgumentError("--token-file: the first line is empty");
  }
  if (!g.verify_key.empty()) {
    absl::StatusOr<PublicKey> key = LoadPinnedKey(g.verify_key);
    if (!key.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--verify-key: ", key.status().message()));
    }
    options.verify_key = *key;
  }
  return absl::OkStatus();
}

namespace {

// gRPC reduces a TCP port mod 2^16 (HOST:99999 connects to 34463, HOST:-1 to
// 65535): a port past 65535 or with a sign is refused. Targets of other
// schemes (unix:, unix-abstract:, vsock:) end in what is no TCP port; a
// bare IPv6 address has none; a service name (HOST:https) is left to gRPC.
absl::Status CheckPort(const std::string& server) {
  absl::string_view t = server;
  for (absl::string_view other : {"unix:", "unix-abstract:", "vsock:"}) {
    if (absl::StartsWith(t, other)) return absl::OkStatus();
  }
  for (absl::string_view scheme : {"dns:", "ipv4:", "ipv6:"}) {
    if (!absl::ConsumePrefix(&t, scheme)) continue;
    if (absl::ConsumePrefix(&t, "//")) {  // dns://AUTHORITY/HOST:PORT
      const size_t slash = t.find('/');
      t = slash == absl::string_view::npos ? absl::string_view() : t.substr(slash + 1);
    }
    break;
  }
  for (absl::string_view a : absl::StrSplit(t, ',')) {  // ipv4: and ipv6: may list several.
    const size_t colon = a.rfind(':');
    if (colon == absl::string_view::npos) continue;
    if (!absl::StartsWith(a, "[") && a.find(':') != colon) continue;  // A bare IPv6 address.
    if (absl::StartsWith(a, "[") && a.rfind(']') > colon) continue;     // [IPv6] without a port.
    absl::string_view port = a.substr(colon + 1);
    const bool sign = !port.empty() && (port[0] == '-' || port[0] == '+');
    if (sign) port.remove_prefix(1);
    if (port.empty() || port.find_first_not_of("0123456789") != absl::string_view::npos) continue;
    if (sign || port.size() > 5 || std::stoi(std::string(port)) > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("--server ", server, ": the port must be 0 to 65535"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> ConnectFromFlags(
    const GlobalOptions& g) {
  if (!(g.timeout_seconds > 0)) {
    return absl::InvalidArgumentError("--timeout must be positive (seconds)");
  }
  KFUSE_RETURN_IF_ERROR(CheckPort(g.server));
  ClientOptions options;
  options.address = g.server;
  options.deadline = absl::Seconds(g.timeout_seconds);
  options.client_name = "kfuse-cli";
  KFUSE_RETURN_IF_ERROR(ApplySecurityFlags(g, options));
  return Client::Connect(options);
}

kfuse::v1::CompileResponse WithoutBinaries(kfuse::v1::CompileResponse r) {
  for (auto& k : *r.mutable_plan()->mutable_kernels()) {
    k.clear_cubin();
    k.clear_ptx();
  }
  return r;
}

}  // namespace kfuse::client
