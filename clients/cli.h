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
#include <istream>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
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
  // --manifest: tune every (chain, bucket) a manifest lists instead of one
  // chain (RunTuneManifest).
  std::string manifest;
  std::string state;  // Finished items; "" is <manifest>.state.
  double budget_total_seconds =
      0;  // 0: no limit; else no item starts after it.
};

// `kfuse chain`: a composite's chain, built locally (no server).
struct ChainOptions {
  // softmax|log_softmax|layer_norm|rms_norm|add_rms_norm|add_layer_norm|
  // linear|attention|cross_entropy|nll_loss.
  std::string composite;
  std::string dtype = "f32";    // f32|bf16|f16 (attention: bf16|f16).
  // x's last dim (linear: in-features); required but by attention. Unset,
  // not 0, where not given: a flag given is checked whatever its value.
  std::optional<int64_t> width;
  std::optional<int64_t> rows;  // A static row count, or:
  std::string rows_symbol;      // a runtime row count of this symbol,
  std::optional<int64_t> rows_hint;  // tuned for this many rows (0: the server's default).
  std::optional<double> eps;    // Norms; default 1e-5 (layer) or 1e-6 (RMS).
  // softmax: x * scale first; attention: the scores', default 1/sqrt(head_dim).
  std::optional<double> scale;
  // softmax: a bool input "mask" of x's shape; attention: [batch, heads, seq_q, seq_k].
  bool mask = false;
  // softmax: "bias" of x's shape; layer norms: [width]; linear: [out_features];
  // attention: [batch, heads, seq_q, seq_k].
  bool bias = false;
  bool no_weight = false;  // Norms: no "weight" input.
  // linear: the weight is [out_features, width]; required.
  std::optional<int64_t> out_features;
  // linear: none|relu|silu|gelu|gelu_tanh|sigmoid|tanh; "" is none.
  std::string activation;
  // attention: q [batch, heads, seq_q, head_dim], k [batch, kv_heads, seq_k,
  // head_dim], v [batch, kv_heads, seq_k, value_dim]; --seq sets both
  // lengths, --seq-symbol makes them one runtime size (tuned at seq_hint).
  std::optional<int64_t> batch, heads, kv_heads, seq, seq_q, seq_k, head_dim, value_dim;
  std::string seq_symbol;
  std::optional<int64_t> seq_hint;
  bool causal = false;   // attention: key j <= query i.
  bool lengths = false;  // attention: an i32 input "lengths" [batch].
  bool lse = false;      // attention: the log-sum-exp output too.
  // cross_entropy (x, logits) and nll_loss (logp, log-probabilities), each
  // [rows, width] with "labels" [rows]: the labels' dtype (i32|i64; "" is
  // i64), the label that loses nothing (unset: -100), none|sum|mean ("" is
  // mean).
  std::string labels_dtype;
  std::optional<int64_t> ignore_index;
  std::string reduction;
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

// `kfuse cache explain`: why a chain would miss.
struct CacheExplainOptions {
  std::string chain_path;
  std::string arch;    // As compile's.
  std::string policy;  // heuristic|quick|full; "" keeps the file's.
};

// `kfuse cache export`: exactly one of keys, prefix and all.
struct CacheExportOptions {
  std::vector<std::string> keys;  // Artifact keys or unique prefixes.
  std::string prefix;
  bool all = false;
  std::string out;  // -o: the bundle file.
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
int RunCacheExplain(const GlobalOptions& g, const CacheExplainOptions& o,
                    CliIo& io);
int RunCacheExport(const GlobalOptions& g, const CacheExportOptions& o,
                   CliIo& io);
// Exit 1 when the server rejected any entry (each is printed).
int RunCacheImport(const GlobalOptions& g, const std::string& bundle_path,
                   CliIo& io);
// `kfuse tune --manifest`: exit 1 when any item failed.
int RunTuneManifest(const GlobalOptions& g, const TuneOptions& o, CliIo& io);
int RunDevice(const GlobalOptions& g, CliIo& io);
int RunHealth(const GlobalOptions& g, const std::string& service, CliIo& io);
int RunVersion(const GlobalOptions& g, CliIo& io);
int RunChain(const GlobalOptions& g, const ChainOptions& o, CliIo& io);
// Exit 0: the incident no longer reproduces (or, without a GPU, the compile
// step passed); 1: it reproduces; 2: not a readable bundle.
int RunRepro(const GlobalOptions& g, const ReproOptions& o, CliIo& io);

// Store bundles (`kfuse cache export|import`, cli_cache.cc): the 16 bytes
// kBundleMagic, then each kfuse.v1.StoreEntry as a varint length and the
// message (the framing of google/protobuf/util/delimited_message_util.h).
inline constexpr char kBundleMagic[] = "KFUSE-BUNDLE-v1\n";
inline constexpr size_t kBundleMagicSize = sizeof(kBundleMagic) - 1;  // 16.
// Larger entries are refused as damage rather than allocated.
inline constexpr int64_t kMaxBundleEntryBytes = int64_t{1} << 30;

// Reads a bundle one entry at a time.
class BundleReader {
 public:
  // NOT_FOUND naming the path; DATA_LOSS naming it when the file does not
  // start with kBundleMagic.
  static absl::StatusOr<std::unique_ptr<BundleReader>> Open(
      const std::string& path);
  // The next entry; false at the end. DATA_LOSS naming the file, the entry
  // and its byte offset when the file is truncated or an entry does not
  // parse.
  absl::StatusOr<bool> Next(kfuse::v1::StoreEntry* entry);
  int64_t offset() const { return offset_; }  // Bytes read so far.
  int64_t entries() const { return entries_; }

