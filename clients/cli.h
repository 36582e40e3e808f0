// The `kfuse` subcommands as plain functions of parsed options, so that
// kfuse_main.cc only wires CLI11 and the commands are testable without it.
//
//   CliIo io{std::cout, std::cerr, isatty(1)};
//   GlobalOptions g;  g.server = "127.0.0.1:7420";
//   CompileOptions c; c.chain_path = "examples/relu_fma_f32.json";
//   return RunCompile(g, c, io);  // a process exit code (ExitCode)
#ifndef KFUSE_CLIENTS_CLI_H_
#define KFUSE_CLIENTS_CLI_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "clients/client.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse::client {

// Process exit codes: scripts tell a refused request from a dead server.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,       // The server refused or failed the request.
  kExitUsage = 2,        // Bad flags or a bad input file; nothing was sent.
  kExitUnavailable = 3,  // No server at the address, or the deadline passed.
};

struct CliIo {
  std::ostream& out;
  std::ostream& err;
  bool out_is_tty = false;
};

struct GlobalOptions {
  std::string server = kDefaultAddress;
  bool json = false;  // Machine output: the proto JSON mapping.
  double timeout_seconds = 60;
  // Transport security (any of the TLS files turns TLS on).
  bool tls = false;
  std::string tls_ca;         // PEM roots that sign the server's certificate.
  std::string tls_cert;       // Client certificate (mutual TLS).
  std::string tls_key;        // Its private key.
  std::string token_file;     // "authorization: Bearer <first line>".
  std::string token;          // KFUSE_TOKEN; token_file wins.
  std::string verify_key;     // 64 hex digits or a file: refuse unverified plans.
};

struct CompileOptions {
  std::string chain_path;
  std::string plan_out;       // -o: binary KernelPlan.
  std::string plan_json_out;  // --plan-json: KernelPlan in JSON.
  std::string cubin_dir;      // <dir>/<entry>.cubin per kernel.
  std::string arch;           // "sm_90", "sm_90a", "90"; "" keeps the file's.
  std::string policy;         // heuristic|quick|full; "" keeps the file's.
  double budget_seconds = 0;  // 0 keeps the file's.
  bool source = false;        // Ask for and write/print the CUDA C++.
};

struct TuneOptions {
  std::string chain_path;
  std::string arch;
  std::string mode = "quick";  // quick|full.
  double budget_seconds = 0;
  bool force = false;
};

// `kfuse chain`: a composite's chain, built locally (no server).
struct ChainOptions {
  // softmax|log_softmax|layer_norm|rms_norm|add_rms_norm|add_layer_norm.
  std::string composite;
  std::string dtype = "f32";    // f32|bf16|f16.
  int64_t width = 0;            // The normalised (last) dim; required.
  std::optional<int64_t> rows;  // A static row count, or:
  std::string rows_symbol;      // a runtime row count of this symbol,
  int64_t rows_hint = 0;        // tuned for this many rows.
  std::optional<double> eps;    // Norms; default 1e-5 (layer) or 1e-6 (RMS).
  std::optional<double> scale;  // softmax: x * scale first.
  bool mask = false;            // softmax: a bool input "mask" of x's shape.
  bool bias = false;       // softmax: "bias" of x's shape; layer norms: [W].
  bool no_weight = false;  // Norms: no "weight" input.
  std::string out;         // -o: write the JSON here instead of printing it.
};

struct CacheLsOptions {
  std::string prefix;
  uint32_t limit = 0;
};

struct CacheRmOptions {
  std::vector<std::string> keys;  // Full keys or unique prefixes.
  bool all = false;
};

// `kfuse repro`: replays a repro bundle that kfused left (service/repro.h),
// locally, without a server.
struct ReproOptions {
  std::string bundle_dir;
  // Judge this build's regenerated source instead of the recorded kernel.cu
  // (after a generator fix).
  bool regenerated = false;
  std::string worker;  // kfuse-worker; "": beside kfuse or in the build tree.
  int device = 0;      // CUDA device for wrong_result, fault and timeout.
};

int RunCompile(const GlobalOptions& g, const CompileOptions& o, CliIo& io);
int RunTune(const GlobalOptions& g, const TuneOptions& o, CliIo& io);
int RunCacheLs(const GlobalOptions& g, const CacheLsOptions& o, CliIo& io);
int RunCacheShow(const GlobalOptions& g, const std::string& key, CliIo& io);
int RunCacheRm(const GlobalOptions& g, const CacheRmOptions& o, CliIo& io);
int RunDevice(const GlobalOptions& g, CliIo& io);
int RunHealth(const GlobalOptions& g, const std::string& service, CliIo& io);
int RunVersion(const GlobalOptions& g, CliIo& io);
int RunChain(const GlobalOptions& g, const ChainOptions& o, CliIo& io);
// Exit 0: the incident no longer reproduces (or, without a GPU, the compile
// step passed); 1: it reproduces; 2: not a readable bundle.
int RunRepro(const GlobalOptions& g, const ReproOptions& o, CliIo& io);

// Shared by the subcommands (cli_common.cc).

// "sm_90" / "sm_90a" / "90" into a Target; INVALID_ARGUMENT otherwise.
absl::StatusOr<kfuse::v1::Target> ParseArch(const std::string& arch);
// "heuristic" | "quick" | "full" | "default".
absl::StatusOr<kfuse::v1::TuningPolicy::Mode> ParsePolicyMode(
    const std::string& mode);
// A kernel entry name safe to use as a file name ([A-Za-z0-9_]+).
bool IsSafeFileStem(const std::string& s);
// Prints `status` with a hint where one helps (on io.err, or as a JSON
// object on io.out with --json) and returns the exit code for it.
int ReportError(const GlobalOptions& g, const absl::Status& status, CliIo& io);
// The exit code for a status coming back from the server.
int ExitCodeFor(const absl::Status& status);
// TLS files, token and verify key from the flags into `options`;
// INVALID_ARGUMENT naming the flag for an unreadable file or a bad key.
absl::Status ApplySecurityFlags(const GlobalOptions& g, ClientOptions& options);
absl::StatusOr<std::unique_ptr<Client>> ConnectFromFlags(
    const GlobalOptions& g);
// The response without cubin and PTX bytes: what --json prints.
kfuse::v1::CompileResponse WithoutBinaries(kfuse::v1::CompileResponse r);

}  // namespace kfuse::client

#endif  // KFUSE_CLIENTS_CLI_H_
