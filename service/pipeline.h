// The compile pipeline behind every RPC: a request becomes a canonical chain
// and a cache key (Prepare), is answered from the store when it can be
// (Lookup), and otherwise is partitioned, generated, compiled, tuned and
// stored (Build). Each step is one call; the server decides on which thread
// each runs.
//
//   Pipeline p(deps, options);
//   KFUSE_ASSIGN_OR_RETURN(Prepared req, p.Prepare(request));
//   KFUSE_ASSIGN_OR_RETURN(auto hit, p.Lookup(req));
//   if (!hit) KFUSE_ASSIGN_OR_RETURN(plan, p.Build(req, progress, &cancel));
#ifndef KFUSE_SERVICE_PIPELINE_H_
#define KFUSE_SERVICE_PIPELINE_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "cache/store.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "core/key.h"
#include "core/roofline.h"
#include "core/trial.h"
#include "kfuse/v1/kfuse.pb.h"
#include "service/fleet_tier.h"
#include "service/hot_cache.h"
#include "service/metrics.h"
#include "service/repro.h"
#include "service/thread_pool.h"
#include "tuner/compiler.h"
#include "tuner/runner.h"
#include "tuner/search.h"

namespace kfuse {

// The GPU a pipeline tunes on: its runner, what it is, and its measured
// ceilings.
struct TuningGpu {
  Runner* runner = nullptr;
  DeviceFingerprint device;
  Ceilings ceilings;
};

struct PipelineDeps {
  Compiler* compiler = nullptr;  // Required.
  // The GPU at construction; the pipeline keeps them as its TuningGpu (read
  // them through Pipeline::gpu(), which also sees one attached later). A
  // runner without a device has no GPU yet: it only says why (no_gpu_reason).
  Runner* runner = nullptr;      // Null: no usable GPU, heuristic answers.
  Store* store = nullptr;        // Required.
  std::optional<DeviceFingerprint> device;  // The GPU tuning runs on.
  Ceilings ceilings;             // Measured on `device`, or nominal.
  FleetTier* fleet = nullptr;    // The shared second tier; null: local only.
  Metrics* metrics = nullptr;    // Null: NullMetrics().
};

struct PipelineOptions {
  std::string node;                 // This server's name, for provenance.
  int default_compute_capability = 90;  // Target when there is no GPU.
  double quick_budget_seconds = 2.0;
  double full_budget_seconds = 10.0;
  bool read_only = false;           // Serve from the store, never compile.
  int64_t hot_cache_bytes = int64_t{256} << 20;  // Plans kept in memory.
  std::string no_gpu_reason;        // Why tuning is unavailable, at first.
  uint32_t driver_version = 0;      // The GPU driver's, 0 without one.
  // Where builds leave repro bundles (service/repro.h): a kernel that fails
  // to build, and tuning trials that fail to compile, compute the wrong
  // answer, fault or time out. Empty: none.
  std::string repro_dir;
  ReproLimits repro_limits;
  // The largest message the server sends (kfused --max_message_bytes): a
  // plan that could not be answered in one is refused, not stored.
  int64_t max_message_bytes = int64_t{64} << 20;
};

// Kernels a plan may hold: a chain that partitions into more (each matmul,
// and each reduction a later op broadcasts back, starts a kernel, and each
// kernel recomputes its operands from the chain's inputs) takes minutes to
// build and may outgrow any answer; it is refused before a job starts.
inline constexpr size_t kMaxPlanKernels = 128;

// A validated request with its key: everything Lookup and Build need.
struct Prepared {
  v1::CompileRequest request;
  Chain chain;  // Canonical.
  Partition partition;  // The kernels the chain becomes.
  std::string chain_hash;
  std::vector<int64_t> symbol_values;  // The shape bucket tuned for.
  std::string arch;
  int compute_capability = 0;
  TuneMode mode = TuneMode::kQuick;
  double budget_seconds = 0;
  bool can_tune = false;     // A GPU of the target's architecture is here.
  // The GPU when this was prepared (null: none): what Build tunes on, so a
  // GPU attached meanwhile does not change a request halfway.
  std::shared_ptr<const TuningGpu> gpu;
  std::string untuned_reason;
  CacheKey key;                     // Where a build of this request is stored.
  // Where its tuning decision is: `key` with the generator part replaced by
  // the families' variant schemas, so a new generator version that keeps
  // its variant schema finds the decisions tuned by the old one.
  CacheKey decision_key;
  std::vector<CacheKey> lookup_keys;  // What may answer it, best first.
  // On a server that tunes: where an answer of this chain given without
  // tuning (a cold start, MODE_HEURISTIC) is stored, the heuristic depth.
  CacheKey heuristic_key;
};

using ProgressFn = std::function<void(const v1::TuneProgress&)>;

class Pipeline {
 public:
  Pipeline(PipelineDeps deps, PipelineOptions options);

