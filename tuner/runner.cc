#include "tuner/runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "core/status.h"
#include "tuner/worker_process.h"
#include "tuner/worker_protocol.h"

namespace kfuse {
namespace {

constexpr int kMaxRepeats = 10000;

absl::Status ValidateKernel(const CompiledKernel& k, const std::string& name, const CheckTask& t) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", why));
  };
  if (k.spec.entry.empty()) return bad("no entry name");
  if (k.cubin.empty() && k.ptx.empty()) return bad("no cubin or PTX");
  for (size_t i = 0; i < k.spec.params.size(); ++i) {
    const KernelParam& p = k.spec.params[i];
    if (p.kind != KernelParam::Kind::kBuffer) continue;
    size_t limit = p.buffer.kind == BufferRef::Kind::kInput    ? t.inputs.size()
                   : p.buffer.kind == BufferRef::Kind::kOutput ? t.outputs.size()
                                                               : 0;
    if (p.buffer.index >= limit) {
      return bad(absl::StrCat("params[", i, "] names buffer ", p.buffer.index,
                              " of a kind the task has ", limit, " of"));
    }
  }
  for (const SizeExpr* e : {&k.spec.grid.x, &k.spec.grid.y, &k.spec.grid.z, &k.spec.block.x,
                            &k.spec.block.y, &k.spec.block.z}) {
    absl::StatusOr<int64_t> v = e->Eval(t.symbol_values);
    if (!v.ok()) return bad(absl::StrCat("launch dim ", e->ToString(), ": ", v.status().message()));
  }
  return absl::OkStatus();
}

// Waits for the worker's next frame, up to *timeout_seconds, looking at
// `cancel` (may be null) a quarter second at a time. False when it was
// raised first; *timeout_seconds becomes what is left of the wait.
bool AwaitFrame(WorkerProcess& worker, const std::atomic<bool>* cancel, double* timeout_seconds) {
  if (cancel == nullptr) return true;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(*timeout_seconds);
  while (!worker.WaitReadable(0.25) && std::chrono::steady_clock::now() < until) {
    if (cancel->load()) return false;
  }
  *timeout_seconds =
      std::max(0.0, std::chrono::duration<double>(until - std::chrono::steady_clock::now()).count());
  return true;
}

}  // namespace

absl::Status ValidateTask(const CheckTask& t) {
  if (t.candidates.empty()) return absl::InvalidArgumentError("check task has no candidates");
  if (t.outputs.empty()) return absl::InvalidArgumentError("check task has no outputs");
  for (size_t i = 0; i < t.inputs.size() + t.outputs.size(); ++i) {
    bool in = i < t.inputs.size();
    const BufferSpec& b = in ? t.inputs[i] : t.outputs[i - t.inputs.size()];
    std::string name =
        in ? absl::StrCat("inputs[", i, "]") : absl::StrCat("outputs[", i - t.inputs.size(), "]");
    if (b.dtype == DType::kInvalid || b.dtype > DType::kF64) {
      return absl::InvalidArgumentError(name + ": invalid dtype");
    }
    if (b.domain > InputDomain::kUnit) return absl::InvalidArgumentError(name + ": invalid domain");
    if (b.elements <= 0 || b.elements > (int64_t{1} << 40)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": element count ", b.elements, " is not in [1, 2^40]"));
    }
  }
  if (!(t.slack >= 1)) return absl::InvalidArgumentError("slack must be >= 1");
  if (!(t.watchdog_seconds > 0)) return absl::InvalidArgumentError("watchdog_seconds must be > 0");
  if (t.timing.repeats < 1 || t.timing.repeats > kMaxRepeats || t.timing.min_repeats < 1 ||
      t.timing.warmup < 0 || t.timing.warmup > kMaxRepeats || !(t.timing.max_seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "timing: repeats in [1, ", kMaxRepeats, "], warmup in [0, ", kMaxRepeats,
        "], min_repeats >= 1, max_seconds > 0"));
  }
  if (!(t.budget_seconds >= 0)) return absl::InvalidArgumentError("budget_seconds must be >= 0");
  for (size_t i = 0; i < t.candidates.size(); ++i) {
    KFUSE_RETURN_IF_ERROR(ValidateKernel(t.candidates[i], absl::StrCat("candidates[", i, "]"), t));
  }
  KFUSE_RETURN_IF_ERROR(ValidateKernel(t.reference64, "reference64", t));
  return ValidateKernel(t.eager, "eager", t);
}

int64_t TaskDeviceBytes(const CheckTask& t, int64_t l2_bytes) {
  int64_t total = 0;
  for (const BufferSpec& b : t.inputs) {
    total += b.elements * (DTypeBytes(b.dtype) + (b.wide_reference ? 8 : 0));
  }
  for (const BufferSpec& b : t.outputs) total += b.elements * (DTypeBytes(b.dtype) + 8);
  if (t.timing.flush_l2) total += L2FlushBytes(l2_bytes);
  return total;
}

