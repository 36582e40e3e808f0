// kfused's gRPC front: the kfuse.v1.KernelService on the callback API. Store
// hits are answered on the callback thread; misses join one job per key that
// runs on a thread pool, so no callback thread ever waits.
//
//   KernelServiceImpl service(&pipeline, &store, ServiceOptions{});
//   builder.RegisterService(&service);
#ifndef KFUSE_SERVICE_SERVER_H_
#define KFUSE_SERVICE_SERVER_H_

#include <atomic>
#include <memory>
#include <string>

#include "cache/store.h"
#include "core/version.h"
#include "kfuse/v1/kfuse.grpc.pb.h"
#include "plan/signing.h"
#include "service/auth.h"
#include "service/hot_cache.h"
#include "service/jobs.h"
#include "service/metrics.h"
#include "service/pipeline.h"
#include "service/thread_pool.h"

namespace kfuse {

// The most keys a DeleteKernels or ExportKernels call may name, and entries
// an ImportKernels call may send: each is a store query or write on an
// admin thread.
inline constexpr int kMaxAdminItems = 10000;

struct ServiceOptions {
  int job_threads = 2;       // Compile and tuning jobs at once.
  // Jobs that may wait beyond a pool's idle threads; beyond this, new misses
  // get RESOURCE_EXHAUSTED.
  int max_queued_jobs = 64;
  // Store administration calls (explain, delete, import, export) that may
  // wait for the admin threads; beyond this, RESOURCE_EXHAUSTED. An import
  // holds its entries (up to the message size) while it waits.
  int max_queued_admin_calls = 64;
  std::string server_version = std::string("kfused/") + kKfuseVersion;
  // When set (not owned; must outlive the service), every RPC must carry
  // "authorization: Bearer <token>" with one of these tokens, else
  // UNAUTHENTICATED. The health service is separate and stays open.
  const TokenSet* tokens = nullptr;
  // When set (not owned), every plan answered (hits too) is signed with it,
  // at answer time, so a key change needs no store rewrite.
  const SigningKey* signing_key = nullptr;
  // Public keys whose entries ImportKernels accepts (not owned); the signing
  // key's own public key is always accepted. Null: only this node's own.
  const TrustedKeys* trusted_keys = nullptr;
  // Not owned; NullMetrics() when null.
  Metrics* metrics = nullptr;
};

class KernelServiceImpl final : public v1::KernelService::CallbackService {
 public:
  KernelServiceImpl(Pipeline* pipeline, ServiceOptions options);
  ~KernelServiceImpl() override;

  grpc::ServerUnaryReactor* Compile(grpc::CallbackServerContext* ctx, const v1::CompileRequest* req,
                                    v1::CompileResponse* resp) override;
  grpc::ServerWriteReactor<v1::TuneProgress>* Tune(grpc::CallbackServerContext* ctx,
                                                   const v1::CompileRequest* req) override;
  grpc::ServerUnaryReactor* Lookup(grpc::CallbackServerContext* ctx, const v1::CompileRequest* req,
                                   v1::CompileResponse* resp) override;
  grpc::ServerUnaryReactor* ListKernels(grpc::CallbackServerContext* ctx, const v1::ListKernelsRequest* req,
                                        v1::ListKernelsResponse* resp) override;
  grpc::ServerUnaryReactor* DeleteKernels(grpc::CallbackServerContext* ctx,
                                          const v1::DeleteKernelsRequest* req,
                                          v1::DeleteKernelsResponse* resp) override;
  grpc::ServerUnaryReactor* GetDeviceInfo(grpc::CallbackServerContext* ctx,
                                          const v1::GetDeviceInfoRequest* req, v1::DeviceInfo* resp) override;
  // Store administration between nodes: service/server_admin.cc.
  grpc::ServerUnaryReactor* Explain(grpc::CallbackServerContext* ctx, const v1::CompileRequest* req,
                                    v1::ExplainResponse* resp) override;
  grpc::ServerWriteReactor<v1::StoreEntry>* ExportKernels(grpc::CallbackServerContext* ctx,
                                                          const v1::ExportKernelsRequest* req) override;
  grpc::ServerUnaryReactor* ImportKernels(grpc::CallbackServerContext* ctx, const v1::ImportKernelsRequest* req,
                                          v1::ImportKernelsResponse* resp) override;