  // Translation, validation, canonicalisation and the key. Cheap; bad input
  // is InvalidArgument naming the op and field, unsupported ops Unimplemented.
  absl::StatusOr<Prepared> Prepare(const v1::CompileRequest& request) const;
  // The store only. nullopt on a miss. A stored heuristic answer is not a hit
  // for a request that asks for tuning on a server that can tune.
  // `honour_force`: a forced request misses (the Lookup RPC ignores force).
  // `counted`: whether kfuse_lookups_total counts it (a request's second
  // look, for its heuristic twin, is not another request).
  absl::StatusOr<std::optional<v1::CompileResponse>> Lookup(const Prepared& p,
                                                            bool honour_force = true,
                                                            bool counted = true) const;
  // Lookup for a caller that builds on a miss: a store that cannot be read
  // is a miss (counted and logged as store_read_failed when `counted`), not
  // the request's error. The Lookup RPC, which builds nothing, calls Lookup.
  std::optional<v1::CompileResponse> LookupOrMiss(const Prepared& p, bool counted = true) const;
  // Partition, generate, compile, tune, store. Reuses a stored decision when
  // only the toolchain or the generator (not its variant schema) changed:
  // recompiles, does not retune. With a fleet tier: first looks there (a
  // FLEET_HIT is copied into the local store), takes the key's tuning lease
  // or waits for the node that holds it, and publishes what it built.
  absl::StatusOr<v1::CompileResponse> Build(const Prepared& p, const ProgressFn& progress,
                                            const std::atomic<bool>* cancel) const;
  // The fleet tier only: a verified plan for one of the lookup keys, copied
  // into the local store; nullopt on a miss, without a fleet, or when it is
  // down.
  std::optional<v1::CompileResponse> FleetLookup(const Prepared& p) const;

  // Forgets the in-memory plans (after entries were deleted from the store).
  void ClearHot() const { hot_->Clear(); }

  // Internal when tuning on this GPU found the kernel this request would get
  // without tuning wrong and no candidate right, within the last
  // kMeasuredWrongSeconds: the answer is known wrong, so it is not built or
  // served, and no tuning is started that would fail the same way. A forced
  // request (policy.force) that tunes is let through to tune again; a forced
  // heuristic one is not. OK otherwise.
  absl::Status MeasuredWrong(const Prepared& p) const;
  static constexpr double kMeasuredWrongSeconds = 3600;

  // The GPU tuning runs on; null while there is none.
  std::shared_ptr<const TuningGpu> gpu() const;
  // Why there is none (GetDeviceInfo, kfused's start-up line): a runner
  // given without a device (one whose GPU has not started) says why, else
  // options.no_gpu_reason; empty once a GPU is attached.
  std::string no_gpu_reason() const;
  // A GPU whose worker started after this pipeline was made (its first start
  // failed): requests prepared from now on tune on it, and answers given
  // without it are no longer served from memory. FailedPrecondition when a
  // GPU is already attached; `gpu.runner` must outlive the pipeline.
  absl::Status AttachGpu(TuningGpu gpu);
  // Changes whenever an answer remembered in memory may have gone stale: an
  // entry deleted from the store (Store::invalidations), a GPU attached.
  uint64_t AnswersEpoch() const;