int64_t L2FlushBytes(int64_t l2_bytes) { return std::max<int64_t>(2 * l2_bytes, 256'000'000); }

WorkerRunner::WorkerRunner(WorkerOptions opts) : opts_(std::move(opts)) {
  if (opts_.worker_path.empty()) opts_.worker_path = DefaultWorkerPath();
  if (!opts_.now) opts_.now = SteadySeconds;
}

std::optional<std::string> WorkerRunner::Unavailable() const {
  std::lock_guard<std::mutex> lock(down_mu_);
  const double now = opts_.now();
  if (now >= down_until_) return std::nullopt;
  return absl::StrCat(down_reason_, "; tried again in ", static_cast<int64_t>(std::ceil(down_until_ - now)), " s");
}

WorkerRunner::~WorkerRunner() = default;

int WorkerRunner::starts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return starts_;
}

absl::StatusOr<std::unique_ptr<WorkerRunner>> WorkerRunner::Create(WorkerOptions opts) {
  absl::Status started;
  std::unique_ptr<WorkerRunner> r = CreateEvenIfDown(std::move(opts), &started);
  if (!started.ok()) return started;
  return r;
}

std::unique_ptr<WorkerRunner> WorkerRunner::CreateEvenIfDown(WorkerOptions opts,
                                                             absl::Status* started) {
  std::unique_ptr<WorkerRunner> r(new WorkerRunner(std::move(opts)));
  std::lock_guard<std::mutex> lock(r->mu_);
  *started = r->EnsureStartedLocked();
  return r;
}

absl::Status WorkerRunner::EnsureStartedLocked() {
  if (worker_ != nullptr) return absl::OkStatus();
  if (std::optional<std::string> down = Unavailable()) return absl::UnavailableError(*down);
  absl::Status started = StartLocked();
  if (absl::IsCancelled(started)) return started;  // Stopping: no backoff, nothing to report.
  std::lock_guard<std::mutex> lock(down_mu_);
  if (started.ok()) {
    down_seconds_ = 0;  // A later failure starts the backoff afresh.
    started_once_ = true;
    return started;
  }
  down_seconds_ = NextRetryBackoff(down_seconds_);
  down_until_ = opts_.now() + down_seconds_;
  down_reason_ = std::string(started.message());
  // However a restart failed (the driver's Internal in the worker, say), the
  // GPU cannot take tasks now: a pool takes the member out. The first start
  // keeps its code (NotFound: no worker binary; FailedPrecondition: another
  // build's worker), which Create's caller reports.
  return started_once_ ? absl::UnavailableError(started.message()) : started;
}

absl::Status WorkerRunner::StartLocked() {
  if (opts_.stop != nullptr && opts_.stop->load()) {
    return absl::CancelledError(
        absl::StrCat("tuning worker ", opts_.worker_path, ": not started, the server is stopping"));
  }
  KFUSE_ASSIGN_OR_RETURN(std::unique_ptr<WorkerProcess> w,
                         WorkerProcess::Start(opts_.worker_path, opts_.device));
  ++starts_;
  KFUSE_RETURN_IF_ERROR(w->Send(kMsgHello, EncodeHello(), opts_.send_timeout_seconds));
  double timeout = opts_.start_timeout_seconds;
  if (!AwaitFrame(*w, opts_.stop, &timeout)) {
    return absl::CancelledError(  // `w` goes with the return: killed.
        absl::StrCat("tuning worker ", opts_.worker_path, ": start cancelled, the server is stopping"));
  }
  absl::StatusOr<Frame> f = w->Recv(timeout);
  if (!f.ok() && opts_.stop != nullptr && opts_.stop->load()) {
    // Raised in the wait's last quarter second, or the worker gone as the
    // server stops: a stop, not a failed start.
    return absl::CancelledError(
        absl::StrCat("tuning worker ", opts_.worker_path, ": start cancelled, the server is stopping"));
  }
  if (!f.ok()) {
    std::string how = f.status().code() == absl::StatusCode::kDeadlineExceeded
                          ? "did not answer in time"
                          : w->ExitDescription();
    return absl::UnavailableError(
        absl::StrCat("tuning worker ", opts_.worker_path, " failed to start: ", how));
  }
  if (f->type != kMsgHelloReply)
    return absl::DataLossError("tuning worker: unexpected reply to hello");
  absl::StatusOr<HelloReply> hello = DecodeHelloReply(f->payload);
  if (!hello.ok()) {
    return absl::Status(hello.status().code(), absl::StrCat(opts_.worker_path, ": ",
                                                            hello.status().message()));
  }
  // Unavailable: no GPU; FailedPrecondition: this parent's version refused.
  KFUSE_RETURN_IF_ERROR(hello->status);
  device_ = hello->device;
  pid_.store(static_cast<int>(w->pid()), std::memory_order_relaxed);
  worker_ = std::move(w);
  return absl::OkStatus();
}

