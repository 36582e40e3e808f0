// kfused: the kfuse service. Serves kfuse.v1.KernelService with its SQLite
// store; tunes on the local GPU when there is one, answers with heuristic
// kernels when there is none.
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include "absl/algorithm/container.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "core/log.h"
#include "core/version.h"
#include "service/auth.h"
#include "service/interceptors.h"
#include "service/library_logs.h"
#include "service/node.h"
#include "service/server.h"
#include "service/tuning_health.h"
#include "tuner/nvrtc_compiler.h"
#include "tuner/runner_pool.h"

ABSL_FLAG(std::string, address, "127.0.0.1:7420", "host:port to listen on (loopback by default)");
ABSL_FLAG(std::string, store, "", "SQLite store path (default: $XDG_CACHE_HOME/kfuse/kfuse.db or ~/.cache/kfuse/kfuse.db)");
ABSL_FLAG(int64_t, store_max_bytes, int64_t{4} << 30, "store size cap; least recently used entries are evicted");
ABSL_FLAG(int, threads, 2,
          "compile and tuning jobs run at once (and as many background tuning jobs, on threads of their own)");
ABSL_FLAG(int, max_queued_jobs, 64, "jobs that may wait beyond the idle job threads; then new misses get RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_queued_admin_calls, 64,
          "explain, delete, import and export calls that may wait for the two admin threads; then "
          "RESOURCE_EXHAUSTED");
ABSL_FLAG(int, nvrtc_max_concurrent, kfuse::kDefaultMaxConcurrentCompiles,
          "NVRTC programs compiling at once in the process (bounds NVRTC's memory)");
ABSL_FLAG(int, max_message_bytes, 64 << 20, "largest request or response message (at least 65536)");
ABSL_FLAG(double, shutdown_grace_seconds, 10,
          "on SIGTERM, how long calls in flight may finish before they are cancelled; keep it below "
          "the service manager's stop timeout");
ABSL_FLAG(bool, no_gpu, false, "never tune: answer every miss with the heuristic kernel");
ABSL_FLAG(bool, read_only, false, "serve from the store only, never compile");
ABSL_FLAG(int, device, 0, "CUDA device ordinal to tune on");
ABSL_FLAG(std::string, devices, "",
          "GPUs to tune on, one worker each: all, or a list such as 0,1 (default: --device); "
          "GPUs of another model than the first are left out");
ABSL_FLAG(double, tune_max_gpu_busy, 1.0,
          "tuning waits while other processes keep the GPU busier than this (0..1) or leave less than "
          "--gpu_memory_budget free; 1: never waits");
ABSL_FLAG(double, tune_max_wait_seconds, 600,
          "with --tune_max_gpu_busy below 1: a tuning job that found no idle GPU this long is deferred "
          "(the request gets the heuristic kernel)");
ABSL_FLAG(double, tuning_health_interval_seconds, 5,
          "how often kfuse.v1.Tuning health is checked: NOT_SERVING while no GPU can take a tuning task");
ABSL_FLAG(int64_t, gpu_memory_budget, int64_t{8} << 30, "GPU memory the tuning worker may use, bytes");
ABSL_FLAG(std::string, worker, "", "path of kfuse-worker (default: beside kfused, or on PATH)");
ABSL_FLAG(std::string, node, "", "this node's name in provenance (default: hostname)");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain of this server; with --tls_key turns TLS on");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: require client certificates signed by it (mutual TLS); needs --tls_cert");
ABSL_FLAG(std::string, auth_tokens_file, "",
          "file of accepted tokens, one a line: every RPC but health must send 'authorization: Bearer <token>'");
ABSL_FLAG(std::string, signing_key, "",
          "Ed25519 key file (64 hex digits) signing every plan; default <store>.signing-key, created once");
ABSL_FLAG(bool, print_public_key, false, "print the plan-signing public key (hex) and exit");
ABSL_FLAG(std::string, repro_dir, "<store>.repro",
          "where failed compiles and failing variants leave repro bundles for `kfuse repro` (empty: none)");