  const PipelineDeps& deps() const { return deps_; }
  const PipelineOptions& options() const { return options_; }
  // OK when `response` (signed, its request id not yet set) can be sent;
  // INVALID_ARGUMENT naming the names otherwise: a plan that fits with
  // short names may not with a caller's long ones (each up to 1024 bytes,
  // and a symbol's name recurs in every shape and size report).
  absl::Status AnswerFits(const v1::CompileResponse& response) const;

 private:
  // A local store read of `key` that failed, for a caller that goes on as
  // on a miss: counted and logged as store_read_failed.
  void NoteReadFailure(const Prepared& p, const std::string& key, const absl::Status& why) const;
  // OK when `plan`, with the shortest names, fits in an answer of at most
  // options().max_message_bytes; UNIMPLEMENTED naming its size otherwise. A
  // hit on a larger one (stored by a node allowed larger messages) is a
  // miss here.
  absl::Status FitsAnAnswer(const v1::KernelPlan& plan) const;
  // FitsAnAnswer's refusal of a plan of `bytes` (at least that many where
  // they are its kernels' code alone, `code_only`); `built` of its
  // `kernels` are built so far.
  absl::Status TooLargeForAnAnswer(int64_t bytes, size_t built, size_t kernels, bool code_only) const;
  // p's build was refused by FitsAnAnswer (`why`): remembered, so that a
  // retry (a client's, or a fleet node's after the lease) is refused at
  // once instead of rebuilding for as long. A forced request builds again.
  void NoteTooLarge(const Prepared& p, const absl::Status& why) const;
  absl::Status KnownTooLarge(const Prepared& p) const;
  // A hit's answer: the stored plan with this request's names.
  v1::CompileResponse Answer(const Prepared& p, const v1::CompileResponse& stored) const;
  // A verified fleet artifact for this request, copied into the local store
  // and memory unless memory was cleared (a delete) after `generation`, read
  // before the fetch; nullopt when it does not serve the request.
  std::optional<v1::CompileResponse> AnswerFromFleet(const Prepared& p, const CacheKey& key,
                                                     const v1::StoreEntry& entry, uint64_t generation) const;
  // Builds without the fleet's lease (Build wraps it).
  absl::StatusOr<v1::CompileResponse> BuildHere(const Prepared& p, const ProgressFn& progress,
                                                const std::atomic<bool>* cancel) const;
  // BuildHere, answering an exception it throws as INTERNAL (logged as
  // build_failed) instead of ending the process.
  absl::StatusOr<v1::CompileResponse> BuildGuarded(const Prepared& p, const ProgressFn& progress,
                                                   const std::atomic<bool>* cancel) const;
  Metrics& metrics() const { return deps_.metrics != nullptr ? *deps_.metrics : NullMetrics(); }
  // Leaves a repro bundle for `variant` of kernel `index`; a failure to write
  // it is logged, never returned.
  // `sizes`: the symbol values it failed at, where not p's bucket.
  void LeaveRepro(const Prepared& p, size_t index, ReproKind kind, const Variant& variant,
                  Numerics numerics, absl::string_view message,
                  absl::Span<const int64_t> sizes = {}) const;
  // Tuning found the heuristic kernel of `p`'s chain wrong (`why`): its
  // stored answer (artifact and decision) leaves the store and memory, so
  // what is served next is the tuned kernel or nothing. With `no_other`
  // (no candidate passed either), MeasuredWrong refuses the chain for a while.
  void WithdrawHeuristic(const Prepared& p, const std::string& why, bool no_other) const;
  // Whether `plan` is a heuristic answer MeasuredWrong refuses for `p`.
  bool RefusedHeuristic(const Prepared& p, const v1::KernelPlan& plan) const;

