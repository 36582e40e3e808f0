#include "tuner/worker_task.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "tuner/check.h"
#include "tuner/cuda/driver.h"
#include "tuner/worker_buffers.h"
#include "tuner/worker_launch.h"
#include "tuner/worker_timing.h"

namespace kfuse {
namespace {

using Clock = std::chrono::steady_clock;

RunResult LaunchAndSync(const LoadedKernel& k, BoundLaunch& l, CUstream s, bool* poisoned) {
  RunResult r = FromLaunch(LaunchOn(k, l, s), "cuLaunchKernel", poisoned);
  if (r.outcome != Outcome::kOk) return r;
  return FromSync((*LoadDriver())->cuStreamSynchronize(s), "kernel execution", poisoned);
}

// Poison on the stream the kernels run on. (The legacy-stream cuMemsetD8 is
// not ordered with a non-blocking stream: the poison of a 1 GiB output could
// land after the kernel wrote it.)
absl::Status Poison(const std::vector<DeviceBuffer>& bufs, CUstream s) {
  for (const DeviceBuffer& b : bufs) KFUSE_RETURN_IF_ERROR(b.FillAsync(kPoisonByte, s));
  return absl::OkStatus();
}

LaunchBuffers Bind(const std::vector<DeviceBuffer>& in, const std::vector<DeviceBuffer>& out) {
  LaunchBuffers b;
  for (const DeviceBuffer& d : in) b.inputs.push_back(d.ptr());
  for (const DeviceBuffer& d : out) b.outputs.push_back(d.ptr());
  return b;
}

// Runs one of our own kernels (reference64, eager) into freshly poisoned
// outputs. Errors are Internal: without them no candidate can be judged.
absl::Status RunFixed(const char* name, const CompiledKernel& k, const CheckTask& task,
                      const LaunchBuffers& lb, const std::vector<DeviceBuffer>& outs,
                      CUstream stream, bool* poisoned) {
  auto fail = [&](absl::string_view why) {
    return absl::InternalError(absl::StrCat(name, " kernel ", k.spec.entry, ": ", why));
  };
  absl::StatusOr<LoadedKernel> lk = LoadedKernel::Load(k);
  if (!lk.ok()) return fail(lk.status().message());
  absl::StatusOr<BoundLaunch> bl = BindLaunch(k.spec, task.symbol_values, lb);
  if (!bl.ok()) return fail(bl.status().message());
  KFUSE_RETURN_IF_ERROR(Poison(outs, stream));
  RunResult r = LaunchAndSync(*lk, *bl, stream, poisoned);
  if (r.outcome != Outcome::kOk) return fail(r.message);
  return absl::OkStatus();
}

absl::Status SkipFrom(uint32_t first, const CheckTask& task, const std::string& why,
                      const TrialSink& send) {
  for (uint32_t i = first; i < task.candidates.size(); ++i) {
    TrialResult t;
    t.index = i;
    t.outcome = Outcome::kSkipped;
    t.message = why;
    KFUSE_RETURN_IF_ERROR(send(t));
  }
  return absl::OkStatus();
}

// Per output: the reference is complete, eager is complete, the reference
// is adjusted to eager's NaN/inf, and eager's own error is the yardstick.
absl::StatusOr<std::vector<ErrorStats>> PrepareReferences(const CheckTask& task,
                                                      const WorkerKernels& kernels,
                                                      const std::vector<DeviceBuffer>& refs,
                                                      const std::vector<DeviceBuffer>& eager,
                                                      CUstream stream) {
  std::vector<ErrorStats> eager_err;
  auto internal = [](const absl::Status& s) {
    return absl::InternalError(absl::StrCat("checking the reference outputs: ", s.message()));
  };
  for (size_t j = 0; j < task.outputs.size(); ++j) {
    const BufferSpec& out = task.outputs[j];
    absl::StatusOr<PrepStats> p =
        kernels.Prepare(refs[j].ptr(), eager[j].ptr(), out.dtype, out.elements, stream);
    if (!p.ok()) return internal(p.status());
    if (p->ref_unwritten > 0) {
      return absl::InternalError(absl::StrCat("reference64 kernel left ", p->ref_unwritten,
                                              " elements of output ", j, " unwritten (first at ",
                                              p->first_ref_unwritten, ")"));
    }
    if (p->eager_unwritten > 0) {
      return absl::InternalError(absl::StrCat("eager kernel left ", p->eager_unwritten,
                                              " elements of output ", j, " unwritten (first at ",
                                              p->first_eager_unwritten, ")"));
    }
    absl::StatusOr<CompareStats> e =
        kernels.Compare(eager[j].ptr(), out.dtype, refs[j].ptr(), out.elements, stream);
    if (!e.ok()) return internal(e.status());
    eager_err.push_back(e->err);
  }
  return eager_err;
}

}  // namespace

absl::Status RunTaskInWorker(const RunRequest& req, const DeviceFingerprint& device,
                             const WorkerKernels& kernels, CUstream stream, const ReadySink& ready,
                             const TrialSink& send, bool* poisoned, const std::function<bool()>& stop) {
  const Clock::time_point received = Clock::now();
  const CheckTask& task = req.task;
  KFUSE_RETURN_IF_ERROR(ValidateTask(task));
  KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
  *poisoned = false;
  // < 0: no budget.
  auto budget_left = [&] {
    if (req.budget_left_seconds < 0) return -1.0;
    std::chrono::duration<double> spent = Clock::now() - received;
    return std::max(0.0, req.budget_left_seconds - spent.count());
  };

  int64_t need = TaskDeviceBytes(task, device.l2_bytes);
  size_t free_bytes = 0, total_bytes = 0;
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo"));
  if (req.memory_budget_bytes > 0 && need > req.memory_budget_bytes) {
    return SkipFrom(req.first_candidate, task,
                    absl::StrCat("task needs ", need,
                                 " device bytes, over the worker's budget of ",
                                 req.memory_budget_bytes),
                    send);
  }
  if (need > static_cast<int64_t>(free_bytes)) {
    return SkipFrom(req.first_candidate, task,
                    absl::StrCat("task needs ", need, " device bytes; only ", free_bytes,
                                 " are free on the GPU"),
                    send);
  }

  // Inputs are made on the GPU; nothing of the task's size crosses PCIe.
  std::vector<DeviceBuffer> inputs, ref_outs, outs;
  for (size_t i = 0; i < task.inputs.size(); ++i) {
    const BufferSpec& b = task.inputs[i];
    KFUSE_ASSIGN_OR_RETURN(DeviceBuffer d, DeviceBuffer::Alloc(b.elements * DTypeBytes(b.dtype)));
    KFUSE_RETURN_IF_ERROR(kernels.FillRandom(d, b, task.seed, i, stream));
    inputs.push_back(std::move(d));
  }
  for (const BufferSpec& b : task.outputs) {
    KFUSE_ASSIGN_OR_RETURN(DeviceBuffer r, DeviceBuffer::Alloc(b.elements * 8));
    ref_outs.push_back(std::move(r));
    KFUSE_ASSIGN_OR_RETURN(DeviceBuffer o, DeviceBuffer::Alloc(b.elements * DTypeBytes(b.dtype)));
    outs.push_back(std::move(o));
  }
  // A reference that reads intermediates as double (wide_reference) gets
  // widened copies of the same values; the candidates and eager, the buffers.
  LaunchBuffers ref_lb = Bind(inputs, ref_outs);
  const LaunchBuffers lb = Bind(inputs, outs);
  std::vector<DeviceBuffer> wide;
  for (size_t i = 0; i < task.inputs.size(); ++i) {
    const BufferSpec& b = task.inputs[i];
    if (!b.wide_reference) continue;
    KFUSE_ASSIGN_OR_RETURN(DeviceBuffer w, DeviceBuffer::Alloc(b.elements * 8));
    KFUSE_RETURN_IF_ERROR(kernels.Widen(inputs[i], b.dtype, b.elements, w, stream));
    ref_lb.inputs[i] = w.ptr();
    wide.push_back(std::move(w));
  }
  KFUSE_RETURN_IF_ERROR(
      RunFixed("reference64", task.reference64, task, ref_lb, ref_outs, stream, poisoned));
  wide.clear();  // Only the reference reads them; RunFixed synchronized.
  KFUSE_RETURN_IF_ERROR(RunFixed("eager", task.eager, task, lb, outs, stream, poisoned));
  KFUSE_ASSIGN_OR_RETURN(std::vector<ErrorStats> eager_err,
                         PrepareReferences(task, kernels, ref_outs, outs, stream));

  DeviceBuffer flush;
  if (task.timing.flush_l2) {
    KFUSE_ASSIGN_OR_RETURN(flush, DeviceBuffer::Alloc(L2FlushBytes(device.l2_bytes)));
  }
  KFUSE_ASSIGN_OR_RETURN(TimingEvents ev, TimingEvents::Create(task.timing.repeats));

  auto stopped = [&] { return stop && stop(); };
  if (stopped()) return absl::CancelledError("the task was cancelled");
  KFUSE_RETURN_IF_ERROR(ready());
  const uint32_t n = static_cast<uint32_t>(task.candidates.size());
  for (uint32_t idx = req.first_candidate; idx < n; ++idx) {
    if (stopped()) return absl::CancelledError("the task was cancelled");
    // The seed (candidate 0) is always timed; the rest only while budget is left.
    if (idx > 0 && req.budget_left_seconds >= 0 && budget_left() <= 0) {
      return SkipFrom(idx, task, kBudgetSpentMessage, send);
    }
    const CompiledKernel& k = task.candidates[idx];
    TrialResult t;
    t.index = idx;
    absl::StatusOr<LoadedKernel> lk = LoadedKernel::Load(k);
    absl::StatusOr<BoundLaunch> bl = lk.ok() ? BindLaunch(k.spec, task.symbol_values, lb)
                                             : absl::StatusOr<BoundLaunch>(lk.status());
    if (!bl.ok()) {
      t.outcome = Outcome::kLaunchError;
      t.message = std::string(bl.status().message());
      KFUSE_RETURN_IF_ERROR(send(t));
      continue;
    }
    // Every output against the reference; `when` names the run judged in
    // messages. A note per output into `notes` when given.
    auto check = [&](const char* when, std::vector<std::string>* notes) -> RunResult {
      for (size_t j = 0; j < outs.size(); ++j) {
        const BufferSpec& out = task.outputs[j];
        absl::StatusOr<CompareStats> s =
            kernels.Compare(outs[j].ptr(), out.dtype, ref_outs[j].ptr(), out.elements, stream);
        if (!s.ok()) {
          // The candidate synchronized cleanly, so this is the context going
          // bad under us: report it against the candidate and start afresh.
          *poisoned = true;
          return {Outcome::kFault, absl::StrCat("checking output ", j, when, ": ", s.status().message())};
        }
        auto at = [&](int64_t i) {
          absl::StatusOr<double> got = ElementAt(outs[j].ptr(), out.dtype, i);
          absl::StatusOr<double> want = ElementAt(ref_outs[j].ptr(), DType::kF64, i);
          const double nan = std::numeric_limits<double>::quiet_NaN();
          return std::make_pair(got.ok() ? *got : nan, want.ok() ? *want : nan);
        };
        OutputCheck c = JudgeOutput(out.dtype, *s, out.elements, eager_err[j], task.slack,
                                    absl::StrCat("output ", j, when), at);
        if (!c.ok) return {Outcome::kWrongResult, c.message};
        if (notes != nullptr) notes->push_back(c.message);
      }
      return {Outcome::kOk, ""};
    };
    KFUSE_RETURN_IF_ERROR(Poison(outs, stream));
    RunResult r = LaunchAndSync(*lk, *bl, stream, poisoned);
    std::vector<std::string> notes;
    if (r.outcome == Outcome::kOk) r = check("", &notes);
    if (r.outcome == Outcome::kOk) {
      const double share =
          CandidateShare(task.timing, budget_left(), static_cast<int>(n - idx));
      r = TimeCandidate(*lk, *bl, task.timing, share, task.timing.flush_l2 ? &flush : nullptr,
                        stream, ev, poisoned, &t.samples_seconds);
      t.median_seconds = Median(t.samples_seconds);
      // The last timed run's outputs, judged again: a kernel right once by
      // chance (a race between its blocks) rarely stays right over the
      // timed runs.
      if (r.outcome == Outcome::kOk) r = check(" after timing", nullptr);
    }
    t.outcome = r.outcome;
    t.message = r.outcome == Outcome::kOk ? absl::StrJoin(notes, "; ") : r.message;
    KFUSE_RETURN_IF_ERROR(send(t));
    if (*poisoned) return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace kfuse