  // Waits for running jobs to end (after the server stopped taking calls).
  void Drain();
  // Jobs building on a job thread now.
  int building() const;
  // Jobs queued for a thread, in both pools, that someone still waits for
  // (or asked for as background work).
  int queued_jobs() const { return jobs_.Waiting(false) + jobs_.Waiting(true); }
  // Admin calls waiting for an admin thread, none being idle.
  int queued_admin_calls() const;
  // Cancels every job still queued or building, background tuning too (at
  // shutdown, once no call is left); how many there were.
  int CancelJobs() { return jobs_.CancelAll(); }
  // Bytes the memo of answers holds (keys included).
  int64_t memo_bytes() const { return answers_.bytes(); }

 private:
  // The job's answer as this waiter asked for it: its names, its request id,
  // JOINED if another request started the job.
  JobTable::Result ForWaiter(const Prepared& p, JobTable::Result r, bool joined) const;
  // Starts or joins the job for a prepared miss.
  JobTable::Ticket StartJob(const Prepared& p, JobTable::DoneFn done, JobTable::ProgressFn progress,
                            bool* rejected, bool* joined);

  // A miss that wants tuning from a caller who cannot wait for it
  // (policy.background, or a deadline shorter than the tuning budget).
  bool CannotWaitForTuning(const grpc::CallbackServerContext& ctx, const Prepared& p) const;
  // Answers such a caller with the heuristic kernel (stored or compiled
  // now) and starts the tuning job in the background.
  grpc::ServerUnaryReactor* ColdStart(grpc::CallbackServerContext* ctx, const Prepared& p,
                                      v1::CompileResponse* resp);

  // OK, or RESOURCE_EXHAUSTED when max_queued_admin_calls wait already.
  absl::Status AdminRoom() const;
  // Explain's reads of the store and the fleet, on an admin thread.
  absl::Status ExplainOn(const Prepared& p, v1::ExplainResponse* resp);

  // OK, or UNAUTHENTICATED when tokens are required and the call has none.
  absl::Status Authorize(grpc::CallbackServerContext* ctx) const;
  // Signs the plan in a result when a signing key is set, then checks that
  // the answer can be sent (Pipeline::AnswerFits: the caller's names).
  JobTable::Result Signed(JobTable::Result r) const;
  absl::Status Sign(v1::CompileResponse* resp) const;

  Pipeline* pipeline_;
  ServiceOptions options_;
  JobTable jobs_;
  mutable absl::Mutex building_mu_;  // Orders the count's changes with the gauge's.
  int building_ ABSL_GUARDED_BY(building_mu_) = 0;  // Jobs on a worker thread now (kfuse_jobs_running).
  void AddBuilding(int delta);
  // The pipeline's AnswersEpoch() when memory was last known current.
  std::atomic<uint64_t> seen_epoch_{0};
  // Drops the answers kept in memory when another process on the store
  // deleted or replaced entries since, or a GPU to tune on was attached.
  void DropStaleAnswers();
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<ThreadPool> background_pool_;  // Jobs asked for as background work.
  // Store administration that may wait on a lock, an fsync or the fleet's
  // database (explain, export's listing, delete, import): off the callback
  // threads, and never queued behind tuning jobs.
  std::unique_ptr<ThreadPool> admin_pool_;
  // Signed answers to requests seen before, by a digest of the request's
  // bytes: a repeated request skips translation, keying and signing. Cleared when a
  // job finishes or entries are deleted, so it never outlives what the
  // store would answer.
  HotCache answers_{64 << 20};
};

grpc::Status ToGrpc(const absl::Status& s);

}  // namespace kfuse

#endif  // KFUSE_SERVICE_SERVER_H_