  PipelineDeps deps_;
  PipelineOptions options_;
  std::unique_ptr<HotCache> hot_;  // Internally synchronised.
  // Copies fleet entries into the local store after the answer left (an
  // fsynced write is most of a fleet hit's time otherwise). One thread, so
  // writes keep their order; drained when the pipeline goes.
  std::unique_ptr<ThreadPool> store_writer_;
  // Chains whose heuristic kernel tuning measured wrong with nothing else
  // right, by heuristic_key's artifact key: why, and when (steady seconds).
  struct KnownWrong {
    std::string why;
    double at = 0;
    bool stored = true;  // In the store's refusals (false: its Put failed).
  };
  mutable absl::Mutex wrong_mu_;
  mutable absl::flat_hash_map<std::string, KnownWrong> wrong_ ABSL_GUARDED_BY(wrong_mu_);
  // The store's invalidations() when its refusals were last read: every
  // process on the file refuses (and lifts) alike.
  mutable uint64_t refusals_epoch_ ABSL_GUARDED_BY(wrong_mu_) = 0;
  mutable bool refusals_reading_ ABSL_GUARDED_BY(wrong_mu_) = false;  // A request reads them now.
  // Counts this process's own refusals and lifts: a read of the store
  // begun before one is not swapped in over it.
  mutable uint64_t wrong_changes_ ABSL_GUARDED_BY(wrong_mu_) = 0;
  // wrong_ := the store's unexpired refusals, and those of this process
  // the store could not keep; as it is when they cannot be read. Reads the
  // store without wrong_mu_; `always`: whatever invalidations() says.
  void ReadRefusals(bool always) const ABSL_LOCKS_EXCLUDED(wrong_mu_);
  // Artifact keys whose plans were past what an answer may take, with
  // FitsAnAnswer's refusal. Bounded, as wrong_ is; not stored (another
  // --max_message_bytes may take them).
  mutable absl::Mutex too_large_mu_;
  mutable absl::flat_hash_map<std::string, absl::Status> too_large_ ABSL_GUARDED_BY(too_large_mu_);
  mutable absl::Mutex gpu_mu_;
  std::shared_ptr<const TuningGpu> gpu_ ABSL_GUARDED_BY(gpu_mu_);
  const Runner* pending_runner_ = nullptr;  // deps.runner given without a device.
  std::atomic<uint64_t> gpus_attached_{0};
};

// Names from this request (inputs, outputs, symbols) replace the stored ones:
// the key ignores client names, so a hit may come from a request that named
// them differently.
void ApplyRequestNames(const Prepared& p, v1::KernelPlan* plan);

// Every client name of `plan` at its shortest: symbols s0, s1, ..., inputs
// and outputs unnamed. Plans are stored so (symbol names recur in every
// shape and size report, so a caller's long ones could multiply a stored
// plan's size), and ApplyRequestNames names each answer.
void ShortenNames(v1::KernelPlan* plan);
// The size of `plan` with ShortenNames' names (a copy).
int64_t BytesWithShortNames(const v1::KernelPlan& plan);
// `text` with each symbol name quoted in it (as validation quotes client
// text: partition reasons, untuned reasons, trial messages) renamed by
// `renamed`, in one pass (two symbols may swap names).
std::string RenameQuotedSymbols(absl::string_view text, const std::map<std::string, std::string>& renamed);
// `chain`'s symbol names to ShortenNames' (s0, s1, ...), or where `back`,
// those to `chain`'s: a job's messages, which every waiter reads, are kept
// in the short names, and each waiter reads its own.
std::map<std::string, std::string> ShortSymbolNames(const Chain& chain, bool back = false);

// A request id unique in this process, for requests that came without one.
std::string NewRequestId();

// A request's request_id and env.client, logged with every line of its
// build, hold at most 256 bytes each; INVALID_ARGUMENT naming the field.
absl::Status CheckLoggedText(const v1::CompileRequest& request);

// The targets this server compiles for, as GetDeviceInfo lists them: those
// of its NVRTC that a request's Target can name (sm_XY, and sm_90a / sm_100a
// where arch_specific asks for them).
std::vector<std::string> ServedArchs();

}  // namespace kfuse

#endif  // KFUSE_SERVICE_PIPELINE_H_
