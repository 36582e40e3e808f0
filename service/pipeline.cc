#include "service/pipeline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "codegen/analysis.h"
#include "codegen/canonicalize.h"
#include "codegen/partition.h"
#include "codegen/generators.h"
#include "codegen/pointwise.h"
#include "codegen/validate_internal.h"
#include "core/clock.h"
#include "core/decimal.h"
#include "core/limits.h"
#include "core/status.h"
#include "kfuse/storage/v1/storage.pb.h"
#include "core/log.h"
#include "service/convert.h"
#include "service/translate.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

constexpr int kSupportedCcs[] = {80, 86, 87, 89, 90, 100, 120};

// The target for compute capability `cc`, as the wire carries it (unsigned:
// any value a client sends is named as sent).
absl::StatusOr<std::string> ArchFor(const v1::Target& t, uint32_t cc) {
  bool ok = false;
  for (int s : kSupportedCcs) ok |= static_cast<uint32_t>(s) == cc;
  if (!ok) {
    // Both spellings: the wire's number and the CLI's --arch.
    return absl::InvalidArgumentError(absl::StrCat(
        "target.compute_capability: ", cc, " (sm_", cc, ") is not supported (use ", absl::StrJoin(kSupportedCcs, ", "),
        "; --arch sm_", absl::StrJoin(kSupportedCcs, ", sm_"), ")"));
  }
  const bool has_specific = cc == 90 || cc == 100;
  if (t.arch_specific() && !has_specific && t.compute_capability() != 0) {
    // sm_80a does not exist: built as sm_80, it would be a key of its own.
    return absl::InvalidArgumentError(absl::StrCat("target.arch_specific: sm_", cc,
                                                   " has no arch-specific target (sm_90a and sm_100a do)"));
  }
  // For the server's own GPU (compute_capability 0), where it has one.
  return absl::StrCat("sm_", cc, t.arch_specific() && has_specific ? "a" : "");
}

TuneMode ModeOf(const v1::TuningPolicy& p) {
  switch (p.mode()) {
    case v1::TuningPolicy::MODE_HEURISTIC: return TuneMode::kHeuristic;
    case v1::TuningPolicy::MODE_FULL: return TuneMode::kFull;
    default: return TuneMode::kQuick;
  }
}

v1::TensorSpec OutputSpec(const Chain& c, int j, const std::string& name) {
  v1::TensorSpec s;
  s.set_name(name);
  const TensorType& t = c.nodes[c.outputs[j]].type;
  s.set_dtype(static_cast<v1::DType>(t.dtype));
  for (const Dim& d : t.shape) {
    v1::Dim* out = s.add_shape();
    if (d.is_static()) {
      out->set_size(d.size);
    } else {
      out->set_symbol(c.symbols[d.symbol].name);
    }
  }
  return s;
}

// Where each symbol's value comes from at launch: every input dim naming it.
void AddSymbols(const Chain& c, v1::KernelPlan* plan) {
  for (size_t s = 0; s < c.symbols.size(); ++s) {
    v1::Symbol* sym = plan->add_symbols();
    sym->set_name(c.symbols[s].name);
    for (const Node& n : c.nodes) {
      if (n.kind != OpKind::kInput) continue;
      for (int a = 0; a < n.type.rank(); ++a) {
        if (n.type.shape[a].symbol == static_cast<int32_t>(s)) {
          v1::SymbolSource* src = sym->add_sources();
          src->set_input(n.input_index);
          src->set_axis(a);
        }
      }
    }
  }
}

std::map<std::string, int64_t> SizesOf(const Chain& c, const std::vector<int64_t>& values) {
  std::map<std::string, int64_t> sizes;
  for (size_t s = 0; s < c.symbols.size() && s < values.size(); ++s) sizes[c.symbols[s].name] = values[s];
  return sizes;
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// The chain's op positions (as the client numbered them) among `nodes`.
std::vector<uint32_t> WireOps(const Chain& c, const std::vector<int32_t>& nodes) {
  std::vector<uint32_t> ops;
  for (int32_t id : nodes) {
    if (c.nodes[id].kind != OpKind::kInput && c.nodes[id].wire_index >= 0) ops.push_back(c.nodes[id].wire_index);
  }
  std::sort(ops.begin(), ops.end());
  ops.erase(std::unique(ops.begin(), ops.end()), ops.end());
  return ops;
}

// `version` of each family in the plan, in kernel order, each once, then
// for a plan of several kernels its partition's digest: "pointwise/3",
// "matmul/8+row/19+plan/0123456789abcdef". A plan of several kernels is the
// partitioner's as much as the generators': when its kernels change
// (PartitionDigest), no plan or decision of the earlier partition is found
// under the new key, locally or in the fleet, though each family's version
// stays; plans the change leaves alone keep their keys.
// `digest` is PartitionDigest's, for plans of several kernels.
std::string FamilyVersions(const Partition& part, const std::string& digest,
                           std::string (*version)(Family)) {
  std::vector<std::string> versions;
  for (const KernelGroup& g : part.kernels) {
    std::string v = version(g.family);
    if (std::find(versions.begin(), versions.end(), v) == versions.end()) versions.push_back(v);
  }
  if (part.kernels.size() > 1) versions.push_back(absl::StrCat("plan/", digest));
  return absl::StrJoin(versions, "+");
}

// One line for listings: the ops in order and the outputs' types.
std::string ShortDescription(const Chain& c) {
  std::string ops;
  for (const Node& n : c.nodes) {
    if (n.kind == OpKind::kInput || n.kind == OpKind::kConstant) continue;
    absl::StrAppend(&ops, ops.empty() ? "" : " ", std::string(OpName(n.kind)));
  }
  if (ops.size() > 96) ops = ops.substr(0, 93) + "...";
  std::string outs;
  for (int32_t o : c.outputs) {
    const TensorType& t = c.nodes[o].type;
    std::vector<std::string> dims;
    for (const Dim& d : t.shape) dims.push_back(d.is_static() ? absl::StrCat(d.size) : "?");
    absl::StrAppend(&outs, outs.empty() ? "" : ", ", std::string(DTypeName(t.dtype)), "[",
                    absl::StrJoin(dims, ","), "]");
  }
  return absl::StrCat(ops, " -> ", outs);
}

// One kernel of the plan as built: how it computes, and the evidence.
struct BuiltKernel {
  TuneResult result;
  RooflineReport report;
};

// The failed trials of `built`, by outcome, most frequent first (ties in
// the outcome's order); returns how many failed.
uint32_t SetFailedTrials(const std::vector<BuiltKernel>& built, v1::Provenance* prov) {
  std::map<Outcome, uint32_t> counts;
  for (const BuiltKernel& b : built) {
    for (const Trial& t : b.result.trials) {
      if (t.outcome != Outcome::kOk && t.outcome != Outcome::kSkipped) ++counts[t.outcome];
    }
  }
  std::vector<std::pair<Outcome, uint32_t>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  uint32_t failed = 0;
  for (const auto& [outcome, count] : sorted) {
    v1::TrialOutcomeCount* c = prov->add_failed_trials();
    c->set_outcome(static_cast<v1::Trial::Outcome>(outcome));
    c->set_count(count);
    failed += count;
  }
  return failed;
}

absl::StatusOr<CompiledKernel> CompileVariant(const Chain& chain, const KernelGroup& group,
                                              const Variant& v, const std::string& arch,
                                              Compiler& compiler, const std::atomic<bool>* cancel) {
  KFUSE_ASSIGN_OR_RETURN(KernelSpec spec, EmitFamily(chain, group, v));
  CompileOptions copts;
  copts.arch = arch;
  return compiler.Compile(spec, copts, cancel);
}

// A failed build leaves a repro bundle unless the caller went away or the
// generator answered the client: UNIMPLEMENTED (a chain it cannot generate
// yet, as documented) and INVALID_ARGUMENT (input it refuses) are answers,
// not failures, and a bundle per such request would crowd real ones out.
bool LeavesRepro(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kUnimplemented:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kResourceExhausted:  // Capacity (a source over the limit), not a compiler bug.
      return false;
    default:
      return true;
  }
}

