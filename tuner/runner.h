// Runs candidate kernels on a GPU: checks each against a float64 reference
// with eager PyTorch's error as the yardstick, then times it. The tuner and
// the service take a Runner so they can be tested with fakes; WorkerRunner is
// the real one and keeps every candidate in a child process, because a kernel
// that faults poisons its CUDA context and one that hangs holds the GPU.
//
//   WorkerOptions opts;                        // device 0, worker beside us
//   absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(opts);
//   if (!r.ok()) { /* Unavailable: no GPU, heuristic only */ }
//   CheckTask task = ...;                      // candidates + reference64 + eager
//   KFUSE_ASSIGN_OR_RETURN(std::vector<Trial> trials,
//                          (*r)->Run(task, [](const Trial& t) { /* progress */ }));
#ifndef KFUSE_TUNER_RUNNER_H_
#define KFUSE_TUNER_RUNNER_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/dtype.h"
#include "core/launch.h"
#include "core/roofline.h"
#include "core/trial.h"

namespace kfuse {

// Where random inputs are drawn from, so functions with a restricted domain
// (log, sqrt, asin) see valid arguments. Never all zeros.
enum class InputDomain : uint8_t {
  kAny = 0,       // Roughly normal, mean 0, sd 1.
  kPositive = 1,  // Uniform (0.1, 4).
  kUnit = 2,      // Uniform (-1, 1).
};

struct BufferSpec {
  DType dtype = DType::kF32;
  int64_t elements = 0;
  InputDomain domain = InputDomain::kAny;  // Inputs only.
  // Inputs only: an earlier kernel's result that the float64 reference
  // reads as double (ReferenceReadsIntermediatesAsDouble): the worker hands
  // it a widened copy of the candidates' buffer.
  bool wide_reference = false;
  // Integer inputs only, where index_extent > 0: a position along an axis (a
  // class label, codegen/analysis.h IndexDomain), drawn in [0, index_extent)
  // and one in 16 index_other.
  int64_t index_extent = 0;
  int64_t index_other = -1;
};

// How a candidate is timed, as triton's do_bench does (the benchmark's
// yardstick): every timed launch is preceded by an L2 flush (a memset of
// max(2 x L2, 256 MB)) and bracketed by events around the launch alone; the
// launches are enqueued back to back and synchronized once; the median of the
// samples is the candidate's time, and every sample is kept.
struct TimingOptions {
  int warmup = 3;  // Flush + launch pairs, timed together to estimate a repeat.
  // At most this many timed launches. Between min_repeats and repeats, the
  // count fills the candidate's share of the task's budget
  // (CheckTask::budget_seconds), or max_seconds when it has none.
  int repeats = 100;
  double max_seconds = 1.0;  // Per candidate: fewer repeats past this (at least 1).
  bool flush_l2 = true;
  int min_repeats = 10;
};

// One kernel's candidates and how to judge them. Params of every kernel here
// follow one contract: kBuffer params name input i / output j of the lists
// below; kScalar params and grids are SizeExprs over symbol_values.
struct CheckTask {
  std::vector<CompiledKernel> candidates;  // Fast variants of ONE kernel.
  CompiledKernel reference64;              // Same params; every output is f64 (8 bytes/element).
  CompiledKernel eager;                    // Same params/outputs as candidates; eager rounding.
  std::vector<int64_t> symbol_values;
  std::vector<BufferSpec> inputs, outputs;  // outputs: the candidates' dtypes.
  TimingOptions timing;
  // A candidate passes when, per output, max |cand - ref| <=
  // slack * max |eager - ref| + 4 * eps(dtype) * max |ref| (see tuner/check.h).
  double slack = 2.0;
  uint64_t seed = 0;  // 0: a fresh random seed (kept across worker restarts).
  // A candidate that has not finished (launch, check and timing) this long
  // after the timing budget is kTimeout; the worker is killed and restarted.
  double watchdog_seconds = 10.0;
  // Wall time for the whole Run (inputs, references, checks, timing); 0: no
  // limit. Candidate 0 (the seed) is always checked and timed; a later
  // candidate not started when the budget is spent is kSkipped ("tuning
  // budget spent"), and each one's timing fills its share of what is left.
  double budget_seconds = 0;
  // Not sent to the worker. When set and raised (every caller left, or the
  // server is stopping), Run notices within a quarter second, asks the
  // worker to stop before its next candidate and returns Cancelled once it
  // has (WorkerOptions::cancel_drain_seconds at most; one that has not by
  // then is killed, its candidate with it), so the next task need not wait
  // for a fresh worker.
  const std::atomic<bool>* cancel = nullptr;
};

class Runner {
 public:
  virtual ~Runner() = default;
  // One Trial per candidate, in order; on_trial (may be empty) sees each as it
  // finishes. A candidate that faults, hangs, launches badly or computes the
  // wrong answer is a Trial outcome. Errors: InvalidArgument for a malformed
  // task; Internal when the reference or eager kernel itself fails (nothing
  // can be judged); Unavailable when the GPU is gone.
  virtual absl::StatusOr<std::vector<Trial>> Run(
      const CheckTask& task, const std::function<void(const Trial&)>& on_trial) = 0;
  virtual absl::StatusOr<DeviceFingerprint> Device() = 0;
  // Read, write and copy bandwidth; FMA, special-function and tensor rates.
  // `cancel` (may be null) raised, as at shutdown, it stops with Cancelled
  // within a quarter second of the request being sent (a worker that had to
  // be started first is waited for, unless WorkerOptions::stop is raised),
  // plus the kill of a measurement in
  // progress with its worker (3 s at most for one stuck in the driver; the
  // protocol has no cancel for it, and the next call starts a fresh worker).
  virtual absl::StatusOr<Ceilings> MeasureCeilings(const std::atomic<bool>* cancel) = 0;
  // Why the next Run would be Unavailable without trying a GPU, or nullopt
  // when some GPU would take it; what tuning health reports. Cheap and
  // thread-safe: it is polled beside running tasks. A runner that restarts
  // its own worker is never unavailable in advance.
  virtual std::optional<std::string> Unavailable() const { return std::nullopt; }
};

struct WorkerOptions {
  std::string worker_path;  // "": kfuse-worker next to /proc/self/exe.
  int device = 0;
  // Device bytes a task may allocate (buffers, references, L2 flush);
  // larger tasks give kSkipped trials. 0: no limit beyond free memory.
  int64_t memory_budget_bytes = 0;
  double start_timeout_seconds = 60;  // Worker start-up, driver init included.
  // A worker takes a request at once; one that has not taken it whole within
  // this is stuck (alive, not reading) and is killed.
  double send_timeout_seconds = 60;
  // A cancelled task (CheckTask::cancel) is given this long to stop after
  // its candidate on the GPU; then its worker is killed. 0: killed at once.
  double cancel_drain_seconds = 3;
  // Not owned; may be null. Raised when the server is stopping: a worker
  // start waiting for its hello gives up within a quarter second (the
  // worker killed, the start Cancelled, no backoff), so shutdown does not
  // wait out start_timeout_seconds for a GPU slow to come up.
  const std::atomic<bool>* stop = nullptr;
  // Monotonic seconds; empty: steady_clock. Tests inject it to pass a
  // start's backoff without waiting.
  std::function<double()> now;
};

// How long a GPU that failed (its worker gone or not starting) is left alone
// before it is tried again, given the last wait (0: none): 60 s, doubling
// while it keeps failing, up to an hour. A worker that missed its hello once
// comes back soon; a GPU truly gone costs a task an hour at most.
inline double NextRetryBackoff(double last_seconds) {
  return last_seconds == 0 ? 60 : std::min(2 * last_seconds, 3600.0);
}

class WorkerProcess;  // tuner/worker_process.h

class WorkerRunner : public Runner {
 public:
  // Starts the worker and asks it for the device. Unavailable when the worker
  // finds no usable GPU (the service then runs heuristic only); NotFound when
  // the worker binary is missing.
  static absl::StatusOr<std::unique_ptr<WorkerRunner>> Create(WorkerOptions opts);
  // As Create, but a worker that fails to start still gives a runner, in
  // that start's backoff; `started` gets the start's status. Its Device()
  // starts the worker (after the backoff) until one has started. For a
  // pool, whose GPU may come back.
  static std::unique_ptr<WorkerRunner> CreateEvenIfDown(WorkerOptions opts, absl::Status* started);
  ~WorkerRunner() override;

