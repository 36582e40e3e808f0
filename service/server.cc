#include "service/server.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "codegen/generators.h"
#include "codegen/partition.h"
#include "core/key.h"
#include "service/convert.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  // The message travels in a trailer, whose size clients cap (8 KiB by
  // default; a larger one turns any error into RESOURCE_EXHAUSTED).
  constexpr size_t kMaxMessage = 4096;
  std::string message(s.message());
  if (message.size() > kMaxMessage) {
    const size_t cut = message.size() - kMaxMessage;
    message = absl::StrCat(message.substr(0, kMaxMessage), "... (", cut, " more bytes)");
  }
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), message);
}

namespace {

// Threads for store administration: explain, export's listing, delete, import.
constexpr int kAdminThreads = 2;

// Tasks a job pool may hold queued, left jobs' included (their callers gone,
// they end as they start): 4 x max_queued_jobs, and at least this many.
constexpr int kMinQueuedTasks = 64;

// What a caller leaving does to its job (JobTable::Leave): the last waiter
// of a job not asked for as background work cancels it.
constexpr char kJobAfterLeaving[] = "the job stops unless another caller waits for it";

// A reactor kept alive by shared ownership: gRPC's reference is dropped in
// OnDone, the job's callbacks hold theirs, so a late callback never touches a
// deleted reactor; once done, callbacks do nothing.
template <typename Self>
class Shared {
 public:
  std::shared_ptr<Self> Retain(Self* self) {
    self_ = std::shared_ptr<Self>(self);
    return self_;
  }
  void Release() {
    std::shared_ptr<Self> keep = std::move(self_);  // Deletes after return.
  }

 private:
  std::shared_ptr<Self> self_;
};

// A unary call answered by whichever comes first: the job's result or the
// caller leaving. Exactly one of them finishes the call.
class WaitingUnary final : public grpc::ServerUnaryReactor {
 public:
  WaitingUnary(JobTable* jobs, v1::CompileResponse* resp) : jobs_(jobs), resp_(resp) {}
  std::shared_ptr<WaitingUnary> Start() { return owner_.Retain(this); }

  void Attach(JobTable::Ticket t) {
    absl::MutexLock lock(&mu_);
    ticket_ = std::move(t);
  }
  // Called from the job's thread with its result.
  void Complete(const JobTable::Result& r) {
    if (finished_.exchange(true)) return;
    if (r.ok()) *resp_ = *r;
    Finish(ToGrpc(r.status()));
  }

  void OnCancel() override {
    if (finished_.exchange(true)) return;
    JobTable::Ticket t;
    {
      absl::MutexLock lock(&mu_);
      t = ticket_;
    }
    if (t.job) jobs_->Leave(t);
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, absl::StrCat("the caller left (deadline or cancellation); ",
                                                                   kJobAfterLeaving)));
  }
  void OnDone() override { owner_.Release(); }

 private:
  JobTable* jobs_;
  v1::CompileResponse* resp_;
  std::atomic<bool> finished_{false};
  absl::Mutex mu_;
  JobTable::Ticket ticket_ ABSL_GUARDED_BY(mu_);
  Shared<WaitingUnary> owner_;
};

// The Tune stream: progress messages queue up and are written one at a time;
// the last carries the result.
class TuneStream final : public grpc::ServerWriteReactor<v1::TuneProgress> {
 public:
  explicit TuneStream(JobTable* jobs) : jobs_(jobs) {}
  std::shared_ptr<TuneStream> Start() { return owner_.Retain(this); }