 private:
  BundleReader(std::string path, std::unique_ptr<std::istream> in)
      : path_(std::move(path)), in_(std::move(in)) {}
  absl::Status Damaged(int64_t at, const std::string& why) const;

  std::string path_;
  std::unique_ptr<std::istream> in_;
  int64_t offset_ = 0;
  int64_t entries_ = 0;
};

// `kfuse tune --manifest` (cli_manifest.cc): the manifest's items, resume
// bookkeeping and the progress line, all testable without a server.

// What an entry of the manifest does not say: the command's flags.
struct ManifestDefaults {
  std::string mode = "quick";  // quick|full.
  std::string arch;
  double budget_seconds = 0;
};

// One (chain, bucket) to tune.
struct ManifestItem {
  int entry = 0;      // Index in "entries".
  int bucket = -1;    // Index in the entry's "buckets"; -1 without buckets.
  std::string label;  // "relu.json n=4096" for progress lines.
  kfuse::v1::CompileRequest request;  // Hints, target and policy applied.
  std::string id;  // ManifestItemId(request): the state file's key.
};

// The manifest's items in order. `base_dir` resolves relative chain paths.
// INVALID_ARGUMENT naming the entry index and field for a bad manifest.
absl::StatusOr<std::vector<ManifestItem>> ParseManifest(
    const std::string& json, const std::string& what,
    const std::string& base_dir, const ManifestDefaults& defaults);
absl::StatusOr<std::vector<ManifestItem>> LoadManifest(
    const std::string& path, const ManifestDefaults& defaults);
// Sets the hint of every dim whose symbol the bucket names (inputs and op
// shapes); INVALID_ARGUMENT naming a symbol the chain does not have.
absl::Status ApplyBucket(
    const std::vector<std::pair<std::string, int64_t>>& bucket,
    kfuse::v1::Chain* chain);
// Hex sha256 of the chain (hints included: the bucket), mode and target.
std::string ManifestItemId(const kfuse::v1::CompileRequest& request);

// The state file: one JSON object a line per finished item. A missing file
// is an empty state; lines that do not parse (a run killed mid-write) are
// skipped.
absl::StatusOr<std::set<std::string>> LoadTuneState(const std::string& path);
// Appends the item's line ("outcome": tuned | stored) and flushes it.
absl::Status AppendTuneState(const std::string& path, const ManifestItem& item,
                             const std::string& outcome,
                             const std::string& key);
// "[2/6] relu.json n=4096  trials 3/12  elapsed 1m02s  ETA 3m10s"; ETA "-"
// when negative (not known yet).
std::string FormatManifestProgress(size_t index, size_t count,
                                   const std::string& label, uint32_t done,
                                   uint32_t total, double elapsed_seconds,
                                   double eta_seconds);
// 62.4 -> "1m02s"; 3725 -> "1h02m05s"; 4.2 -> "4s".
std::string FormatDuration(double seconds);

// Shared by the subcommands (cli_common.cc).

// "sm_90" / "sm_90a" / "90" into a Target; INVALID_ARGUMENT otherwise,
// naming `flag` (or, when empty, only the value: for a file's field).
absl::StatusOr<kfuse::v1::Target> ParseArch(const std::string& arch, const char* flag = "--arch");
// "heuristic" | "quick" | "full" | "default"; an error names `flag`.
absl::StatusOr<kfuse::v1::TuningPolicy::Mode> ParsePolicyMode(
    const std::string& mode, const char* flag = "--policy");
// --budget (or `flag`): a finite number of seconds >= 0 (0: the server's
// default, or no limit); INVALID_ARGUMENT naming the flag otherwise, NaN
// included.
absl::Status CheckBudget(double seconds, const char* flag = "--budget");
// A kernel entry name safe to use as a file name ([A-Za-z0-9_]+).
bool IsSafeFileStem(const std::string& s);
// `{"error": {"code": ..., "message": ...}}` and a newline: what --json
// prints for an error.
void PrintJsonError(const absl::Status& status, std::ostream& out);
// Prints `status` with a hint where one helps (on io.err, or as a JSON
// object on io.out with --json) and returns the exit code for it.
int ReportError(const GlobalOptions& g, const absl::Status& status, CliIo& io);
// As ReportError, for an error found before anything was sent (a bad flag,
// or a file a flag names): returns kExitUsage whatever the code.
int ReportUsageError(const GlobalOptions& g, const absl::Status& status, CliIo& io);
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
