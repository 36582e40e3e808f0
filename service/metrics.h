// Prometheus metrics of a kfuse node (prometheus-cpp): requests by RPC and
// status code, hits and misses by tier, compile and tuning times, queue
// depth, verification failures and the fleet store's state.
//
//   KFUSE_ASSIGN_OR_RETURN(auto m, Metrics::Create("0.0.0.0:9420"));  // serves /metrics
//   m->Lookup("local", /*hit=*/true);
//   builder.experimental().SetInterceptorCreators(ServerInterceptors(m.get()));  // interceptors.h
//
// Every method is thread-safe and cheap (no allocation after the first
// call with a label value). Metrics::Create("") keeps the registry without
// serving it (tests read Text()).
#ifndef KFUSE_SERVICE_METRICS_H_
#define KFUSE_SERVICE_METRICS_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/support/server_interceptor.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kfuse {

class Metrics {
 public:
  // `listen_address` "host:port" serves GET /metrics; empty serves nothing.
  static absl::StatusOr<std::unique_ptr<Metrics>> Create(const std::string& listen_address);
  virtual ~Metrics();

  // kfuse_requests_total{rpc, code}: one per finished RPC. `rpc` is the
  // method's short name ("Compile"), `code` the gRPC code's name ("OK",
  // "INVALID_ARGUMENT").
  void Request(absl::string_view rpc, absl::string_view code);
  // kfuse_lookups_total{tier, result}: tier "memory" | "local" | "fleet",
  // result "hit" | "miss"; one a request and tier it asked, however many
  // candidate keys (memory counts hits only: a memory miss asks local).
  void Lookup(absl::string_view tier, bool hit);
  // kfuse_lookups_total{tier="job", result="joined"}: a request answered by
  // a job another request had started (it counted its local miss too).
  void Joined();
  // kfuse_lookups_total{tier="fleet", result="arrived"}: a request answered
  // by the result another node published after this one's fleet miss, while
  // it waited on that node's lease (it counted the miss too).
  void FleetArrived();
  // kfuse_compile_seconds (histogram): one NVRTC compile of one kernel.
  void CompileSeconds(double seconds);
  // kfuse_tuning_seconds (histogram): one whole build (every kernel of a plan,
  // compile, check and timing), labelled by how it ended: "tuned" |
  // "heuristic" | "decision" (recompiled a stored decision) | "error" |
  // "cancelled" (every caller left before it ended).
  void BuildSeconds(absl::string_view how, double seconds);
  // kfuse_queue_depth{pool} (gauge): jobs waiting for a worker thread of
  // their pool, "calls" (jobs callers wait for) or "background" (tuning
  // after a heuristic answer, on threads of its own).
  void SetQueueDepth(bool background, int jobs);
  // kfuse_jobs_running (gauge): jobs on a worker thread now (queued ones
  // are kfuse_queue_depth).
  void SetJobsRunning(int jobs);
  // kfuse_verification_failures_total{what}: entries refused by a
  // signature, key or hash: "fleet_signature", "fleet_key", "fleet_blob", "import",
  // "blob_sha256" ... (what a tampered store or bundle sets off).
  void VerificationFailure(absl::string_view what);
  // kfuse_trials_total{outcome}: tuning trials by outcome (OutcomeName:
  // "ok", "compile_error", "wrong_result", "fault", "timeout", ...).
  void Trial(absl::string_view outcome);
  // kfuse_fleet_up (gauge): 1 while the fleet store answers, 0 while it
  // does not; absent when no fleet store is configured.
  void SetFleetUp(bool up);
  // kfuse_fleet_writable (gauge): 1 while this node publishes to the fleet
  // store, 0 while it reads only (--fleet_read_only, or a login found
  // unable to write); absent when no fleet store is configured.
  void SetFleetWritable(bool writable);
  // kfuse_tuning_available (gauge): 1 while a GPU of this node can take a
  // tuning task (health kfuse.v1.Tuning SERVING), 0 otherwise.
  void SetTuningAvailable(bool available);
  // kfuse_fleet_errors_total{op}: "get" | "publish" | "lease" | "connect" |
  // "publish_blocked" (this node's slot under a key holds a row that does
  // not verify).
  void FleetError(absl::string_view op);
  // kfuse_fleet_leases_total{result}: "acquired" | "held_elsewhere" |
  // "waited" (another node's tune arrived) | "expired" (took over).
  void FleetLease(absl::string_view result);
  // kfuse_background_tunes_total: cold starts answered with the heuristic
  // kernel while tuning went on.
  void BackgroundTune();
  // kfuse_store_errors_total{op}: "put": a build or fleet entry the local
  // store could not keep; "get": a read that failed (served as a miss).
  void StoreError(absl::string_view op);

  // The exposition text (Prometheus text format 0.0.4). A labelled family
  // shows once it has a series (after its first call); the unlabelled ones
  // (but kfuse_fleet_up) show from the start at 0.
  std::string Text() const;
  // The port /metrics is served on (the one the system chose for
  // "host:0"); 0 when nothing is served.
  int ListeningPort() const;
  // gRPC server interceptors that call Request() for every RPC, when its
  // status is sent. This Metrics must outlive the server they are given to.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> Interceptors();

 protected:
  Metrics();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A process-wide instance that is never served: for code built without a
// node (tests, tools). Never null.
Metrics& NullMetrics();

}  // namespace kfuse

#endif  // KFUSE_SERVICE_METRICS_H_