  void Attach(JobTable::Ticket t) {
    absl::MutexLock lock(&mu_);
    ticket_ = std::move(t);
  }
  void Push(const v1::TuneProgress& msg) {
    absl::MutexLock lock(&mu_);
    if (closing_) return;
    queue_.push_back(msg);
    Pump();
  }
  void Complete(const JobTable::Result& r) {
    absl::MutexLock lock(&mu_);
    if (closing_) return;
    closing_ = true;
    if (r.ok()) {
      v1::TuneProgress last;
      last.set_phase("done");
      *last.mutable_result() = *r;
      queue_.push_back(std::move(last));
    }
    final_ = ToGrpc(r.status());
    Pump();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!queue_.empty()) queue_.pop_front();
    if (!ok) {
      closing_ = true;
      queue_.clear();
      final_ = grpc::Status(grpc::StatusCode::CANCELLED, absl::StrCat("the stream broke; ", kJobAfterLeaving));
    }
    Pump();
  }
  void OnCancel() override {
    JobTable::Ticket t;
    {
      absl::MutexLock lock(&mu_);
      closing_ = true;
      t = ticket_;
      // A message being written must live until OnWriteDone.
      queue_.erase(queue_.begin() + (writing_ && !queue_.empty() ? 1 : 0), queue_.end());
      final_ = grpc::Status(grpc::StatusCode::CANCELLED, absl::StrCat("the caller left; ", kJobAfterLeaving));
      Pump();
    }
    if (t.job) jobs_->Leave(t);
  }
  void OnDone() override { owner_.Release(); }

 private:
  void Pump() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (!queue_.empty()) {
      writing_ = true;
      StartWrite(&queue_.front());
    } else if (closing_) {
      finished_ = true;
      Finish(final_);
    }
  }

  JobTable* jobs_;
  absl::Mutex mu_;
  std::deque<v1::TuneProgress> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_ ABSL_GUARDED_BY(mu_);
  JobTable::Ticket ticket_ ABSL_GUARDED_BY(mu_);
  Shared<TuneStream> owner_;
};

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* ctx, const absl::Status& s) {
  auto* r = ctx->DefaultReactor();
  r->Finish(ToGrpc(s));
  return r;
}

// `m` with the symbols its trial's message quotes renamed by `renamed`.
v1::TuneProgress RenamedTrial(const v1::TuneProgress& m, const std::map<std::string, std::string>& renamed) {
  v1::TuneProgress out = m;
  if (m.has_trial()) out.mutable_trial()->set_message(RenameQuotedSymbols(m.trial().message(), renamed));
  return out;
}

}  // namespace

KernelServiceImpl::KernelServiceImpl(Pipeline* pipeline, ServiceOptions options)
    : pipeline_(pipeline), options_(std::move(options)),
      pool_(std::make_unique<ThreadPool>(options_.job_threads)),
      background_pool_(std::make_unique<ThreadPool>(options_.job_threads)),
      admin_pool_(std::make_unique<ThreadPool>(kAdminThreads)) {
  if (options_.metrics == nullptr) options_.metrics = &NullMetrics();
  seen_epoch_ = pipeline_->AnswersEpoch();
}

KernelServiceImpl::~KernelServiceImpl() { Drain(); }

int KernelServiceImpl::queued_admin_calls() const {
  // A call just queued while a thread is idle is about to run, not waiting.
  return std::max(0, admin_pool_->queued() - admin_pool_->idle());
}

absl::Status KernelServiceImpl::AdminRoom() const {
  // As the job queues: at most max_queued_admin_calls wait beyond the idle
  // threads (0: a call is taken only by an idle thread). Checked apart from
  // the submission, so concurrent calls can overshoot by a few.
  const int queued = admin_pool_->queued(), idle = admin_pool_->idle();
  if (queued < options_.max_queued_admin_calls + idle) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("kfused: ", queued - idle, " store administration calls wait already; retry later"));
}

int KernelServiceImpl::building() const {
  absl::MutexLock l(&building_mu_);
  return building_;
}

void KernelServiceImpl::AddBuilding(int delta) {
  absl::MutexLock l(&building_mu_);
  building_ += delta;
  options_.metrics->SetJobsRunning(building_);
}

void KernelServiceImpl::DropStaleAnswers() {
  const uint64_t now = pipeline_->AnswersEpoch();
  // A load on the hit path. Memory is cleared before the new count is
  // published, so a caller that sees the count current never reads what
  // the clear is about to drop.
  uint64_t seen = seen_epoch_.load();
  if (seen == now) return;
  pipeline_->ClearHot();
  answers_.Clear();
  seen_epoch_.compare_exchange_strong(seen, now);
}

absl::Status KernelServiceImpl::Authorize(grpc::CallbackServerContext* ctx) const {
  if (options_.tokens == nullptr) return absl::OkStatus();
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  absl::string_view value = it == md.end() ? absl::string_view()
                                           : absl::string_view(it->second.data(), it->second.size());
  return options_.tokens->Check(value);
}