// Which of the heuristic variant's kernels TuneKernel says did not compile.
Numerics FailedNumerics(const absl::Status& s) {
  if (absl::StartsWith(s.message(), "the float64 reference")) return Numerics::kReference64;
  if (absl::StartsWith(s.message(), "the eager reference")) return Numerics::kEager;
  return Numerics::kFast;
}

// The repro bundles one request may still leave: one per kernel and kind,
// `limit` in all, so a search full of failures leaves a few, not dozens.
class ReproQuota {
 public:
  explicit ReproQuota(int limit) : left_(limit) {}
  bool Take(size_t kernel, ReproKind kind) {
    if (left_ <= 0 || !seen_.insert({kernel, kind}).second) return false;
    --left_;
    return true;
  }

 private:
  int left_;
  std::set<std::pair<size_t, ReproKind>> seen_;
};

}  // namespace

Pipeline::Pipeline(PipelineDeps deps, PipelineOptions options)
    : deps_(std::move(deps)),
      options_(std::move(options)),
      hot_(std::make_unique<HotCache>(options_.hot_cache_bytes)),
      store_writer_(std::make_unique<ThreadPool>(1)) {
  KFUSE_CHECK(deps_.compiler != nullptr && deps_.store != nullptr);
  if (deps_.runner != nullptr && deps_.device) {
    gpu_ = std::make_shared<const TuningGpu>(TuningGpu{deps_.runner, *deps_.device, deps_.ceilings});
  } else {
    pending_runner_ = deps_.runner;
  }
  // gpu() is the one place to read them: a GPU may be attached later.
  deps_.runner = nullptr;
  deps_.device.reset();
  deps_.ceilings = Ceilings{};
  // The chains refused before a restart stay refused for what is left of
  // their hour.
  ReadRefusals(/*always=*/true);
}

void Pipeline::ReadRefusals(bool always) const {
  const uint64_t epoch = deps_.store->invalidations();
  uint64_t changes = 0;
  {
    absl::MutexLock lock(&wrong_mu_);
    // invalidations() only grows; one request reads at a time, the others
    // go on with what is known.
    if (!always && (epoch <= refusals_epoch_ || refusals_reading_)) return;
    refusals_reading_ = true;
    changes = wrong_changes_;
  }
  // Outside the lock: a store read must not hold up every request's check.
  absl::StatusOr<std::vector<Store::Refusal>> kept = deps_.store->Refusals();
  const double now = SteadySeconds();
  const double wall_ms = absl::ToUnixMillis(absl::Now());
  absl::MutexLock lock(&wrong_mu_);
  refusals_reading_ = false;
  // This process refused or lifted a chain meanwhile: what was read may not
  // show it. The next check reads again.
  if (wrong_changes_ != changes) return;
  refusals_epoch_ = epoch;
  if (!kept.ok()) {
    LogEvent(LogLevel::kWarning, "refusals_not_read", {{"error", kept.status().ToString()}});
    return;  // Those known stay.
  }
  absl::flat_hash_map<std::string, KnownWrong> fresh;
  for (const Store::Refusal& r : *kept) {
    const double left = std::min(kMeasuredWrongSeconds, (static_cast<double>(r.until_ms) - wall_ms) / 1000);
    if (left > 0) fresh[r.key] = KnownWrong{r.reason, now - (kMeasuredWrongSeconds - left), true};
  }
  for (const auto& [key, known] : wrong_)  // The store could not keep these: they stay.
    if (!known.stored && now - known.at <= kMeasuredWrongSeconds) fresh.emplace(key, known);
  wrong_ = std::move(fresh);
}

std::shared_ptr<const TuningGpu> Pipeline::gpu() const {
  absl::MutexLock lock(&gpu_mu_);
  return gpu_;
}

std::string Pipeline::no_gpu_reason() const {
  if (gpu() != nullptr) return "";
  if (pending_runner_ != nullptr) {
    std::optional<std::string> why = pending_runner_->Unavailable();
    return why ? *why : "its tuning worker has started; the GPU tunes once its ceilings are measured";
  }
  return options_.no_gpu_reason;
}

absl::Status Pipeline::AttachGpu(TuningGpu gpu) {
  if (gpu.runner == nullptr) return absl::InvalidArgumentError("gpu.runner is null");
  {
    absl::MutexLock lock(&gpu_mu_);
    if (gpu_ != nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("this server already tunes on ", gpu_->device.name));
    }
    gpu_ = std::make_shared<const TuningGpu>(std::move(gpu));
  }
  // Plans in memory are keyed by device, so they stay right; answers a
  // server remembers by request (given without the GPU) do not.
  gpus_attached_.fetch_add(1);
  return absl::OkStatus();
}

uint64_t Pipeline::AnswersEpoch() const {
  return deps_.store->invalidations() + gpus_attached_.load();
}

