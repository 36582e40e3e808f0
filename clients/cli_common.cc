#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "clients/cli.h"
#include "clients/json.h"
#include "clients/verify.h"
#include "core/status.h"
#include "google/protobuf/struct.pb.h"

namespace kfuse::client {

absl::StatusOr<kfuse::v1::Target> ParseArch(const std::string& arch, const char* flag) {
  kfuse::v1::Target target;
  absl::string_view s = arch;
  if (s.empty() || s == "native") return target;  // 0: the server's GPU.
  absl::ConsumePrefix(&s, "sm_") || absl::ConsumePrefix(&s, "compute_");
  if (absl::ConsumeSuffix(&s, "a")) target.set_arch_specific(true);
  uint32_t cc = 0;
  if (!absl::SimpleAtoi(s, &cc) || cc < 50 || cc > 200) {
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
  if (std::isfinite(seconds) && seconds >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " ", seconds, ": expected a number of seconds >= 0"));
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

int ReportError(const GlobalOptions& g, const absl::Status& status, CliIo& io) {
  std::string hint;
  if (status.code() == absl::StatusCode::kUnavailable) {
    hint = absl::StrCat("is kfused running at ", g.server,
                        "? (set --server or KFUSE_SERVER)");
  } else if (status.code() == absl::StatusCode::kDeadlineExceeded) {
    hint = absl::StrCat("no answer within ", g.timeout_seconds,
                        " s; raise --timeout");
  }
  if (g.json) {
    google::protobuf::Struct error;
    auto& fields = *(*error.mutable_fields())["error"]
                        .mutable_struct_value()
                        ->mutable_fields();
    fields["code"].set_string_value(absl::StatusCodeToString(status.code()));
    fields["message"].set_string_value(std::string(status.message()));
    io.out << ToJson(error, /*pretty=*/false) << "\n";
  }
  io.err << "kfuse: " << absl::StatusCodeToString(status.code()) << ": "
         << status.message() << "\n";
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

absl::StatusOr<std::unique_ptr<Client>> ConnectFromFlags(
    const GlobalOptions& g) {
  if (!(g.timeout_seconds > 0)) {
    return absl::InvalidArgumentError("--timeout must be positive (seconds)");
  }
  // gRPC would take port 99999 as 34463 (mod 2^16) and fail to connect there.
  if (const size_t colon = g.server.rfind(':'); colon != std::string::npos && !absl::StartsWith(g.server, "unix:")) {
    uint32_t port = 0;
    const std::string digits = g.server.substr(colon + 1);
    if (!digits.empty() && absl::SimpleAtoi(digits, &port) && port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("--server ", g.server, ": port ", digits, " is past 65535"));
    }
  }
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
