// What kfuse-worker does with one RunRequest: make inputs on the GPU, run
// the f64 reference and eager once, then per candidate one launch, a check
// on the GPU (a few KB come back) and do_bench-style timing, reporting each
// as it finishes, within the request's budget. Runs inside the worker only.
//
//   bool poisoned = false;
//   absl::Status s = RunTaskInWorker(req, device, *kernels, stream, ready, send_trial, &poisoned);
//   // reply kMsgTaskDone with s; exit if poisoned.
#ifndef KFUSE_TUNER_WORKER_TASK_H_
#define KFUSE_TUNER_WORKER_TASK_H_

#include <cuda.h>

#include <functional>

#include "absl/status/status.h"
#include "core/trial.h"
#include "tuner/worker_kernels.h"
#include "tuner/worker_protocol.h"

namespace kfuse {

using TrialSink = std::function<absl::Status(const TrialResult&)>;
using ReadySink = std::function<absl::Status()>;

// Needs the device's context current, `kernels` loaded in it, and `stream`
// created blocking (flags 0) or at least used for every operation here.
// Calls `ready` once the inputs and references are done (so the parent can
// start the per-candidate watchdog), then sends one TrialResult per
// candidate from req.first_candidate on, in order, unless it returns an
// error first (bad task, or the reference/eager kernels failed). Candidates
// after 0 that would start once req.budget_left_seconds is spent are
// kSkipped (kBudgetSpentMessage). Sets *context_poisoned when a kernel
// faulted: the caller must then exit, after reporting. `stop` (may be
// empty) is asked before `ready` and before each candidate; when it says
// so the task ends there, Cancelled.
absl::Status RunTaskInWorker(const RunRequest& req, const DeviceFingerprint& device,
                             const WorkerKernels& kernels, CUstream stream, const ReadySink& ready,
                             const TrialSink& send, bool* context_poisoned,
                             const std::function<bool()>& stop = {});

}  // namespace kfuse

#endif  // KFUSE_TUNER_WORKER_TASK_H_