absl::Status KernelServiceImpl::Sign(v1::CompileResponse* resp) const {
  if (options_.signing_key != nullptr && resp->has_plan()) SignPlan(*options_.signing_key, resp->mutable_plan());
  return pipeline_->AnswerFits(*resp);
}

JobTable::Result KernelServiceImpl::Signed(JobTable::Result r) const {
  if (!r.ok()) return r;
  if (absl::Status s = Sign(&*r); !s.ok()) return s;
  return r;
}

// Safe only once the server stopped taking calls (main calls it after
// Server::Shutdown, which waits for every reactor to be done).
void KernelServiceImpl::Drain() {
  pool_.reset();
  background_pool_.reset();
  admin_pool_.reset();
}

JobTable::Result KernelServiceImpl::ForWaiter(const Prepared& p, JobTable::Result r, bool joined) const {
  if (joined) options_.metrics->Joined();  // Whatever the job's outcome.
  if (!r.ok()) {  // The job's message names symbols as ShortenNames does.
    return absl::Status(r.status().code(),
                        RenameQuotedSymbols(r.status().message(), ShortSymbolNames(p.chain, /*back=*/true)));
  }
  if (!p.request.include_source()) {
    for (v1::Kernel& k : *r->mutable_plan()->mutable_kernels()) k.clear_source();
  }
  ApplyRequestNames(p, r->mutable_plan());
  r->set_request_id(p.request.request_id());
  if (joined) r->set_cache(v1::CACHE_OUTCOME_JOINED);
  return r;
}

