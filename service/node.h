// The composition root of a kfuse node: builds the concrete store, compiler,
// tuning runner and pipeline from options, so main() stays a few lines and
// tests can build a node with the same code.
//
//   NodeOptions o; o.store_path = "/tmp/k.db"; o.no_gpu = true;
//   KFUSE_ASSIGN_OR_RETURN(auto node, ServiceNode::Create(o));
//   KernelServiceImpl service(node->pipeline(), {});
#ifndef KFUSE_SERVICE_NODE_H_
#define KFUSE_SERVICE_NODE_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cache/store.h"
#include "plan/signing.h"
#include "service/fleet_tier.h"
#include "service/metrics.h"
#include "service/pipeline.h"
#include "service/tuning_start.h"
#include "tuner/compiler.h"
#include "tuner/retry_start_runner.h"
#include "tuner/runner.h"
#include "tuner/runner_pool.h"

namespace kfuse {

struct NodeOptions {
  std::string store_path;  // Empty: the per-user default.
  int64_t max_message_bytes = int64_t{64} << 20;  // gRPC's, both ways.
  int64_t store_max_bytes = int64_t{4} << 30;
  bool no_gpu = false;
  bool read_only = false;
  int device = 0;
  // GPUs to tune on, one worker each: "" (just `device`), "all", or "0,1".
  // GPUs of another model than the first are left out (they would not share
  // its results), with a warning.
  std::string devices;
  int64_t gpu_memory_budget = int64_t{8} << 30;
  // Tuning waits while other processes keep a GPU busier than this
  // (0..1, NVML's per-process SM use) or leave less than gpu_memory_budget
  // free; 1: never waits. Past idle.max_wait_seconds a tuning job gives up
  // ("deferred") and the request gets the heuristic kernel.
  double tune_max_gpu_busy = 1.0;
  IdlePolicy idle;
  std::string worker_path;
  std::string node;
  // Ed25519 key file that signs every plan answered. Empty: <store>.signing-key,
  // created (mode 0600) on first start.
  std::string signing_key_path;
  // Where failed builds leave repro bundles (service/repro.h): "<store>"
  // stands for the store's path; empty: no bundles.
  std::string repro_dir = "<store>.repro";
  int repro_max_bundles = 100;
  // Prometheus /metrics on this address ("host:port"); empty: not served
  // (the metrics are still kept, for tests).
  std::string metrics_address;
  // The fleet store (PostgreSQL, libpq conninfo); empty: local only.
  std::string fleet_dsn;
  bool fleet_read_only = false;  // A serving-only node: never publishes or leases.
  // Public keys (hex, one a line) whose fleet entries and imports are
  // trusted besides this node's own. Empty: only its own.
  std::string trusted_keys_path;
  // A tuning lease outlives a node that died while tuning by at most this.
  double fleet_lease_seconds = 120;
};

class ServiceNode {
 public:
  static absl::StatusOr<std::unique_ptr<ServiceNode>> Create(const NodeOptions& options);

  ~ServiceNode();

  Pipeline* pipeline() { return pipeline_.get(); }
  // A GPU tunes now. A node whose GPU's worker did not start with it tries
  // again (60 s, doubling, up to an hour) and tunes once one starts.
  bool can_tune() const;
  const std::string& store_path() const { return store_path_; }
  std::string device_name() const;  // Empty while no GPU tunes.
  std::string no_gpu_reason() const;  // Empty while a GPU tunes.
  // Why no tuning task can be taken now (no GPU; its worker not started,
  // or started and its ceilings not yet measured; every GPU out of the
  // rotation); nullopt when one can. What health kfuse.v1.Tuning and
  // kfuse_tuning_available follow.
  std::optional<std::string> TuningUnavailable() const;
  const SigningKey& signing_key() const { return signing_key_; }
  const std::string& signing_key_path() const { return signing_key_path_; }
  const TrustedKeys& trusted_keys() const { return trusted_keys_; }
  Metrics& metrics() { return *metrics_; }
  FleetTier* fleet() { return fleet_.get(); }
  // At shutdown, once no call is left: a tuning worker's start in progress
  // (a late GPU's, or a restart after a fault) gives up within a quarter
  // second instead of waiting up to its start timeout for the driver, and
  // none begins. The destructor does this first too.
  void StopWorkerStarts() { stopping_ = true; }

 private:
  ServiceNode() = default;

  std::string store_path_;
  std::string signing_key_path_;
  SigningKey signing_key_;
  TrustedKeys trusted_keys_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<FleetTier> fleet_;
  std::unique_ptr<Compiler> compiler_;
  std::atomic<bool> stopping_{false};  // WorkerOptions::stop of every worker; outlives them.
  std::unique_ptr<RetryStartRunner> runner_;
  std::unique_ptr<Pipeline> pipeline_;
  std::unique_ptr<TuningStarter> starter_;  // With runner_; stopped first.
};

// $XDG_CACHE_HOME/kfuse/kfuse.db, else ~/.cache/kfuse/kfuse.db; creates the folder.
absl::StatusOr<std::string> DefaultStorePath();

// The signing key a node with these options uses, loaded or created where
// NodeOptions says; `path` (if not null) receives the file's path.
absl::StatusOr<SigningKey> LoadNodeSigningKey(const NodeOptions& options, std::string* path = nullptr,
                                             bool* created = nullptr);

}  // namespace kfuse

#endif  // KFUSE_SERVICE_NODE_H_