namespace {

absl::Status CheckPolicy(const v1::TuningPolicy& policy) {
  if (!v1::TuningPolicy::Mode_IsValid(policy.mode())) {
    return absl::InvalidArgumentError(absl::StrCat("policy.mode: unknown value ", policy.mode()));
  }
  const double b = policy.budget_seconds();
  if (!std::isfinite(b) || b < 0 || b > kMaxBudgetSeconds) {
    return absl::InvalidArgumentError(absl::StrCat("policy.budget_seconds: ", ShortestDecimal(b), " is not between 0 and ",
                                                   kMaxBudgetSeconds, " seconds (0: the server's default)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Prepared> Pipeline::Prepare(const v1::CompileRequest& request) const {
  KFUSE_RETURN_IF_ERROR(CheckPolicy(request.policy()));
  KFUSE_RETURN_IF_ERROR(CheckLoggedText(request));
  Prepared p;
  // Unsupported ops are answered before a job starts. A bug the client's
  // chain meets here is its answer (INTERNAL, logged), not the process's.
  const absl::Status planned = CatchingBugs("planning the chain", [&]() -> absl::Status {
    KFUSE_ASSIGN_OR_RETURN(Chain typed, TranslateChain(request.chain()));
    p.chain = Canonicalize(typed);
    KFUSE_ASSIGN_OR_RETURN(p.partition, PartitionChain(p.chain));
    return absl::OkStatus();
  });
  if (absl::IsInternal(planned)) {
    LogEvent(LogLevel::kError, "planning_failed",
             {{"request_id", request.request_id()}, {"error", planned.ToString()}});
  }
  KFUSE_RETURN_IF_ERROR(planned);
  if (p.partition.kernels.size() > kMaxPlanKernels) {
    return absl::UnimplementedError(absl::StrCat(
        "the chain partitions into ", p.partition.kernels.size(), " kernels; a plan holds at most ", kMaxPlanKernels,
        " (each matmul, and each reduction a later op broadcasts back, starts one): send it as several chains"));
  }
  p.chain_hash = ChainHash(p.chain);

  p.gpu = gpu();
  uint32_t cc = request.target().compute_capability();
  if (cc == 0) {
    cc = static_cast<uint32_t>(p.gpu ? p.gpu->device.compute_capability()
                                     : options_.default_compute_capability);
  }
  KFUSE_ASSIGN_OR_RETURN(p.arch, ArchFor(request.target(), cc));
  p.compute_capability = static_cast<int>(cc);  // One of kSupportedCcs.
  p.symbol_values = SymbolValuesForTuning(p.chain);
  p.mode = ModeOf(request.policy());
  p.budget_seconds = request.policy().budget_seconds() > 0 ? request.policy().budget_seconds()
                     : p.mode == TuneMode::kFull                ? options_.full_budget_seconds
                                                                : options_.quick_budget_seconds;
  if (p.gpu == nullptr) {
    p.untuned_reason = "no usable GPU on this server";
  } else if (p.gpu->device.compute_capability() != p.compute_capability) {
    p.untuned_reason = absl::StrCat("target sm_", cc, " is not this server's GPU (",
                                    p.gpu->device.name, ")");
  } else {
    p.can_tune = true;
  }
  if (p.mode == TuneMode::kHeuristic) p.untuned_reason = "policy: heuristic";

  p.key.chain = p.chain_hash;
  p.key.spec = absl::StrCat("sizes=", absl::StrJoin(p.symbol_values, ","));
  p.key.device = p.can_tune ? absl::StrCat("gpu:", p.gpu->device.Digest()) : absl::StrCat("untuned:", p.arch);
  p.key.toolchain = absl::StrCat(deps_.compiler->Version(), "/", p.arch);
  // Every family's generator version (artifacts), and below every family's
  // variant schema (decisions: what a stored decision's variants mean).
  const std::string digest =
      p.partition.kernels.size() > 1 ? PartitionDigest(p.chain, p.partition) : std::string();
  p.key.generator = FamilyVersions(p.partition, digest, GeneratorVersion);
  // On a server that tunes, each search depth has its own entry, so a
  // heuristic answer never replaces a tuned one and FULL is not served a
  // QUICK result; a request is served by its own depth or a deeper one.
  p.lookup_keys = {p.key};
  if (p.can_tune) {
    const char* depths[] = {"full", "quick", "heuristic"};
    const int mine = p.mode == TuneMode::kFull ? 0 : p.mode == TuneMode::kQuick ? 1 : 2;
    p.lookup_keys.clear();
    for (int d = 0; d <= 2; ++d) {
      CacheKey k = p.key;
      absl::StrAppend(&k.spec, ";search=", depths[d]);
      if (d == 2) p.heuristic_key = k;
      if (d <= mine) p.lookup_keys.push_back(std::move(k));
    }
    p.key = p.lookup_keys.back();
  }
  p.decision_key = p.key;
  p.decision_key.generator = FamilyVersions(p.partition, digest, VariantSchemaVersion);
  p.request = request;
  if (p.request.request_id().empty()) p.request.set_request_id(NewRequestId());
  return p;
}

void Pipeline::NoteReadFailure(const Prepared& p, const std::string& key, const absl::Status& why) const {
  // A store that cannot be read (locked by another process past its busy
  // timeout, being re-created) costs a build, not the request.
  metrics().StoreError("get");
  LogEvent(LogLevel::kWarning, "store_read_failed",
           {{"request_id", p.request.request_id()}, {"key", key}, {"error", why.ToString()}});
}

namespace {

// A stored plan has a kernel for each of the request's partition's kernels
// and a buffer for each intermediate. One that does not (a plan emptied or
// cut short, imported under a trusted key) is a miss, never a hit that
// launches too little and leaves outputs unwritten.
bool FitsPartition(const Prepared& p, const v1::KernelPlan& plan) {
  return plan.kernels_size() == static_cast<int>(p.partition.kernels.size()) &&
         plan.intermediates_size() == static_cast<int>(p.partition.intermediates.size());
}

}  // namespace

std::optional<v1::CompileResponse> Pipeline::LookupOrMiss(const Prepared& p, bool counted) const {
  absl::StatusOr<std::optional<v1::CompileResponse>> hit = Lookup(p, /*honour_force=*/true, counted);
  if (hit.ok()) return *std::move(hit);
  // A request's second look (not counted) was logged by its first.
  if (counted) NoteReadFailure(p, p.key.ArtifactKey(), hit.status());
  return std::nullopt;
}

absl::StatusOr<std::optional<v1::CompileResponse>> Pipeline::Lookup(const Prepared& p,
                                                                    bool honour_force,
                                                                    bool counted) const {
  Metrics& m = counted ? metrics() : NullMetrics();
  if (honour_force && p.request.policy().force()) return std::nullopt;
  const bool wants_tuning = p.can_tune && p.mode != TuneMode::kHeuristic;
  auto usable = [&](const v1::KernelPlan& plan) {
    return (!wants_tuning || plan.provenance().state() == v1::TUNE_STATE_TUNED) && FitsPartition(p, plan) &&
           !RefusedHeuristic(p, plan) && FitsAnAnswer(plan).ok();
  };
  const uint64_t generation = hot_->generation();
  for (const CacheKey& candidate : p.lookup_keys) {
    const std::string key = candidate.ArtifactKey();
    // Sources are not kept in memory: a request for them reads the store.
    if (!p.request.include_source()) {
      std::shared_ptr<const v1::CompileResponse> hot = hot_->Get(key);
      if (hot != nullptr && usable(hot->plan())) {
        deps_.store->NoteArtifactHit(key);  // The LRU order sees memory hits too.
        m.Lookup("memory", true);
        return Answer(p, *hot);
      }
    }
    KFUSE_ASSIGN_OR_RETURN(std::optional<std::string> blob, deps_.store->GetArtifact(candidate));
    if (!blob) continue;
    storage::v1::Artifact artifact;
    // The blob matched its sha256, but a row may name another entry's blob
    // (the file edited by hand, or damaged in a way the hashes agree with):
    // a plan whose key is not the one asked for is another chain's. A miss,
    // which the compile's Put then replaces.
    if (!artifact.ParseFromString(*blob) || artifact.plan().key() != key) {
      LogEvent(LogLevel::kWarning, "store_entry_misfiled",
               {{"request_id", p.request.request_id()}, {"key", key}, {"holds", artifact.plan().key()}});
      continue;
    }
    if (!usable(artifact.plan())) continue;
    v1::CompileResponse stored;
    *stored.mutable_plan() = std::move(*artifact.mutable_plan());
    if (!p.request.include_source()) {
      for (v1::Kernel& k : *stored.mutable_plan()->mutable_kernels()) k.clear_source();
      hot_->Put(key, std::make_shared<const v1::CompileResponse>(stored), generation);
    }
    m.Lookup("local", true);
    return Answer(p, stored);
  }
  // One miss a request, however many candidate keys it asked for.
  m.Lookup("local", false);
  return std::nullopt;
}

namespace {

// `entry`'s artifact, parsed into *artifact, serves `p`: its plan is the one
// the entry names (a trusted signer's misfiled plan is a miss, as an import
// would refuse it), tuned if the request wants tuning.
bool ArtifactServes(const Prepared& p, const v1::StoreEntry& entry, storage::v1::Artifact* artifact) {
  if (!artifact->ParseFromString(entry.blob()) || artifact->plan().key() != entry.key() ||
      !FitsPartition(p, artifact->plan())) {
    return false;
  }
  const bool wants_tuning = p.can_tune && p.mode != TuneMode::kHeuristic;
  return !wants_tuning || artifact->plan().provenance().state() == v1::TUNE_STATE_TUNED;
}

// ArtifactServes as the fleet tier's predicate.
FleetTier::Serves FleetArtifactServes(const Prepared& p) {
  return [&p](const v1::StoreEntry& e) {
    storage::v1::Artifact artifact;
    return ArtifactServes(p, e, &artifact);
  };
}

}  // namespace

std::optional<v1::CompileResponse> Pipeline::FleetLookup(const Prepared& p) const {
  if (deps_.fleet == nullptr) return std::nullopt;
  // Read before the fetch: a delete while it runs keeps its entry out.
  const uint64_t generation = hot_->generation();
  for (const CacheKey& candidate : p.lookup_keys) {
    // A server that tunes neither publishes heuristic answers nor takes them
    // (an older node's may be there): unchecked, they could be known wrong.
    if (p.can_tune && candidate.ArtifactKey() == p.heuristic_key.ArtifactKey()) continue;
    std::optional<v1::StoreEntry> e = deps_.fleet->Fetch(Store::Kind::kArtifact, candidate, FleetArtifactServes(p));
    if (!e) continue;
    if (std::optional<v1::CompileResponse> r = AnswerFromFleet(p, candidate, *e, generation)) {
      metrics().Lookup("fleet", true);
      return r;
    }
  }
  metrics().Lookup("fleet", false);  // Once a request, as the local tier.
  return std::nullopt;
}

std::optional<v1::CompileResponse> Pipeline::AnswerFromFleet(const Prepared& p, const CacheKey& key,
                                                             const v1::StoreEntry& entry,
                                                             uint64_t generation) const {
  storage::v1::Artifact artifact;
  if (!ArtifactServes(p, entry, &artifact) || !FitsAnAnswer(artifact.plan()).ok()) return std::nullopt;

  // Verified by the tier; the local copy makes later requests local hits
  // (memory serves them until it lands). A delete since this lookup began
  // (memory cleared) keeps the entry out of memory, and of the store unless
  // the delete lands between the writer's check and its write.
  if (!options_.read_only) {
    store_writer_->Submit([this, store = deps_.store, entry, id = p.request.request_id(), generation] {
      if (hot_->generation() != generation) return;
      if (absl::Status s = PutStoreEntry(*store, entry); !s.ok()) {
        metrics().StoreError("put");
        LogEvent(LogLevel::kWarning, "store_put_failed", {{"request_id", id}, {"key", entry.key()}, {"error", s.ToString()}});
      }
    });
  }
  v1::CompileResponse stored;
  *stored.mutable_plan() = std::move(*artifact.mutable_plan());
  v1::CompileResponse response = Answer(p, stored);  // Sources only if asked for.
  for (v1::Kernel& k : *stored.mutable_plan()->mutable_kernels()) k.clear_source();
  hot_->Put(key.ArtifactKey(), std::make_shared<const v1::CompileResponse>(std::move(stored)), generation);
  response.set_cache(v1::CACHE_OUTCOME_FLEET_HIT);
  LogEvent(LogLevel::kInfo, "fleet_hit",
           {{"request_id", p.request.request_id()}, {"key", entry.key()}, {"from_node", entry.node()}});
  return response;
}

absl::Status Pipeline::FitsAnAnswer(const v1::KernelPlan& plan) const {
  // A sixteenth is left for the rest of the response. The plan is measured
  // with its shortest names (a copy, only near the limit): what a caller's
  // names add is that caller's answer's to say (AnswerFits).
  const int64_t room = options_.max_message_bytes - options_.max_message_bytes / 16;
  if (static_cast<int64_t>(plan.ByteSizeLong()) <= room) return absl::OkStatus();
  const int64_t bytes = BytesWithShortNames(plan);
  if (bytes <= room) return absl::OkStatus();
  const size_t kernels = static_cast<size_t>(plan.kernels_size());
  return TooLargeForAnAnswer(bytes, kernels, kernels, /*code_only=*/false);
}

absl::Status Pipeline::AnswerFits(const v1::CompileResponse& response) const {
  // Room for the request id set after this check (at most 256 bytes).
  const int64_t bytes = static_cast<int64_t>(response.ByteSizeLong()) + 272;
  if (bytes <= options_.max_message_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "names: with this request's input, output and symbol names the answer is ", bytes,
      " bytes, past what kfused may send (--max_message_bytes ", options_.max_message_bytes,
      "); the plan is ", BytesWithShortNames(response.plan()), " bytes with the shortest names"));
}

absl::Status Pipeline::TooLargeForAnAnswer(int64_t bytes, size_t built, size_t kernels, bool code_only) const {
  return absl::UnimplementedError(absl::StrCat(
      "the plan is ", code_only ? "at least " : "", bytes, " bytes (", kernels, " kernels",
      built < kernels ? absl::StrCat(", ", built, " built") : "", "), past what an answer may take (kfused "
      "--max_message_bytes ", options_.max_message_bytes, "): send the chain as several chains"));
}

void Pipeline::NoteTooLarge(const Prepared& p, const absl::Status& why) const {
  absl::MutexLock lock(&too_large_mu_);
  constexpr size_t kMaxKnownTooLarge = 4096;  // Then it starts over.
  if (too_large_.size() >= kMaxKnownTooLarge) too_large_.clear();
  too_large_[p.key.ArtifactKey()] = why;
}

absl::Status Pipeline::KnownTooLarge(const Prepared& p) const {
  if (p.request.policy().force()) return absl::OkStatus();
  absl::MutexLock lock(&too_large_mu_);
  auto it = too_large_.find(p.key.ArtifactKey());
  if (it == too_large_.end()) return absl::OkStatus();
  return absl::Status(it->second.code(),
                      absl::StrCat(it->second.message(), " (found when it was built; a forced request builds again)"));
}

v1::CompileResponse Pipeline::Answer(const Prepared& p, const v1::CompileResponse& stored) const {
  v1::CompileResponse response = stored;
  if (!p.request.include_source()) {
    for (v1::Kernel& k : *response.mutable_plan()->mutable_kernels()) k.clear_source();
  }
  ApplyRequestNames(p, response.mutable_plan());
  response.set_cache(v1::CACHE_OUTCOME_HIT);
  response.set_request_id(p.request.request_id());
  return response;
}

absl::Status Pipeline::MeasuredWrong(const Prepared& p) const {
  // Force lets a request tune again; one that would get the heuristic
  // kernel (MODE_HEURISTIC, a cold start's answer) gets that known wrong one.
  if (!p.can_tune || (p.request.policy().force() && p.mode != TuneMode::kHeuristic)) return absl::OkStatus();
  // Another process on the store refused a chain, or lifted a refusal
  // (either moves the store's invalidations): read them again.
  ReadRefusals(/*always=*/false);
  const double now = SteadySeconds();
  absl::MutexLock lock(&wrong_mu_);
  auto it = wrong_.find(p.heuristic_key.ArtifactKey());
  if (it == wrong_.end()) return absl::OkStatus();
  if (now - it->second.at > kMeasuredWrongSeconds) {
    wrong_.erase(it);  // The store's row expires by itself.
    return absl::OkStatus();
  }
  return absl::InternalError(absl::StrCat(
      "kfused: tuning on this GPU measured this chain's kernel wrong ",
      static_cast<int64_t>(now - it->second.at), " s ago and found no variant right (",
      RenameQuotedSymbols(it->second.why, ShortSymbolNames(p.chain, /*back=*/true)),
      "); it is not served. A forced request (policy.force) tunes it again"));
}

bool Pipeline::RefusedHeuristic(const Prepared& p, const v1::KernelPlan& plan) const {
  return p.can_tune && plan.provenance().state() != v1::TUNE_STATE_TUNED && !MeasuredWrong(p).ok();
}

void Pipeline::WithdrawHeuristic(const Prepared& p, const std::string& why, bool no_other) const {
  if (!p.can_tune) return;
  // Held and stored in short names, as plans are; each refusal names its
  // caller's symbols (MeasuredWrong).
  const std::string held = RenameQuotedSymbols(why, ShortSymbolNames(p.chain));
  if (no_other) {
    absl::MutexLock lock(&wrong_mu_);
    // Bounded: expired entries go first, then (a flood of distinct failing
    // chains) the map starts over.
    constexpr size_t kMaxKnownWrong = 4096;
    if (wrong_.size() >= kMaxKnownWrong) {
      const double now = SteadySeconds();
      absl::erase_if(wrong_, [&](const auto& e) { return now - e.second.at > kMeasuredWrongSeconds; });
      if (wrong_.size() >= kMaxKnownWrong) wrong_.clear();
    }
    // Not stored until the Put below lands: a read of the store's refusals
    // meanwhile keeps it.
    wrong_[p.heuristic_key.ArtifactKey()] = KnownWrong{held, SteadySeconds(), /*stored=*/false};
    ++wrong_changes_;
  }
  if (no_other && !options_.read_only) {
    // Kept in the store too, so a restart does not serve it again.
    const auto until = absl::ToUnixMillis(absl::Now()) + static_cast<int64_t>(kMeasuredWrongSeconds * 1000);
    if (absl::Status s = deps_.store->PutRefusal({p.heuristic_key.ArtifactKey(), held, until}); !s.ok()) {
      metrics().StoreError("put");
      LogEvent(LogLevel::kWarning, "store_put_failed",
               {{"request_id", p.request.request_id()}, {"key", p.heuristic_key.ArtifactKey()},
                {"error", s.ToString()}});
    } else {
      absl::MutexLock lock(&wrong_mu_);
      if (auto it = wrong_.find(p.heuristic_key.ArtifactKey()); it != wrong_.end()) it->second.stored = true;
      ++wrong_changes_;
    }
  }
  CacheKey decision = p.heuristic_key;
  decision.generator = p.decision_key.generator;
  absl::StatusOr<int> removed = options_.read_only
                                    ? absl::StatusOr<int>(0)
                                    : deps_.store->Delete({p.heuristic_key.ArtifactKey(), decision.DecisionKey()});
  hot_->Erase(p.heuristic_key.ArtifactKey());  // After the delete: a racing read's Put is dropped.
  if (!removed.ok()) metrics().StoreError("delete");
  LogEvent(LogLevel::kWarning, "heuristic_withdrawn",
           {{"request_id", p.request.request_id()}, {"key", p.heuristic_key.ArtifactKey()},
            {"why", why}, {"removed", removed.ok() ? absl::StrCat(*removed) : removed.status().ToString()},
            {"refused_for_seconds", no_other ? absl::StrCat(kMeasuredWrongSeconds) : "0"}});
}

absl::StatusOr<v1::CompileResponse> Pipeline::Build(const Prepared& p, const ProgressFn& progress,
                                                    const std::atomic<bool>* cancel) const {
  // Queued before the verdict, or a heuristic build the verdict covers.
  KFUSE_RETURN_IF_ERROR(MeasuredWrong(p));
  KFUSE_RETURN_IF_ERROR(KnownTooLarge(p));
  FleetTier* fleet = deps_.fleet;
  if (fleet != nullptr && !p.request.policy().force()) {
    if (std::optional<v1::CompileResponse> hit = FleetLookup(p)) return *std::move(hit);
  }
  // A forced retune stays local (it is not published), and so does a
  // heuristic answer on a server that tunes (below), so neither takes a
  // lease: nodes that miss the key meanwhile do not wait for it.
  if (fleet == nullptr || options_.read_only || p.request.policy().force() ||
      (p.can_tune && p.mode == TuneMode::kHeuristic)) {
    return BuildGuarded(p, progress, cancel);
  }
  // One node of the fleet builds a key; the others wait for its result.
  const bool wants_tuning = p.can_tune && p.mode != TuneMode::kHeuristic;
  // A holder tuning the key may take its budget for each kernel; waiting
  // nodes wait that long (and a lease) before they build too.
  const double build_seconds = wants_tuning ? p.budget_seconds * static_cast<double>(p.partition.kernels.size()) : 0;
  const uint64_t generation = hot_->generation();
  FleetTier::Turn turn = fleet->AwaitTurn(
      p.key, cancel, FleetArtifactServes(p), wants_tuning ? std::optional<double>(build_seconds) : std::nullopt);
  if (turn.arrived && !p.request.policy().force()) {
    std::optional<v1::CompileResponse> r = AnswerFromFleet(p, p.key, *turn.arrived, generation);
    if (r) {
      metrics().FleetArrived();  // Published after this node's fleet miss.
      fleet->EndTurn(p.key, turn);
      return *std::move(r);
    }
  }
  absl::StatusOr<v1::CompileResponse> r = BuildGuarded(p, progress, cancel);
  fleet->EndTurn(p.key, turn);
  return r;
}

absl::StatusOr<v1::CompileResponse> Pipeline::BuildGuarded(const Prepared& p, const ProgressFn& progress,
                                                           const std::atomic<bool>* cancel) const {
  // A build runs on a job thread, where an exception would end the process:
  // a bug the chain meets in a generator is this request's answer (INTERNAL,
  // logged), and the fleet's turn above is still ended.
  bool returned = false;
  absl::StatusOr<v1::CompileResponse> r = CatchingBugs("building the plan", [&] {
    absl::StatusOr<v1::CompileResponse> built = BuildHere(p, progress, cancel);
    returned = true;
    return built;
  });
  if (!returned) {
    LogEvent(LogLevel::kError, "build_failed",
             {{"request_id", p.request.request_id()}, {"error", r.status().ToString()}});
  }
  return r;
}

absl::StatusOr<v1::CompileResponse> Pipeline::BuildHere(const Prepared& p, const ProgressFn& progress,
                                                        const std::atomic<bool>* cancel) const {
  if (options_.read_only) {
    return absl::FailedPreconditionError(
        "this server is read-only and the chain is not in its store; ask a server that compiles");
  }
  auto start = std::chrono::steady_clock::now();
  const Partition& part = p.partition;

  // A stored decision survives toolchain upgrades: recompile, do not retune.
  std::optional<storage::v1::Decision> decision;
  if (!p.request.policy().force()) {
    // A decision serves when it is tuned (or tuning is not asked for) and
    // the current generators accept its variants (others are retuned).
    auto usable = [&](const std::string& blob) -> std::optional<storage::v1::Decision> {
      storage::v1::Decision d;
      if (!d.ParseFromString(blob) || d.variants_size() != static_cast<int>(part.kernels.size()) ||
          !(d.state() == v1::TUNE_STATE_TUNED || !p.can_tune || p.mode == TuneMode::kHeuristic)) {
        return std::nullopt;
      }
      for (size_t i = 0; i < part.kernels.size(); ++i) {
        absl::StatusOr<Variant> v = FromProto(d.variants(static_cast<int>(i)));
        if (!v.ok() || !CanGenerateFamily(p.chain, part.kernels[i], *v).ok()) return std::nullopt;
      }
      return d;
    };
    absl::StatusOr<std::optional<std::string>> read = deps_.store->GetDecision(p.decision_key);
    if (!read.ok()) NoteReadFailure(p, p.decision_key.DecisionKey(), read.status());
    const std::optional<std::string> blob = read.ok() ? *std::move(read) : std::nullopt;
    if (blob) decision = usable(*blob);
    if (!blob && deps_.fleet != nullptr && !(p.can_tune && p.mode == TuneMode::kHeuristic)) {
      // Tuned by another node for another toolchain or generator version.
      auto serves = [&](const v1::StoreEntry& e) { return usable(e.blob()).has_value(); };
      if (std::optional<v1::StoreEntry> e = deps_.fleet->Fetch(Store::Kind::kDecision, p.decision_key, serves)) {
        decision = usable(e->blob());
        if (absl::Status s = PutStoreEntry(*deps_.store, *e); !s.ok()) {
          metrics().StoreError("put");
          LogEvent(LogLevel::kWarning, "store_put_failed",
                   {{"request_id", p.request.request_id()}, {"key", e->key()}, {"error", s.ToString()}});
        }
      }
    }
  }

  // Measured figures of this GPU, or the target's nominal ones.
  Ceilings ceilings = p.can_tune ? p.gpu->ceilings : NominalCeilings(p.compute_capability);

  std::vector<BuiltKernel> built;
  int total_trials = 0;
  ReproQuota repro_quota(options_.repro_limits.per_request);
  for (size_t i = 0; i < part.kernels.size(); ++i) {
    const KernelGroup& group = part.kernels[i];
    BuiltKernel b;
    // A stored decision that fails here (made elsewhere: another toolchain,
    // generator or node) is retuned from kernel 0, not a failed request.
    auto tune_afresh = [&](const Variant& v, const std::string& error) {
      LogEvent(LogLevel::kWarning, "stored_decision_failed",
               {{"request_id", p.request.request_id()}, {"variant", v.ToString()},
                {"error", error}, {"effect", "tuning afresh"}});
      decision.reset();
      built.clear();
      total_trials = 0;
      i = static_cast<size_t>(-1);  // The loop's ++i starts over at kernel 0.
    };
    if (decision) {
      KFUSE_ASSIGN_OR_RETURN(Variant v, FromProto(decision->variants(i)));
      absl::StatusOr<CompiledKernel> kernel =
          CompileVariant(p.chain, group, v, p.arch, *deps_.compiler, cancel);
      if (!kernel.ok()) {
        if (LeavesRepro(kernel.status()))
          LeaveRepro(p, i, ReproKind::kCompileError, v, Numerics::kFast, kernel.status().message());
        if (kernel.status().code() == absl::StatusCode::kCancelled) return kernel.status();
        tune_afresh(v, kernel.status().ToString());
        continue;
      }
      // A build from a stored decision (a new toolchain or generator, or
      // an evicted artifact) has not been checked: on a GPU that tunes, it
      // is checked (untimed) before it serves, and one that fails is retuned.
      if (p.can_tune && decision->state() == v1::TUNE_STATE_TUNED) {
        TuneOptions co;
        co.arch = p.arch;
        co.symbol_values = p.symbol_values;
        co.cancel = cancel;
        absl::StatusOr<Trial> checked =
            CheckKernel(p.chain, group, *kernel, co, *deps_.compiler, *p.gpu->runner);
        if (cancel != nullptr && cancel->load()) return absl::CancelledError("compile cancelled: no caller waits");
        if (!checked.ok()) {
          LogEvent(LogLevel::kWarning, "stored_decision_unchecked",
                   {{"request_id", p.request.request_id()}, {"variant", v.ToString()},
                    {"error", checked.status().ToString()}, {"effect", "served as stored"}});
        } else if (checked->outcome != Outcome::kOk) {
          if (std::optional<ReproKind> kind = ReproKindOf(checked->outcome))
            LeaveRepro(p, i, *kind, v, Numerics::kFast, checked->message, checked->symbol_values);
          tune_afresh(v, absl::StrCat(std::string(OutcomeName(checked->outcome)), ": ", checked->message));
          continue;
        }
        if (checked.ok()) b.result.checked_sizes = CheckedSizes(p.symbol_values);
      }
      b.result.kernel = *std::move(kernel);
      b.result.best = v;
      b.result.tuned = decision->state() == v1::TUNE_STATE_TUNED;
      if (i < static_cast<size_t>(decision->measured_seconds_size()))
        b.result.report.measured_seconds = decision->measured_seconds(i);
    } else {
      TuneOptions to;
      to.mode = p.can_tune ? p.mode : TuneMode::kHeuristic;
      to.budget_seconds = p.budget_seconds;
      to.arch = p.arch;
      to.ceilings = ceilings;
      to.symbol_values = p.symbol_values;
      to.cancel = cancel;
      auto on_trial = [&](const Trial& t, int done, int total) {
        if (!progress) return;
        v1::TuneProgress msg;
        msg.set_phase(t.symbol_values.empty() ? "tune" : "check");
        msg.set_kernel(static_cast<uint32_t>(i));
        msg.set_kernels(static_cast<uint32_t>(part.kernels.size()));
        msg.set_done(done);
        msg.set_total(total);
        *msg.mutable_trial() = ToProto(t);
        progress(msg);
      };
      absl::StatusOr<TuneResult> tuned =
          TuneKernel(p.chain, group, to, *deps_.compiler, p.can_tune ? p.gpu->runner : nullptr, on_trial);
      if (!tuned.ok()) {
        // What fails here is the seed variant (or its yardsticks).
        if (LeavesRepro(tuned.status())) {
          const Variant seed = SeedVariant(p.chain, group, ComputeCapabilityOf(to.arch))
                                   .value_or(FamilyHeuristic(p.chain, group));
          LeaveRepro(p, i, ReproKind::kCompileError, seed, FailedNumerics(tuned.status()),
                     tuned.status().message());
        }
        return tuned.status();
      }
      b.result = *std::move(tuned);
      for (const Trial& t : b.result.trials) {
        std::optional<ReproKind> kind = ReproKindOf(t.outcome);
        if (kind && repro_quota.Take(i, *kind))
          LeaveRepro(p, i, *kind, t.variant, Numerics::kFast, t.message, t.symbol_values);
      }
      // A kernel measured wrong is neither served nor stored; its bundle is
      // left above. The answer given without tuning is that kernel: it goes.
      if (!b.result.seed_failure.empty()) {
        WithdrawHeuristic(p, absl::StrCat("kernel ", i, ": ", b.result.seed_failure), b.result.seed_failed);
      }
      if (b.result.seed_failed) {
        return absl::InternalError(absl::StrCat("kernel ", i, ": ", b.result.untuned_reason));
      }
      if (b.result.untuned_reason.empty() && !b.result.tuned) b.result.untuned_reason = p.untuned_reason;
    }
    if (cancel != nullptr && cancel->load()) return absl::CancelledError("compile cancelled: no caller waits");
    b.result.kernel.spec.partition_reason = group.reason;
    b.result.kernel.spec.ops = WireOps(p.chain, group.nodes);
    // Generators name intermediates by node id; the plan by position.
    KFUSE_RETURN_IF_ERROR(NumberIntermediates(part, &b.result.kernel.spec));
    b.report = Roofline(AnalyzeWork(p.chain, group.nodes, p.symbol_values), ceilings);
    b.report.sizes = SizesOf(p.chain, p.symbol_values);
    b.report.measured_seconds = b.result.report.measured_seconds;
    if (b.report.measured_seconds > 0) b.report.fraction_of_roofline = b.report.predicted_seconds / b.report.measured_seconds;
    total_trials += static_cast<int>(b.result.trials.size());
    built.push_back(std::move(b));
    // The kernels' code alone (source, PTX and cubin, as the plan holds
    // them) past what an answer may take: refused now, not after the rest
    // is built.
    int64_t code_bytes = 0;
    for (const BuiltKernel& k : built) {
      code_bytes += static_cast<int64_t>(k.result.kernel.spec.source.size() + k.result.kernel.ptx.size() +
                                         k.result.kernel.cubin.size());
    }
    if (code_bytes + options_.max_message_bytes / 16 > options_.max_message_bytes) {
      absl::Status too_large = TooLargeForAnAnswer(code_bytes, built.size(), part.kernels.size(), /*code_only=*/true);
      NoteTooLarge(p, too_large);
      return too_large;
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  bool tuned = !built.empty();
  for (const BuiltKernel& b : built) tuned &= b.result.tuned;
  v1::KernelPlan plan;
  plan.set_api_version("kfuse.v1");
  plan.set_key(p.key.ArtifactKey());
  AddSymbols(p.chain, &plan);
  for (const IntermediateBuffer& buffer : IntermediateBuffers(p.chain, part)) {
    v1::Intermediate* im = plan.add_intermediates();
    im->set_dtype(static_cast<v1::DType>(buffer.dtype));
    for (const SizeExpr& d : buffer.shape) *im->add_shape() = ToProto(d);
  }
  Work total;
  double measured = 0;
  for (const BuiltKernel& b : built) {
    v1::Kernel* k = plan.add_kernels();
    *k = ToProto(b.result.kernel, /*include_source=*/true);
    *k->mutable_report() = ToProto(b.report);
    for (const std::vector<int64_t>& sizes : b.result.checked_sizes) {
      v1::SymbolSizes* checked = k->add_checked_at();
      for (const auto& [name, value] : SizesOf(p.chain, sizes)) (*checked->mutable_sizes())[name] = value;
    }
    total.bytes += b.report.work.bytes;
    total.flops.fma += b.report.work.flops.fma;
    total.flops.special += b.report.work.flops.special;
    total.flops.tensor += b.report.work.flops.tensor;
    total.flops.integer += b.report.work.flops.integer;
    measured += b.report.measured_seconds;
  }
  ApplyRequestNames(p, &plan);
  RooflineReport whole = Roofline(total, ceilings);
  whole.sizes = SizesOf(p.chain, p.symbol_values);
  whole.measured_seconds = tuned ? measured : 0;
  if (whole.measured_seconds > 0) whole.fraction_of_roofline = whole.predicted_seconds / whole.measured_seconds;
  *plan.mutable_report() = ToProto(whole);

  v1::Provenance* prov = plan.mutable_provenance();
  prov->set_generator_version(p.key.generator);
  prov->set_nvrtc_version(deps_.compiler->Version());
  if (p.gpu && tuned) *prov->mutable_device() = ToProto(p.gpu->device);
  prov->set_state(tuned ? v1::TUNE_STATE_TUNED : v1::TUNE_STATE_HEURISTIC);
  if (!tuned) {
    std::string reason = p.untuned_reason;
    for (const BuiltKernel& b : built)
      if (!b.result.untuned_reason.empty()) reason = b.result.untuned_reason;
    prov->set_reason(reason);
  }
  prov->set_created_unix_ms(NowMs());
  prov->set_node(options_.node);
  prov->set_trials(total_trials);
  prov->set_tuning_seconds(seconds);
  const uint32_t failed = SetFailedTrials(built, prov);
  // Stored, remembered and published with the short names: a caller's own
  // names are its answer's alone (ApplyRequestNames, below and on hits).
  ShortenNames(&plan);
  // An answer the server could not send would be stored and then fail at
  // every hit: refused whole, nothing stored, and nothing the build
  // settles (below) changed.
  if (absl::Status fits = FitsAnAnswer(plan); !fits.ok()) {
    NoteTooLarge(p, fits);  // By key: the size is the plan's, whatever its names.
    return fits;
  }
  if (tuned) {  // A forced retune found a kernel right: the chain serves again.
    bool was_refused = false;
    {
      absl::MutexLock lock(&wrong_mu_);
      if (wrong_.erase(p.heuristic_key.ArtifactKey()) > 0) {
        was_refused = true;
        ++wrong_changes_;
      }
    }
    if (was_refused && !options_.read_only) {
      if (absl::Status s = deps_.store->DeleteRefusal(p.heuristic_key.ArtifactKey()); !s.ok())
        metrics().StoreError("delete");
    }
  }

  // Store: the decision first (it survives toolchain changes), then the
  // artifact. A store failure is logged; the caller still gets its plan.
  // The fleet gets what serves the key: a heuristic answer to a request for
  // tuning (tuning deferred or failed) stays local, or it would stand in the
  // fleet (a signer's entry is never rewritten) where a tuned one belongs;
  // so does any heuristic answer of a server that tunes (a cold start's):
  // not checked on the GPU yet, it could not be withdrawn from the fleet if
  // the tuning found it wrong (WithdrawHeuristic). A forced retune stays
  // local too, as documented (docs/cache.md).
  const bool publish = deps_.fleet != nullptr && !p.request.policy().force() && (tuned || !p.can_tune);
  EntryMeta meta;
  meta.family = std::string(FamilyName(part.kernels.front().family));
  meta.arch = p.arch;
  meta.device = p.gpu && tuned ? p.gpu->device.name : p.arch;
  meta.state = tuned ? "tuned" : "heuristic";
  meta.description = ShortDescription(p.chain);
  if (!decision) {
    storage::v1::Decision d;
    // Stored, as plans are, without the builder's symbol names.
    const std::map<std::string, std::string> short_names = ShortSymbolNames(p.chain);
    for (const BuiltKernel& b : built) {
      *d.add_variants() = ToProto(b.result.best);
      for (const Trial& t : b.result.trials) {
        v1::Trial* stored = d.add_trials();
        *stored = ToProto(t);
        stored->set_message(RenameQuotedSymbols(stored->message(), short_names));
      }
      d.add_measured_seconds(b.report.measured_seconds);
    }
    d.set_state(prov->state());
    d.set_tuning_seconds(seconds);
    if (p.gpu && tuned) *d.mutable_device() = ToProto(p.gpu->device);
    const std::string blob = d.SerializeAsString();
    absl::Status s = deps_.store->PutDecision(p.decision_key, blob, meta);
    if (!s.ok()) {
      metrics().StoreError("put");
      LogEvent(LogLevel::kWarning, "store_put_failed",
               {{"request_id", p.request.request_id()}, {"kind", "decision"}, {"error", s.ToString()}});
    }
    if (publish) deps_.fleet->Publish(Store::Kind::kDecision, p.decision_key, meta, blob);
  }
  storage::v1::Artifact artifact;
  *artifact.mutable_plan() = plan;
  const std::string artifact_blob = artifact.SerializeAsString();
  EntryMeta artifact_meta = meta;
  artifact_meta.decision_key = p.decision_key.DecisionKey();
  // Memory takes the plan only if nothing was deleted after the store took
  // it, so a delete racing the build cannot leave memory serving a plan the
  // store no longer has.
  const uint64_t generation = hot_->generation();
  absl::Status s = deps_.store->PutArtifact(p.key, artifact_blob, artifact_meta);
  if (!s.ok()) {
    metrics().StoreError("put");
    LogEvent(LogLevel::kWarning, "store_put_failed",
             {{"request_id", p.request.request_id()}, {"kind", "artifact"}, {"error", s.ToString()}});
  }
  if (publish) deps_.fleet->Publish(Store::Kind::kArtifact, p.key, meta, artifact_blob);
  metrics().BuildSeconds(decision ? "decision" : tuned ? "tuned" : "heuristic", seconds);
  for (const BuiltKernel& b : built) {
    for (const Trial& t : b.result.trials) {
      if (t.compile_seconds > 0) metrics().CompileSeconds(t.compile_seconds);
      const std::string_view outcome = OutcomeName(t.outcome);
      metrics().Trial(absl::string_view(outcome.data(), outcome.size()));
    }
  }
  LogEvent(failed > 0 ? LogLevel::kWarning : LogLevel::kInfo, "build",
           {{"request_id", p.request.request_id()}, {"key", p.key.ArtifactKey()},
            {"state", meta.state}, {"reused_decision", decision ? "true" : "false"},
            {"kernels", absl::StrCat(built.size())}, {"trials", absl::StrCat(total_trials)},
            {"failed_trials", absl::StrCat(failed)}, {"seconds", absl::StrFormat("%.3f", seconds)},
            {"client", p.request.env().client()},
            {"client_driver", absl::StrCat(p.request.env().driver_version())}});

  v1::CompileResponse response;
  *response.mutable_plan() = std::move(plan);
  // Memory keeps plans without their sources, as hits answer most callers.
  auto bare = std::make_shared<v1::CompileResponse>(response);
  for (v1::Kernel& k : *bare->mutable_plan()->mutable_kernels()) k.clear_source();
  if (!p.request.include_source()) response = *bare;
  hot_->Put(p.key.ArtifactKey(), std::move(bare), generation);
  ApplyRequestNames(p, response.mutable_plan());
  response.set_cache(v1::CACHE_OUTCOME_MISS);
  response.set_request_id(p.request.request_id());
  return response;
}

void Pipeline::LeaveRepro(const Prepared& p, size_t index, ReproKind kind, const Variant& variant,
                          Numerics numerics, absl::string_view message,
                          absl::Span<const int64_t> sizes) const {
  if (options_.repro_dir.empty()) return;
  const KernelGroup& group = p.partition.kernels[index];
  ReproInfo info;
  info.kind = kind;
  info.chain = p.request.chain();
  info.kernel_index = static_cast<int>(index);
  info.variant = variant;
  info.numerics = numerics;
  // A generator that rejects the variant leaves no kernel.cu; the message says why.
  if (absl::StatusOr<KernelSpec> spec = EmitFamily(p.chain, group, variant, numerics); spec.ok()) {
    info.entry = spec->entry;
    info.source = std::move(spec->source);
  }
  info.message = std::string(message);
  info.key = p.key.ArtifactKey();
  info.symbol_values = sizes.empty() ? p.symbol_values : std::vector<int64_t>(sizes.begin(), sizes.end());
  info.generator_version = GeneratorVersion(group.family);
  info.nvrtc_version = deps_.compiler->Version();
  info.arch = p.arch;
  CompileOptions copts;
  copts.arch = p.arch;
  info.compile_options = NvrtcOptions(copts);
  info.driver_version = options_.driver_version;
  if (p.gpu) info.device = p.gpu->device;
  absl::StatusOr<std::string> dir = WriteReproBundle(options_.repro_dir, info, options_.repro_limits);
  if (dir.ok()) {
    LogEvent(LogLevel::kWarning, "repro_bundle",
             {{"request_id", p.request.request_id()}, {"what", std::string(ReproKindName(kind))},
              {"kernel", absl::StrCat(index)}, {"variant", variant.ToString()}, {"bundle", *dir}});
  } else {
    LogEvent(LogLevel::kWarning, "repro_bundle_failed",
             {{"request_id", p.request.request_id()}, {"error", dir.status().ToString()}});
  }
}

std::vector<std::string> ServedArchs() {
  std::vector<std::string> out;
  for (const std::string& arch : SupportedArchs()) {
    absl::string_view s = arch;
    if (!absl::ConsumePrefix(&s, "sm_")) continue;
    const bool specific = absl::ConsumeSuffix(&s, "a");
    uint32_t cc = 0;
    if (!absl::SimpleAtoi(s, &cc)) continue;  // 'f' (family) targets: no Target names them.
    v1::Target t;
    t.set_compute_capability(cc);
    t.set_arch_specific(specific);
    if (absl::StatusOr<std::string> served = ArchFor(t, cc); served.ok() && *served == arch) out.push_back(arch);
  }
  return out;
}

// The request's own words reach every log line of its build; a bound keeps
// one request from writing megabytes of log.
constexpr size_t kMaxLoggedText = 256;

absl::Status CheckLoggedText(const v1::CompileRequest& request) {
  if (request.request_id().size() > kMaxLoggedText) {
    return absl::InvalidArgumentError(absl::StrCat("request_id: ", request.request_id().size(),
                                                   " bytes; at most ", kMaxLoggedText));
  }
  if (request.env().client().size() > kMaxLoggedText) {
    return absl::InvalidArgumentError(absl::StrCat("env.client: ", request.env().client().size(),
                                                   " bytes; at most ", kMaxLoggedText));
  }
  return absl::OkStatus();
}

std::string NewRequestId() {
  static std::atomic<uint64_t> counter{0};
  static const int64_t start = absl::ToUnixNanos(absl::Now());
  return absl::StrCat(absl::Hex(start), "-", counter.fetch_add(1));
}

std::string RenameQuotedSymbols(absl::string_view text, const std::map<std::string, std::string>& renamed) {
  std::vector<std::pair<std::string, std::string>> quoted;
  for (const auto& [from, to] : renamed) {
    if (from != to) quoted.emplace_back(validate_internal::Quote(from), validate_internal::Quote(to));
  }
  if (quoted.empty()) return std::string(text);
  std::string out;
  for (size_t i = 0; i < text.size();) {
    bool replaced = false;
    if (text[i] == '"') {
      for (const auto& [from, to] : quoted) {
        if (text.substr(i, from.size()) == from) {
          out += to;
          i += from.size();
          replaced = true;
          break;
        }
      }
    }
    if (!replaced) out += text[i++];
  }
  return out;
}

std::map<std::string, std::string> ShortSymbolNames(const Chain& chain, bool back) {
  std::map<std::string, std::string> renamed;
  for (size_t s = 0; s < chain.symbols.size(); ++s) {
    std::string short_name = absl::StrCat("s", s);
    if (back) {
      renamed[std::move(short_name)] = chain.symbols[s].name;
    } else {
      renamed[chain.symbols[s].name] = std::move(short_name);
    }
  }
  return renamed;
}

namespace {

// Reports key their sizes by symbol name, and texts quote it: renames
// those keys and mentions.
void RenameSizeReports(const std::map<std::string, std::string>& renamed, v1::KernelPlan* plan) {
  auto rename_sizes = [&](google::protobuf::Map<std::string, int64_t>* named) {
    google::protobuf::Map<std::string, int64_t> sizes;
    for (const auto& [name, value] : *named) {
      auto it = renamed.find(name);
      sizes[it == renamed.end() ? name : it->second] = value;
    }
    *named = std::move(sizes);
  };
  if (plan->has_report()) rename_sizes(plan->mutable_report()->mutable_sizes());
  for (v1::Kernel& k : *plan->mutable_kernels()) {
    if (k.has_report()) rename_sizes(k.mutable_report()->mutable_sizes());
    for (v1::SymbolSizes& checked : *k.mutable_checked_at()) rename_sizes(checked.mutable_sizes());
    k.set_partition_reason(RenameQuotedSymbols(k.partition_reason(), renamed));
  }
  if (plan->has_provenance()) {
    plan->mutable_provenance()->set_reason(RenameQuotedSymbols(plan->provenance().reason(), renamed));
  }
}

}  // namespace

void ShortenNames(v1::KernelPlan* plan) {
  std::map<std::string, std::string> renamed;
  for (int s = 0; s < plan->symbols_size(); ++s) {
    renamed[plan->symbols(s).name()] = absl::StrCat("s", s);
    plan->mutable_symbols(s)->set_name(absl::StrCat("s", s));
  }
  RenameSizeReports(renamed, plan);
  for (auto* specs : {plan->mutable_inputs(), plan->mutable_outputs()}) {
    for (v1::TensorSpec& t : *specs) {
      t.clear_name();
      for (v1::Dim& d : *t.mutable_shape()) {
        if (d.kind_case() != v1::Dim::kSymbol) continue;
        auto it = renamed.find(d.symbol());
        if (it != renamed.end()) d.set_symbol(it->second);
      }
    }
  }
}

int64_t BytesWithShortNames(const v1::KernelPlan& plan) {
  v1::KernelPlan p = plan;
  ShortenNames(&p);
  return static_cast<int64_t>(p.ByteSizeLong());
}

void ApplyRequestNames(const Prepared& p, v1::KernelPlan* plan) {
  // The stored plan's names become this request's, in the size reports as
  // in the symbols themselves (below).
  std::map<std::string, std::string> renamed;
  for (int s = 0; s < plan->symbols_size() && s < static_cast<int>(p.chain.symbols.size()); ++s) {
    renamed[plan->symbols(s).name()] = p.chain.symbols[s].name;
  }
  RenameSizeReports(renamed, plan);
  *plan->mutable_inputs() = p.request.chain().inputs();
  plan->clear_outputs();
  for (int j = 0; j < static_cast<int>(p.chain.outputs.size()); ++j) {
    *plan->add_outputs() = OutputSpec(p.chain, j, p.request.chain().outputs(j).name());
  }
  for (int s = 0; s < plan->symbols_size() && s < static_cast<int>(p.chain.symbols.size()); ++s) {
    plan->mutable_symbols(s)->set_name(p.chain.symbols[s].name);
  }
}

}  // namespace kfuse