  // Thread-safe: one task at a time. A worker that fails to start (the GPU
  // gone, the driver broken) is not tried again for 60 s, then twice as
  // long each time it fails again (up to an hour): meanwhile Run and
  // MeasureCeilings are Unavailable at once, and so is Unavailable().
  absl::StatusOr<std::vector<Trial>> Run(
      const CheckTask& task, const std::function<void(const Trial&)>& on_trial) override;
  absl::StatusOr<DeviceFingerprint> Device() override;
  absl::StatusOr<Ceilings> MeasureCeilings(const std::atomic<bool>* cancel) override;
  std::optional<std::string> Unavailable() const override;

  // Worker processes started so far (1 + restarts); for tests and metrics.
  int starts() const;
  // The current worker's process id (0 before the first start), so GPU load
  // readings can leave our own work out. Does not wait for a running task.
  int pid() const { return pid_.load(std::memory_order_relaxed); }

 private:
  explicit WorkerRunner(WorkerOptions opts);
  // Starts the worker unless one runs or a failed start's backoff lasts.
  absl::Status EnsureStartedLocked();
  absl::Status StartLocked();
  // Sends a request, starting the worker if needed; a worker that died while
  // idle (the GPU was reset, or it was killed) or is stuck gets one fresh
  // try. Unavailable when that fails too; the worker is then gone.
  absl::Status SendLocked(uint32_t type, const std::string& payload);
  // A task in progress whose callers left: asks the worker to stop it and
  // waits (cancel_drain_seconds at most) for it to say so, dropping what
  // it still reports; kills a worker that does not.
  void StopTaskLocked();

  WorkerOptions opts_;
  mutable std::mutex mu_;
  std::unique_ptr<WorkerProcess> worker_;
  DeviceFingerprint device_;
  int starts_ = 0;
  std::atomic<int> pid_{0};
  // The last failed start's backoff, apart from mu_ (held through a task)
  // so Unavailable() never waits.
  mutable std::mutex down_mu_;
  double down_until_ = 0;
  double down_seconds_ = 0;  // 0: the last start worked.
  std::string down_reason_;
  bool started_once_ = false;
};

// Device bytes `task` allocates in the worker: inputs, candidate outputs,
// f64 reference outputs, eager outputs, and the L2 flush buffer
// (L2FlushBytes when timing.flush_l2). What the memory budget is compared
// against.
int64_t TaskDeviceBytes(const CheckTask& task, int64_t l2_bytes);

// The L2 flush buffer: max(2 x l2_bytes, 256 MB), so it evicts any L2 and is
// at least what triton's do_bench zeroes.
int64_t L2FlushBytes(int64_t l2_bytes);

// InvalidArgument naming the field when the task cannot be run: no
// candidates, a buffer param out of range, an unevaluable grid, mismatched
// output counts, non-positive sizes, slack < 1, watchdog <= 0, timing
// counts out of range, a negative budget.
absl::Status ValidateTask(const CheckTask& task);

}  // namespace kfuse

#endif  // KFUSE_TUNER_RUNNER_H_