ABSL_FLAG(int, repro_max_bundles, 100, "repro bundles kept; the oldest are removed first");
ABSL_FLAG(std::string, metrics_address, "",
          "serve Prometheus metrics at http://HOST:PORT/metrics (empty: not served)");
ABSL_FLAG(std::string, log_format, "text", "log lines on stderr: text (for people) or json (one object a line)");
ABSL_FLAG(std::string, fleet_dsn, "",
          "fleet store: PostgreSQL conninfo or URI (password from PGPASSWORD/PGPASSFILE); empty: local store only");
ABSL_FLAG(bool, fleet_read_only, false, "read the fleet store, never publish or take tuning leases (reader role)");
ABSL_FLAG(std::string, trusted_keys, "",
          "file of Ed25519 public keys (hex, one a line) whose fleet entries and imports are trusted besides ours");
ABSL_FLAG(double, fleet_lease_seconds, 120,
          "a tuning lease outlives a node that died while tuning by at most this (the holder renews it every "
          "third of this while it tunes)");
ABSL_FLAG(bool, allow_insecure_remote, false,
          "allow listening on a non-loopback address without TLS (tokens and plans then travel in clear)");

namespace {

// A PEM file's text. A directory (which an ifstream reads as empty), an
// empty file, one past 1 MiB (/dev/zero would never end) or one without a
// PEM block is refused here, naming the flag, rather than by the TLS
// library's raw errors once the store is made.
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  constexpr size_t kMaxPemBytes = 1 << 20;
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is a directory"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path));
  std::string text(kMaxPemBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxPemBytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is larger than 1 MiB: not a PEM file"));
  }
  if (!absl::StrContains(text, "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " holds no PEM block (-----BEGIN ...)"));
  }
  return text;
}

// TLS from the flags, or insecure credentials where that is allowed.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(std::string* mode) {
  const std::string cert = absl::GetFlag(FLAGS_tls_cert), key = absl::GetFlag(FLAGS_tls_key);
  const std::string ca = absl::GetFlag(FLAGS_tls_client_ca), address = absl::GetFlag(FLAGS_address);
  if (cert.empty() != key.empty()) return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  if (cert.empty()) {
    if (!ca.empty()) return absl::InvalidArgumentError("--tls_client_ca needs --tls_cert and --tls_key");
    if (!kfuse::IsLoopbackAddress(address) && !absl::GetFlag(FLAGS_allow_insecure_remote)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to listen on ", address,
          " without TLS: anyone on the network could send chains to compile and run on this GPU, and read "
          "tokens and plans in transit. Pass --tls_cert/--tls_key (and --tls_client_ca), listen on loopback "
          "behind a TLS proxy, or pass --allow_insecure_remote if the network is trusted"));
    }
    *mode = "plaintext";
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  auto key_pem = ReadPem(key, "--tls_key");
  if (!key_pem.ok()) return key_pem.status();
  auto cert_pem = ReadPem(cert, "--tls_cert");
  if (!cert_pem.ok()) return cert_pem.status();
  if (absl::Status s = kfuse::CheckTlsKeyPair(*key_pem, *cert_pem); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(s.message(), " (--tls_key ", key, ", --tls_cert ", cert, ")"));
  }
  pair.private_key = *key_pem;
  pair.cert_chain = *cert_pem;
  ssl.pem_key_cert_pairs.push_back(pair);
  *mode = "TLS";
  if (!ca.empty()) {
    auto ca_pem = ReadPem(ca, "--tls_client_ca");
    if (!ca_pem.ok()) return ca_pem.status();
    ssl.pem_root_certs = *ca_pem;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    *mode = "mutual TLS";
  }
  return grpc::SslServerCredentials(ssl);
}

// kfused's own lines (start-up, refusals, shutdown): "kfused: ..." for
// people, or one JSON event each under --log_format=json, so a collector
// reads every line of the stream.
kfuse::LogFormat g_log_format = kfuse::LogFormat::kText;
// `fields` go to the JSON event beside the message (the text line says
// them in words).
void Say(kfuse::LogLevel level, absl::string_view event, const std::string& message,
         std::vector<kfuse::LogField> fields = {}) {
  if (g_log_format == kfuse::LogFormat::kJson) {
    fields.insert(fields.begin(), {"message", message});
    kfuse::LogEvent(level, event, fields);
  } else {
    std::fprintf(stderr, "kfused: %s\n", message.c_str());
  }
}
void Refuse(const std::string& message) { Say(kfuse::LogLevel::kError, "start_failed", message); }