JobTable::Ticket KernelServiceImpl::StartJob(const Prepared& p, JobTable::DoneFn done,
                                             JobTable::ProgressFn progress, bool* rejected,
                                             bool* joined) {
  *rejected = false;
  *joined = false;
  const bool wants_tuning = p.can_tune && p.mode != TuneMode::kHeuristic;
  // Callers that differ only in names, request ids or whether they want the
  // sources share one job (one build, one fleet lease): it keeps the
  // sources, and each waiter's answer is its own (ForWaiter). A forced
  // rebuild never joins a job that may reuse what force asks to replace.
  const std::string job_key = absl::StrCat(p.key.ArtifactKey(), wants_tuning ? "/tuned" : "/heuristic",
                                           p.request.policy().force() ? "/force" : "");
  // Work asked for in the background goes on when its callers leave. Tuning
  // so asked for has threads of its own, so a caller waiting for a heuristic
  // answer never queues behind it; background work that is not tuning (a
  // heuristic target) runs with the callers' jobs.
  const bool background = p.request.policy().background();
  const bool background_pool = background && wants_tuning;
  ThreadPool* pool = background_pool ? background_pool_.get() : pool_.get();
  // Joining a running job costs nothing, so only a new job meets the queue
  // limit: at most max_queued_jobs jobs wait beyond the pool's idle threads.
  // Jobs every caller left are not counted; their tasks end as they start,
  // but stay queued until then, so the tasks queued are capped as well.
  const bool full = pool == nullptr ||
                    jobs_.Waiting(background_pool) >= options_.max_queued_jobs + pool->idle() ||
                    pool->queued() >= std::max(kMinQueuedTasks, 4 * options_.max_queued_jobs);
  bool started = false;
  JobTable::Ticket t = jobs_.JoinExisting(job_key, background, done, progress);
  if (t.job == nullptr) {
    if (full) {
      *rejected = true;
      return {};
    }
    t = jobs_.Join(job_key, background, background_pool, std::move(done), std::move(progress), &started);
  }
  *joined = !started;
  if (started) {
    std::shared_ptr<JobTable::Job> job = t.job;
    Prepared built = p;
    built.request.set_include_source(true);
    pool->Submit([this, job, p = std::move(built), background_pool] {
      job->started = true;
      options_.metrics->SetQueueDepth(background_pool, jobs_.Waiting(background_pool));
      // Every caller left while the job was queued: do not build.
      if (job->cancel.load()) {
        jobs_.Finish(job, absl::CancelledError("compile cancelled: no caller waits"));
        return;
      }
      AddBuilding(1);
      const auto start = std::chrono::steady_clock::now();
      // What the job says, every waiter reads: its messages name the
      // builder's symbols by their short names, which each waiter reads as
      // its own (ForWaiter, Tune's progress).
      const std::map<std::string, std::string> short_names = ShortSymbolNames(p.chain);
      JobTable::Result r = pipeline_->Build(
          p,
          [this, job, short_names](const v1::TuneProgress& m) {
            jobs_.Progress(job, RenamedTrial(m, short_names));
          },
          &job->cancel);
      if (!r.ok()) {  // Successful builds are timed by the pipeline, by how they ended.
        r = absl::Status(r.status().code(), RenameQuotedSymbols(r.status().message(), short_names));
        // A build whose callers all left (a deadline, a client gone) is not
        // a failure of the build.
        options_.metrics->BuildSeconds(
            absl::IsCancelled(r.status()) ? "cancelled" : "error",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      answers_.Clear();  // The store may now answer differently (tuned).
      jobs_.Finish(job, r);
      AddBuilding(-1);
    });
    options_.metrics->SetQueueDepth(background_pool, jobs_.Waiting(background_pool));
  }
  return t;
}

bool KernelServiceImpl::CannotWaitForTuning(const grpc::CallbackServerContext& ctx, const Prepared& p) const {
  if (!p.can_tune || p.mode == TuneMode::kHeuristic) return false;
  if (p.request.policy().background()) return true;
  // Tuning takes its budget plus compiles; a caller that cannot wait that
  // long gets the heuristic kernel now.
  constexpr double kCompileAllowanceSeconds = 2.0;
  const double left = std::chrono::duration<double>(ctx.deadline() - std::chrono::system_clock::now()).count();
  return left < p.budget_seconds + kCompileAllowanceSeconds;
}

grpc::ServerUnaryReactor* KernelServiceImpl::ColdStart(grpc::CallbackServerContext* ctx, const Prepared& p,
                                                       v1::CompileResponse* resp) {
  // The heuristic kernel for the caller, now.
  v1::CompileRequest now_request = p.request;
  now_request.mutable_policy()->set_mode(v1::TuningPolicy::MODE_HEURISTIC);
  now_request.mutable_policy()->set_background(false);
  absl::StatusOr<Prepared> now = pipeline_->Prepare(now_request);
  if (!now.ok()) return Answer(ctx, now.status());
  // The tuning job first, with nobody waiting on it: it finishes and stores.
  // Its queue may be full; the answer then says that nothing tunes.
  Prepared background = p;
  background.request.mutable_policy()->set_background(true);
  bool rejected = false, joined = false;
  JobTable::Ticket tuning =
      StartJob(background, [](const JobTable::Result&, bool) {}, nullptr, &rejected, &joined);
  const bool tuning_goes_on = tuning.job != nullptr;
  if (tuning_goes_on) {
    jobs_.Leave(tuning);
    if (!joined) options_.metrics->BackgroundTune();
  }
  // A forced retune of a chain whose heuristic kernel was measured wrong:
  // that kernel is not the answer meanwhile.
  if (absl::Status w = pipeline_->MeasuredWrong(*now); !w.ok()) {
    return Answer(ctx, tuning_goes_on ? absl::UnavailableError(absl::StrCat(
                                            "kfused: the kernel this chain gets without tuning was measured "
                                            "wrong on this GPU; the forced retune goes on in the background, "
                                            "ask again once it ends (", w.message(), ")"))
                                      : w);
  }
  // The heuristic answer says why it is one (its stored provenance says
  // "policy: heuristic", which this caller did not ask for).
  const std::string why = absl::StrCat(
      p.request.policy().background() ? "asked for as background work"
                                      : "the call's deadline is shorter than tuning",
      tuning_goes_on ? ": tuning goes on in the background for later requests"
                     : ": the background tuning queue is full, so nothing tunes it now; ask again later");
  auto mark = [why, tuning_goes_on](JobTable::Result r) {
    if (r.ok()) {
      r->set_tuning_in_background(tuning_goes_on);
      r->mutable_plan()->mutable_provenance()->set_reason(why);
    }
    return r;
  };
  std::optional<v1::CompileResponse> hit = pipeline_->LookupOrMiss(*now, /*counted=*/false);
  std::shared_ptr<WaitingUnary> reactor;
  auto mine = std::make_shared<const Prepared>(*std::move(now));
  if (!hit.has_value()) {
    reactor = (new WaitingUnary(&jobs_, resp))->Start();
    JobTable::Ticket t = StartJob(
        *mine,
        [this, reactor, mine, mark](const JobTable::Result& r, bool joined) {
          reactor->Complete(Signed(mark(ForWaiter(*mine, r, joined))));
        },
        nullptr, &rejected, &joined);
    if (rejected) {
      reactor->Complete(absl::ResourceExhaustedError("kfused: the job queue is full; retry later"));
      return reactor.get();
    }
    reactor->Attach(std::move(t));
  }
  if (reactor != nullptr) return reactor.get();
  *resp = *mark(*std::move(hit));
  if (absl::Status s = Sign(resp); !s.ok()) return Answer(ctx, s);
  resp->set_request_id(p.request.request_id());
  return Answer(ctx, absl::OkStatus());
}

// The memo key: a digest of every field of the request that can change the
// answer (fields the server ignores included, so two requests that differ
// anywhere never share an answer). A digest, so a request's size does not
// become the memo's: a chain padded with megabytes of ignored fields costs
// the memo 64 bytes of key.
static std::string AnswerKey(const v1::CompileRequest& req) {
  std::string key;
  for (const google::protobuf::Message* part :
       {static_cast<const google::protobuf::Message*>(&req.chain()),
        static_cast<const google::protobuf::Message*>(&req.target()),
        static_cast<const google::protobuf::Message*>(&req.policy())}) {
    const std::string bytes = part->SerializeAsString();
    absl::StrAppend(&key, bytes.size(), ":", bytes);  // Length-prefixed: the parts cannot run together.
  }
  key.push_back(req.include_source() ? '1' : '0');
  return Sha256Hex(key);
}

grpc::ServerUnaryReactor* KernelServiceImpl::Compile(grpc::CallbackServerContext* ctx,
                                                     const v1::CompileRequest* req,
                                                     v1::CompileResponse* resp) {
  if (absl::Status a = Authorize(ctx); !a.ok()) return Answer(ctx, a);
  // Before the memo too, so a request is refused alike whether or not its
  // answer is remembered.
  if (absl::Status s = CheckLoggedText(*req); !s.ok()) return Answer(ctx, s);
  DropStaleAnswers();
  const std::string answer_key = req->policy().force() ? "" : AnswerKey(*req);
  if (!answer_key.empty()) {
    if (std::shared_ptr<const v1::CompileResponse> a = answers_.Get(answer_key)) {
      pipeline_->deps().store->NoteArtifactHit(a->plan().key());  // For the LRU order.
      options_.metrics->Lookup("memory", true);
      *resp = *a;
      resp->set_request_id(req->request_id().empty() ? NewRequestId() : req->request_id());
      return Answer(ctx, absl::OkStatus());
    }
  }
  const uint64_t generation = answers_.generation();
  absl::StatusOr<Prepared> p = pipeline_->Prepare(*req);
  if (!p.ok()) return Answer(ctx, p.status());
  std::optional<v1::CompileResponse> hit = pipeline_->LookupOrMiss(*p);
  if (hit.has_value()) {
    *resp = std::move(*hit);
    if (absl::Status s = Sign(resp); !s.ok()) return Answer(ctx, s);
    if (!answer_key.empty()) {
      answers_.Put(answer_key, std::make_shared<const v1::CompileResponse>(*resp), generation);
    }
    resp->set_request_id(p->request.request_id());
    return Answer(ctx, absl::OkStatus());
  }
  if (absl::Status w = pipeline_->MeasuredWrong(*p); !w.ok()) return Answer(ctx, w);
  if (CannotWaitForTuning(*ctx, *p)) return ColdStart(ctx, *p, resp);
  std::shared_ptr<WaitingUnary> reactor = (new WaitingUnary(&jobs_, resp))->Start();
  bool rejected = false, joined = false;
  auto mine = std::make_shared<const Prepared>(*std::move(p));
  JobTable::Ticket t = StartJob(
      *mine,
      [this, reactor, mine](const JobTable::Result& r, bool joined) {
        reactor->Complete(Signed(ForWaiter(*mine, r, joined)));
      },
      nullptr, &rejected, &joined);
  if (rejected) {
    reactor->Complete(absl::ResourceExhaustedError("kfused: the job queue is full; retry later"));
  } else {
    reactor->Attach(std::move(t));
  }
  return reactor.get();
}

grpc::ServerWriteReactor<v1::TuneProgress>* KernelServiceImpl::Tune(grpc::CallbackServerContext* ctx,
                                                                    const v1::CompileRequest* req) {
  std::shared_ptr<TuneStream> stream = (new TuneStream(&jobs_))->Start();
  if (absl::Status a = Authorize(ctx); !a.ok()) {
    stream->Complete(a);
    return stream.get();
  }
  DropStaleAnswers();
  absl::StatusOr<Prepared> p = pipeline_->Prepare(*req);
  if (!p.ok()) {
    stream->Complete(p.status());
    return stream.get();
  }
  std::optional<v1::CompileResponse> hit = pipeline_->LookupOrMiss(*p);
  if (hit.has_value()) {
    stream->Complete(Signed(JobTable::Result(*std::move(hit))));
    return stream.get();
  }
  if (absl::Status w = pipeline_->MeasuredWrong(*p); !w.ok()) {
    stream->Complete(w);
    return stream.get();
  }
  bool rejected = false, joined = false;
  auto mine = std::make_shared<const Prepared>(*std::move(p));
  JobTable::Ticket t = StartJob(
      *mine,
      [this, stream, mine](const JobTable::Result& r, bool joined) {
        stream->Complete(Signed(ForWaiter(*mine, r, joined)));
      },
      [stream, own = ShortSymbolNames(mine->chain, /*back=*/true)](const v1::TuneProgress& m) {
        stream->Push(RenamedTrial(m, own));
      },
      &rejected, &joined);
  if (rejected) {
    stream->Complete(absl::ResourceExhaustedError("kfused: the job queue is full; retry later"));
  } else {
    stream->Attach(std::move(t));
  }
  return stream.get();
}

grpc::ServerUnaryReactor* KernelServiceImpl::Lookup(grpc::CallbackServerContext* ctx,
                                                    const v1::CompileRequest* req, v1::CompileResponse* resp) {
  if (absl::Status a = Authorize(ctx); !a.ok()) return Answer(ctx, a);
  DropStaleAnswers();
  absl::StatusOr<Prepared> p = pipeline_->Prepare(*req);
  if (!p.ok()) return Answer(ctx, p.status());
  absl::StatusOr<std::optional<v1::CompileResponse>> hit = pipeline_->Lookup(*p, /*honour_force=*/false);
  if (!hit.ok()) return Answer(ctx, hit.status());
  if (!hit->has_value()) {
    return Answer(ctx, absl::NotFoundError(absl::StrCat("no stored plan for key ", p->key.ArtifactKey())));
  }
  *resp = std::move(**hit);
  return Answer(ctx, Sign(resp));
}

grpc::ServerUnaryReactor* KernelServiceImpl::ListKernels(grpc::CallbackServerContext* ctx,
                                                         const v1::ListKernelsRequest* req,
                                                         v1::ListKernelsResponse* resp) {
  if (absl::Status a = Authorize(ctx); !a.ok()) return Answer(ctx, a);
  int limit = req->limit() == 0 ? 100 : static_cast<int>(std::min<uint32_t>(req->limit(), 10000));
  // One more than asked: whether more match is worth a line to the reader.
  auto list = pipeline_->deps().store->List(req->key_prefix(), limit + 1, "artifact");
  if (!list.ok()) return Answer(ctx, list.status());
  for (const EntrySummary& e : *list) {
    if (e.kind != "artifact") continue;
    if (resp->kernels_size() == limit) {
      resp->set_more(true);
      break;
    }
    v1::KernelSummary* k = resp->add_kernels();
    k->set_key(e.key);
    k->set_chain_hash(e.parts.chain);
    k->set_family(static_cast<v1::Family>(FamilyFromName(e.meta.family)));
    k->set_arch(e.meta.arch);
    k->set_device(e.meta.device);
    k->set_state(e.meta.state == "tuned" ? v1::TUNE_STATE_TUNED : v1::TUNE_STATE_HEURISTIC);
    k->set_bytes(e.bytes);
    k->set_created_unix_ms(e.created_ms);
    k->set_last_used_unix_ms(e.last_used_ms);
    k->set_hits(e.hits);
    k->set_description(e.meta.description);
  }
  auto total = pipeline_->deps().store->TotalBytes();
  if (total.ok()) resp->set_total_bytes(*total);
  return Answer(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* KernelServiceImpl::DeleteKernels(grpc::CallbackServerContext* ctx,
                                                           const v1::DeleteKernelsRequest* req,
                                                           v1::DeleteKernelsResponse* resp) {
  if (absl::Status a = Authorize(ctx); !a.ok()) return Answer(ctx, a);
  if (pipeline_->options().read_only) return Answer(ctx, absl::FailedPreconditionError("this server is read-only"));
  // `all` beside keys emptied the store whatever the keys said.
  if (req->all() == (req->keys_size() > 0)) {
    return Answer(ctx, absl::InvalidArgumentError("delete: give keys or all (not both, not neither)"));
  }
  if (req->keys_size() > kMaxAdminItems) {
    return Answer(ctx, absl::InvalidArgumentError(
                           absl::StrCat("keys: ", req->keys_size(), " keys, at most ", kMaxAdminItems, " a call")));
  }
  for (int i = 0; i < req->keys_size(); ++i) {
    if (req->keys(i).empty()) return Answer(ctx, absl::InvalidArgumentError(absl::StrCat("keys[", i, "]: empty key")));
  }
  if (absl::Status room = AdminRoom(); !room.ok()) return Answer(ctx, room);
  // A delete waits on the store's write lock, which another process may
  // hold: on an admin thread. `req` and `resp` live until the reactor finishes.
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  admin_pool_->Submit([this, ctx, reactor, req, resp] {
    if (ctx->IsCancelled()) {  // The caller left while it queued, or the server stops.
      reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "delete cancelled: nothing was deleted"));
      return;
    }
    Store* store = pipeline_->deps().store;
    absl::StatusOr<int> n =
        req->all() ? store->DeleteAll()
                   : store->Delete(std::vector<std::string>(req->keys().begin(), req->keys().end()));
    if (n.ok()) {
      pipeline_->ClearHot();
      answers_.Clear();
      resp->set_deleted(*n);
    }
    reactor->Finish(ToGrpc(n.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* KernelServiceImpl::GetDeviceInfo(grpc::CallbackServerContext* ctx,
                                                           const v1::GetDeviceInfoRequest* req,
                                                           v1::DeviceInfo* resp) {
  if (absl::Status a = Authorize(ctx); !a.ok()) return Answer(ctx, a);
  const std::shared_ptr<const TuningGpu> gpu = pipeline_->gpu();
  resp->set_has_gpu(gpu != nullptr);
  if (gpu) *resp->mutable_device() = ToProto(gpu->device);
  if (!gpu) resp->set_reason(pipeline_->no_gpu_reason());
  resp->set_driver_version(pipeline_->options().driver_version);
  resp->set_nvrtc_version(pipeline_->deps().compiler->Version());
  for (const std::string& a : ServedArchs()) resp->add_supported_archs(a);
  Ceilings c = gpu ? gpu->ceilings : NominalCeilings(pipeline_->options().default_compute_capability);
  *resp->mutable_ceilings() = ToProto(c);
  resp->set_generator_version(absl::StrCat(GeneratorVersion(Family::kPointwise), "+",
                                           GeneratorVersion(Family::kRowReduction), "+",
                                           GeneratorVersion(Family::kReduction), "+",
                                           GeneratorVersion(Family::kMatmul), "+",
                                           GeneratorVersion(Family::kAttention), "+plan/digest"));
  resp->set_server_version(options_.server_version);
  return Answer(ctx, absl::OkStatus());
}

}  // namespace kfuse