absl::Status WorkerRunner::SendLocked(uint32_t type, const std::string& payload) {
  std::string how;
  for (int attempt = 0; attempt < 2; ++attempt) {
    KFUSE_RETURN_IF_ERROR(EnsureStartedLocked());
    absl::Status sent = worker_->Send(type, payload, opts_.send_timeout_seconds);
    if (sent.ok()) return absl::OkStatus();
    if (how.empty()) {
      how = absl::IsDeadlineExceeded(sent) ? absl::StrCat(sent.message(), "; killed")
                                           : worker_->ExitDescription();
    }
    worker_.reset();  // Kills it; a stuck one too.
  }
  return absl::UnavailableError(absl::StrCat("tuning worker failed before the request: ", how));
}

absl::StatusOr<DeviceFingerprint> WorkerRunner::Device() {
  std::lock_guard<std::mutex> lock(mu_);
  bool started_once = false;
  {
    std::lock_guard<std::mutex> down(down_mu_);
    started_once = started_once_;
  }
  if (!started_once) KFUSE_RETURN_IF_ERROR(EnsureStartedLocked());
  return device_;
}

absl::StatusOr<Ceilings> WorkerRunner::MeasureCeilings(const std::atomic<bool>* cancel) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancel != nullptr && cancel->load()) return absl::CancelledError("measuring ceilings: cancelled");
  KFUSE_RETURN_IF_ERROR(SendLocked(kMsgCeilings, ""));
  double timeout = 300;
  if (!AwaitFrame(*worker_, cancel, &timeout)) {
    worker_.reset();  // Kills it mid-measurement; the next call starts a fresh one.
    return absl::CancelledError("measuring ceilings: cancelled; its worker was stopped");
  }
  absl::StatusOr<Frame> f = worker_->Recv(timeout);
  if (!f.ok() || f->type != kMsgCeilingsReply) {
    std::string why = f.ok() ? "unexpected reply" : std::string(f.status().message());
    worker_.reset();  // Kills it; the next call starts a fresh one.
    return absl::UnavailableError(absl::StrCat("measuring ceilings: worker failed: ", why));
  }
  KFUSE_ASSIGN_OR_RETURN(CeilingsReply reply, DecodeCeilingsReply(f->payload));
  KFUSE_RETURN_IF_ERROR(reply.status);
  return reply.ceilings;
}