// --metrics_address as HOST:PORT (the HTTP server takes a bare PORT too:
// every address of this host).
std::string MetricsListenAddress(const std::string& flag) {
  return !flag.empty() && absl::c_all_of(flag, absl::ascii_isdigit) ? absl::StrCat("0.0.0.0:", flag) : flag;
}

}  // namespace

int main(int argc, char** argv) {
  // Signals are taken by sigwait below, never by a handler on a random
  // thread, and blocked before any thread starts (gRPC's, once credentials
  // are made): a thread that did not block them would take a SIGTERM sent
  // during the drain and end the process on the spot. A second SIGTERM
  // waits for the drain, which --shutdown_grace_seconds bounds.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  absl::SetProgramUsageMessage("the kfuse kernel-fusion service. kfused --address=127.0.0.1:7420");
  {
    // --help names this file without the build's directories; --version
    // prints the release.
    absl::FlagsUsageConfig usage;
    usage.normalize_filename = [](absl::string_view file) {
      const size_t slash = file.rfind('/');
      return std::string(slash == absl::string_view::npos ? file : file.substr(slash + 1));
    };
    usage.version_string = [] { return absl::StrCat("kfused ", kfuse::kKfuseVersion, "\n"); };
    absl::SetFlagsUsageConfig(std::move(usage));
  }
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  // Deadlock detection bookkeeping cost about 5% of a store hit under load.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  kfuse::LogFormat log_format;
  if (!kfuse::ParseLogFormat(absl::GetFlag(FLAGS_log_format), &log_format)) {
    std::fprintf(stderr, "kfused: --log_format must be text or json\n");
    return 2;
  }
  kfuse::SetLogFormat(log_format);
  g_log_format = log_format;
  if (positional.size() > 1) {
    Refuse(absl::StrCat("unexpected argument '", positional[1], "' (flags are --name=value; see --help)"));
    return 2;
  }
  if (absl::Status s = kfuse::CheckListenAddress("--address", absl::GetFlag(FLAGS_address)); !s.ok()) {
    Refuse(std::string(s.message()));
    return 2;
  }
  if (const std::string metrics = absl::GetFlag(FLAGS_metrics_address); !metrics.empty()) {
    if (absl::Status s = kfuse::CheckMetricsAddress("--metrics_address", metrics); !s.ok()) {
      Refuse(std::string(s.message()));
      return 2;
    }
  }
  if (log_format == kfuse::LogFormat::kJson) kfuse::RouteLibraryLogsToEvents();

  if (absl::GetFlag(FLAGS_print_public_key)) {
    kfuse::NodeOptions ko;
    ko.store_path = absl::GetFlag(FLAGS_store);
    ko.signing_key_path = absl::GetFlag(FLAGS_signing_key);
    std::string key_path;
    bool created = false;
    absl::StatusOr<kfuse::SigningKey> key = kfuse::LoadNodeSigningKey(ko, &key_path, &created);
    if (!key.ok()) {
      Refuse(key.status().ToString());
      return 1;
    }
    // A new key is no node's yet: a mistyped --store must not pass unseen.
    if (created) {
      std::fprintf(stderr, "kfused: created a new signing key %s (no store used one before; check --store)\n",
                   key_path.c_str());
    }
    std::printf("%s\n", key->public_key.Hex().c_str());
    return 0;
  }
  std::string transport;
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = ServerCredentials(&transport);
  if (!creds.ok()) {
    Refuse(creds.status().ToString());
    return 1;
  }
  std::optional<kfuse::TokenSet> tokens;
  if (!absl::GetFlag(FLAGS_auth_tokens_file).empty()) {
    absl::StatusOr<kfuse::TokenSet> t = kfuse::TokenSet::LoadFile(absl::GetFlag(FLAGS_auth_tokens_file));
    if (!t.ok()) {
      Refuse(t.status().ToString());
      return 1;
    }
    tokens = std::move(*t);
  }

  // An ignored SIGCHLD is inherited across exec (a supervisor may leave it
  // so); the kernel would then reap the GPU workers itself, and a worker's
  // exit status could not be read.
  signal(SIGCHLD, SIG_DFL);

  if (absl::GetFlag(FLAGS_nvrtc_max_concurrent) < 1) {
    Refuse("--nvrtc_max_concurrent must be at least 1");
    return 2;
  }
  kfuse::SetMaxConcurrentCompiles(absl::GetFlag(FLAGS_nvrtc_max_concurrent));
  kfuse::NodeOptions opts;
  opts.store_path = absl::GetFlag(FLAGS_store);
  opts.store_max_bytes = absl::GetFlag(FLAGS_store_max_bytes);
  opts.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  opts.no_gpu = absl::GetFlag(FLAGS_no_gpu);
  opts.read_only = absl::GetFlag(FLAGS_read_only);
  opts.device = absl::GetFlag(FLAGS_device);
  opts.devices = absl::GetFlag(FLAGS_devices);
  opts.tune_max_gpu_busy = absl::GetFlag(FLAGS_tune_max_gpu_busy);
  opts.idle.max_wait_seconds = absl::GetFlag(FLAGS_tune_max_wait_seconds);
  if (!(opts.tune_max_gpu_busy >= 0 && opts.tune_max_gpu_busy <= 1)) {  // NaN too.
    Refuse("--tune_max_gpu_busy must be between 0 and 1");
    return 2;
  }
  if (!(opts.idle.max_wait_seconds >= 0 && std::isfinite(opts.idle.max_wait_seconds))) {
    Refuse("--tune_max_wait_seconds must be a finite number of seconds, at least 0");
    return 2;
  }
  // The list's form here, before the store is made; its ordinals against
  // the GPUs there are once the driver is loaded.
  if (!opts.devices.empty() && opts.devices != "all") {
    if (absl::StatusOr<std::vector<int>> d = kfuse::ParseDeviceList(opts.devices, std::numeric_limits<int>::max());
        !d.ok()) {
      Refuse(absl::StrCat("--", d.status().message()));
      return 2;
    }
  }
  if (opts.device < 0) {
    Refuse("--device must be a GPU ordinal (0, 1, ...)");
    return 2;
  }
  opts.gpu_memory_budget = absl::GetFlag(FLAGS_gpu_memory_budget);
  if (opts.gpu_memory_budget <= 0) {
    Refuse("--gpu_memory_budget must be a positive number of bytes");
    return 2;
  }
  opts.worker_path = absl::GetFlag(FLAGS_worker);
  opts.node = absl::GetFlag(FLAGS_node);
  opts.signing_key_path = absl::GetFlag(FLAGS_signing_key);
  opts.repro_dir = absl::GetFlag(FLAGS_repro_dir);
  opts.repro_max_bundles = absl::GetFlag(FLAGS_repro_max_bundles);
  opts.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  opts.fleet_dsn = absl::GetFlag(FLAGS_fleet_dsn);
  opts.fleet_read_only = absl::GetFlag(FLAGS_fleet_read_only);
  opts.trusted_keys_path = absl::GetFlag(FLAGS_trusted_keys);
  opts.fleet_lease_seconds = absl::GetFlag(FLAGS_fleet_lease_seconds);
  if (!(opts.fleet_lease_seconds > 0 && opts.fleet_lease_seconds <= 86400)) {
    Refuse("--fleet_lease_seconds must be more than 0 and at most 86400 (a day)");
    return 2;
  }
  if (opts.repro_max_bundles < 1) {
    Refuse("--repro_max_bundles must be at least 1 (--repro_dir= turns bundles off)");
    return 2;
  }
  if (absl::GetFlag(FLAGS_threads) < 1 || absl::GetFlag(FLAGS_max_queued_jobs) < 0 ||
      absl::GetFlag(FLAGS_max_queued_admin_calls) < 0) {
    Refuse("--threads must be at least 1, --max_queued_jobs and --max_queued_admin_calls at least 0");
    return 2;
  }
  // Below this even a health check's answer does not fit.
  constexpr int kMinMessageBytes = 64 << 10;
  if (absl::GetFlag(FLAGS_max_message_bytes) < kMinMessageBytes) {
    Refuse(absl::StrCat("--max_message_bytes must be at least ", kMinMessageBytes));
    return 2;
  }
  const double grace = absl::GetFlag(FLAGS_shutdown_grace_seconds);
  if (!(grace >= 0 && grace <= 3600)) {
    Refuse("--shutdown_grace_seconds must be between 0 and 3600");
    return 2;
  }
  if (opts.store_max_bytes <= 0) {
    Refuse("--store_max_bytes must be positive");
    return 2;
  }
  const double tuning_interval = absl::GetFlag(FLAGS_tuning_health_interval_seconds);
  if (!(tuning_interval > 0 && tuning_interval <= 3600)) {
    Refuse("--tuning_health_interval_seconds must be more than 0 and at most 3600");
    return 2;
  }
  // A busy address is said at once, before the store opens and the GPU
  // workers start, in one line (the listener's own error is gRPC's).
  for (const auto& [flag, address] :
       {std::pair<std::string, std::string>{"--address", absl::GetFlag(FLAGS_address)},
        {"--metrics_address", MetricsListenAddress(absl::GetFlag(FLAGS_metrics_address))}}) {
    if (address.empty()) continue;
    if (absl::Status s = kfuse::CheckAddressFree(flag, address); !s.ok()) {
      Refuse(std::string(s.message()));
      return 1;
    }
  }
  // Flags first (above): a refusal leaves no store or signing key behind.
  absl::StatusOr<std::unique_ptr<kfuse::ServiceNode>> node = kfuse::ServiceNode::Create(opts);
  if (!node.ok()) {
    Refuse(node.status().ToString());
    return 1;
  }

  kfuse::ServiceOptions sopts;
  sopts.job_threads = absl::GetFlag(FLAGS_threads);
  sopts.max_queued_jobs = absl::GetFlag(FLAGS_max_queued_jobs);
  sopts.max_queued_admin_calls = absl::GetFlag(FLAGS_max_queued_admin_calls);
  sopts.tokens = tokens ? &*tokens : nullptr;
  sopts.signing_key = &(*node)->signing_key();
  sopts.trusted_keys = &(*node)->trusted_keys();
  sopts.metrics = &(*node)->metrics();
  auto service = std::make_unique<kfuse::KernelServiceImpl>((*node)->pipeline(), sopts);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_address), *creds, &port);
  // gRPC binds with SO_REUSEPORT by default, which lets a second kfused share
  // the port and take half the calls; an address in use is an error instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  builder.SetMaxSendMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  builder.RegisterService(service.get());
  builder.experimental().SetInterceptorCreators(kfuse::ServerInterceptors(&(*node)->metrics(), sopts.tokens));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    Refuse(absl::StrCat("cannot listen on ", absl::GetFlag(FLAGS_address),
                        " (in use, or not an address of this host)"));
    return 1;
  }
  bool tuning = (*node)->can_tune();
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus("kfuse.v1.KernelService", true);
  kfuse::Metrics* metrics = &(*node)->metrics();
  kfuse::ServiceNode* service_node = node->get();
  kfuse::TuningHealth tuning_health(
      [service_node] { return service_node->TuningUnavailable(); },
      [health, metrics](bool serving) {
        health->SetServingStatus("kfuse.v1.Tuning", serving);
        metrics->SetTuningAvailable(serving);
      },
      tuning_interval);
  tuning_health.Start();
  const kfuse::LogLevel info = kfuse::LogLevel::kInfo;
  const std::string bound = kfuse::WithPort(absl::GetFlag(FLAGS_address), port);  // :0 is the port taken.
  Say(info, "serving",
      absl::StrCat("serving on ", bound, ", store ", (*node)->store_path(),
                   opts.read_only ? " (read-only)" : "", ", ",
                   tuning ? absl::StrCat("tuning on ", (*node)->device_name())
                          : absl::StrCat("heuristic only: ", (*node)->no_gpu_reason())),
      {{"address", bound},
       {"store", (*node)->store_path()},
       {"read_only", opts.read_only ? "true" : "false"},
       {"tuning", tuning ? "true" : "false"},
       {tuning ? "gpu" : "no_gpu_reason", tuning ? (*node)->device_name() : (*node)->no_gpu_reason()}});
  Say(info, "serving",
      absl::StrCat(transport, ", ", tokens ? absl::StrCat(tokens->size(), " accepted token(s)") : "no token required",
                   "; plans signed by Ed25519 key ", (*node)->signing_key().public_key.Hex(), " (",
                   (*node)->signing_key_path(), ")"),
      {{"transport", transport},
       {"tokens", absl::StrCat(tokens ? tokens->size() : 0)},
       {"signing_key", (*node)->signing_key().public_key.Hex()},
       {"signing_key_path", (*node)->signing_key_path()}});
  if (!opts.metrics_address.empty()) {
    // A bare port listens on every interface.
    const bool bare = absl::c_all_of(opts.metrics_address, absl::ascii_isdigit);
    const std::string url = absl::StrCat(
        "http://",
        kfuse::WithPort(bare ? "0.0.0.0:" + opts.metrics_address : opts.metrics_address,
                        (*node)->metrics().ListeningPort()),
        "/metrics");
    Say(info, "serving", absl::StrCat("metrics on ", url), {{"metrics", url}});
  }
  if ((*node)->fleet() != nullptr) {
    // A read-only node never publishes either (node.cc), whatever its login;
    // a login that cannot write is said when the first connection finds it
    // (fleet_login_read_only), which this line does not wait for.
    const char* fleet_mode = (*node)->fleet()->store().options().read_only ? "read-only" : "read and publish";
    Say(info, "serving",
        absl::StrCat("fleet store ", kfuse::RedactDsn(opts.fleet_dsn), " (", fleet_mode, "), ",
                     (*node)->trusted_keys().size(), " trusted key(s)"),
        {{"fleet", kfuse::RedactDsn(opts.fleet_dsn)},
         {"fleet_mode", fleet_mode},
         {"trusted_keys", absl::StrCat((*node)->trusted_keys().size())}});
  }
  const kfuse::PipelineOptions& po = (*node)->pipeline()->options();
  Say(info, "serving",
      absl::StrCat("repro bundles ", po.repro_dir.empty() ? "off"
                                                           : absl::StrCat("in ", po.repro_dir, " (at most ",
                                                                          po.repro_limits.max_bundles, ")")),
      {{"repro_dir", po.repro_dir.empty() ? "off" : po.repro_dir},
       {"repro_max_bundles", absl::StrCat(po.repro_limits.max_bundles)}});

  int sig = 0;
  sigwait(&stop_signals, &sig);
  Say(info, "stopping",
      absl::StrCat(sig == SIGTERM ? "SIGTERM" : "SIGINT", ": finishing calls in flight (at most ",
                   grace, " s)"));
  tuning_health.Stop();  // It reads the node's runner, released below.
  health->Shutdown();
  const auto deadline =
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(grace));
  server->Shutdown(deadline);
  // No call is left: what still runs or waits (calls cut off by the grace,
  // background tuning) is cancelled, so the drain below ends at the next
  // kernel boundary instead of running out the service manager's timeout.
  const int building = service->building();
  const int jobs = service->CancelJobs();
  (*node)->StopWorkerStarts();  // A late GPU's worker, or a restart, is not waited for.
  if (jobs > 0 || building > 0) {
    Say(kfuse::LogLevel::kWarning, "shutdown_jobs_cancelled",
        absl::StrCat("cancelled at shutdown: ", building, " build(s) running, ", jobs,
                     " job(s) still in the table (queued, or background tuning)"),
        {{"building", absl::StrCat(building)}, {"jobs", absl::StrCat(jobs)}});
  }
  service->Drain();
  server->Wait();
  server.reset();
  service.reset();
  node->reset();  // The store's last hit counts written, the worker stopped.
  Say(info, "stopped", "stopped");
  return 0;
}