absl::StatusOr<std::vector<Trial>> WorkerRunner::Run(
    const CheckTask& task_in, const std::function<void(const Trial&)>& on_trial) {
  KFUSE_RETURN_IF_ERROR(ValidateTask(task_in));
  std::lock_guard<std::mutex> lock(mu_);
  RunRequest req;
  req.task = task_in;
  req.memory_budget_bytes = opts_.memory_budget_bytes;
  // One seed for the whole task, so a restarted worker sees the same inputs.
  while (req.task.seed == 0) req.task.seed = std::random_device{}() * uint64_t{0x100000001};
  const size_t n = task_in.candidates.size();
  std::vector<Trial> trials(n);
  for (size_t i = 0; i < n; ++i) {
    const CompiledKernel& k = task_in.candidates[i];
    trials[i].variant = k.spec.variant;
    trials[i].compile_seconds = k.compile_seconds;
    trials[i].resources = k.resources;
  }
  const double setup_timeout = opts_.start_timeout_seconds + 2 * task_in.watchdog_seconds;
  const double candidate_timeout = task_in.watchdog_seconds + task_in.timing.max_seconds;

  uint32_t next = 0;
  // The stream is out of step: drop the worker so the next call starts clean.
  auto lost = [&](absl::Status s) {
    worker_.reset();
    return s;
  };
  auto finish = [&](Outcome o, const std::string& msg) {
    trials[next].outcome = o;
    trials[next].message = msg;
    if (on_trial) on_trial(trials[next]);
    ++next;
  };
  const auto run_start = std::chrono::steady_clock::now();
  while (next < n) {
    if (task_in.budget_seconds > 0) {
      std::chrono::duration<double> spent = std::chrono::steady_clock::now() - run_start;
      req.budget_left_seconds = std::max(0.0, task_in.budget_seconds - spent.count());
      // After a restart with nothing left: the seed was timed, skip the rest
      // without starting a worker.
      if (next > 0 && req.budget_left_seconds <= 0) {
        while (next < n) finish(Outcome::kSkipped, kBudgetSpentMessage);
        break;
      }
    }
    req.first_candidate = next;
    // Every caller already gone (before the first request, or before the
    // request after a restart): nothing is sent.
    if (task_in.cancel != nullptr && task_in.cancel->load())
      return absl::CancelledError("tuning cancelled: no caller waits");
    KFUSE_RETURN_IF_ERROR(SendLocked(kMsgRun, EncodeRunRequest(req)));
    bool in_setup = true;  // Until kMsgReady: inputs, reference64, eager.
    while (true) {
      double timeout = in_setup ? setup_timeout : candidate_timeout;
      if (task_in.cancel != nullptr && task_in.cancel->load()) {
        StopTaskLocked();  // Trials may come faster than the wait below looks.
        return absl::CancelledError("tuning cancelled: no caller waits");
      }
      // Between frames: a caller gone stops the run without waiting out the
      // budget on the GPU.
      if (!AwaitFrame(*worker_, task_in.cancel, &timeout)) {
        StopTaskLocked();
        return absl::CancelledError("tuning cancelled: no caller waits");
      }
      absl::StatusOr<Frame> f = worker_->Recv(timeout);
      if (absl::IsDataLoss(f.status())) {
        // A garbled stream is the worker's fault, not the candidate's.
        return lost(absl::DataLossError(
            absl::StrCat("tuning worker ", opts_.worker_path, ": ", f.status().message())));
      }
      if (!f.ok()) {
        bool timeout = f.status().code() == absl::StatusCode::kDeadlineExceeded;
        if (timeout) worker_->Kill();
        std::string how = timeout ? "killed after the watchdog" : worker_->ExitDescription();
        worker_.reset();
        if (next >= n) break;  // Every candidate was reported; it died at the end.
        if (in_setup) {
          return absl::InternalError(absl::StrCat(
              "tuning worker failed while running the reference and eager kernels (",
              timeout ? absl::StrCat("not finished within ", setup_timeout, " s") : how,
              "): nothing can be checked"));
        }
        if (timeout) {
          finish(Outcome::kTimeout,
                 absl::StrCat("not finished within ", candidate_timeout,
                              " s (watchdog + timing budget); worker killed and restarted"));
        } else {
          finish(Outcome::kFault, absl::StrCat("worker died: ", how));
        }
        break;
      }
      if (f->type == kMsgReady) {
        in_setup = false;
        continue;
      }
      if (f->type == kMsgTrial) {
        absl::StatusOr<TrialResult> decoded = DecodeTrialResult(f->payload);
        if (!decoded.ok()) return lost(decoded.status());
        TrialResult& t = *decoded;
        if (next >= n || t.index != next) {
          return lost(absl::DataLossError(absl::StrCat(
              "tuning worker: trial ", t.index, " out of order (", next, " of ", n, " reported)")));
        }
        trials[next].median_seconds = t.median_seconds;
        trials[next].samples_seconds = std::move(t.samples_seconds);
        finish(t.outcome, t.message);
        continue;
      }
      if (f->type != kMsgTaskDone)
        return lost(absl::DataLossError("tuning worker: unexpected message"));
      absl::StatusOr<absl::Status> decoded = DecodeStatus(f->payload);
      if (!decoded.ok()) return lost(decoded.status());
      absl::Status done = *decoded;
      if (done.code() == absl::StatusCode::kAborted) {
        // A candidate faulted and the worker is exiting; restart for the rest.
        worker_->ExitDescription();
        worker_.reset();
        break;
      }
      if (!done.ok()) {
        worker_.reset();  // It may be exiting (the reference faulted); start afresh next time.
        return done;
      }
      if (next != n) return lost(absl::DataLossError("tuning worker: task ended early"));
      break;
    }
  }
  return trials;
}

void WorkerRunner::StopTaskLocked() {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(opts_.cancel_drain_seconds);
  auto left = [&] {
    return std::chrono::duration<double>(until - std::chrono::steady_clock::now()).count();
  };
  if (opts_.cancel_drain_seconds > 0 && worker_->Send(kMsgCancel, "", opts_.cancel_drain_seconds).ok()) {
    // What the task still sends before it stops is dropped: no caller waits.
    while (left() > 0) {
      absl::StatusOr<Frame> f = worker_->Recv(left());
      if (!f.ok()) break;
      if (f->type == kMsgTrial || f->type == kMsgReady) continue;
      if (f->type != kMsgTaskDone) break;
      absl::StatusOr<absl::Status> done = DecodeStatus(f->payload);
      // Stopped, or done before it read the cancel: kept. Any other end
      // (Aborted: a kernel faulted; an error after a fault) may be a worker
      // on its way out, so it goes, as Run drops one.
      if (done.ok() && (done->ok() || absl::IsCancelled(*done))) return;
      break;
    }
  }
  worker_.reset();  // Kills it: its candidate stops with it.
}

}  // namespace kfuse
