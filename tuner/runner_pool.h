// Several GPUs of one model behind one Runner: each tuning task goes to a
// free GPU, so N jobs use N GPUs at once, and the GPUs share one fingerprint,
// so they share cache keys and results. With an IdlePolicy a task also waits
// until a GPU is idle enough (other processes' load, free memory) before
// running there, so tuning does not slow production work on a shared GPU.
//
//   std::vector<PoolMember> members;           // One runner (+ probe) per GPU.
//   members.push_back({std::move(runner0), std::move(probe0), /*device=*/0});
//   members.push_back({std::move(runner1), nullptr, /*device=*/1});  // Never gated.
//   RunnerPoolOptions o;
//   o.idle = IdlePolicy{};
//   std::vector<ExcludedMember> left_out;      // Other GPU models, with the reason.
//   KFUSE_ASSIGN_OR_RETURN(std::unique_ptr<RunnerPool> pool,
//                          RunnerPool::Create(std::move(members), o, &left_out));
//   KFUSE_ASSIGN_OR_RETURN(std::vector<Trial> trials, pool->Run(task, on_trial));
//
// For the node, CreateWorkerPool builds it all from a device list.
#ifndef KFUSE_TUNER_RUNNER_POOL_H_
#define KFUSE_TUNER_RUNNER_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "tuner/gpu_load.h"
#include "tuner/runner.h"

namespace kfuse {

struct PoolMember {
  std::unique_ptr<Runner> runner;
  std::unique_ptr<GpuLoadProbe> probe;  // Null: never waits for idle time.
  int device = 0;                       // CUDA ordinal: messages and metrics.
};

struct ExcludedMember {
  PoolMember member;
  std::string
      reason;  // "GPU 1 (NVIDIA A100 ...) differs from GPU 0 (...): ...; not used for tuning"
};

struct RunnerPoolOptions {
  std::optional<IdlePolicy> idle;  // Unset: a task runs as soon as a GPU is free.
  // Monotonic seconds and a sleep; empty: steady_clock and sleep_for. Tests
  // inject both to wait without waiting.
  std::function<double()> now;
  std::function<void(double)> sleep;
};

// One member's counters and state, for tests and metrics.
struct MemberStats {
  int device = 0;
  bool in_rotation = true;
  bool running = false;     // A task (or the ceilings) is on it now.
  int64_t tasks = 0;        // Runs handed to it, whatever their result.
  double busy_seconds = 0;  // Inside its Run.
  // Time a waiting task found it free but held back by the idle policy.
  double idle_wait_seconds = 0;
  std::optional<GpuLoad> last_load;  // The latest reading, if it has a probe.
  std::string removed_reason;        // Why it is out of the rotation.
  // It reported a device of the pool's model. A member that could not (its
  // worker did not start) waits out of the rotation and joins when it
  // reports one: after each backoff its worker is started in the background
  // (`starting`), so no task waits on that start.
  bool joined = true;
  bool starting = false;
};

class RunnerPool : public Runner {
 public:
  // Keeps the candidates whose Device() digest equals the first readable
  // one's; the others go to `excluded` (may be null) with a reason to log.
  // A candidate that cannot report its device now (its worker did not
  // start) is kept out of the rotation, as a member whose GPU failed is:
  // once its backoff (60 s, doubling) has passed, the next task's wait
  // starts its worker in the background, and it joins when it reports the
  // pool's model (another model leaves the rotation for good). InvalidArgument naming the field for no
  // candidates, a null runner, a repeated device or a bad idle policy;
  // Unavailable when no candidate reports a device.
  static absl::StatusOr<std::unique_ptr<RunnerPool>> Create(std::vector<PoolMember> candidates,
                                                            RunnerPoolOptions options,
                                                            std::vector<ExcludedMember>* excluded);

  // Waits (first come, first served) for a free member and, with an idle
  // policy, for one whose GPU has been idle for settle_seconds; runs the task
  // there. Unavailable "GPU n busy for ... s; tuning deferred" past
  // max_wait_seconds of such waiting; Unavailable from a member (its GPU is
  // gone, or its worker failed) is returned and the member leaves the
  // rotation for 60 s, then twice as long each time it fails again (up to an
  // hour), before a task tries it again; Unavailable when no member is in
  // the rotation. Thread-safe; the pool must outlive its calls.
  absl::StatusOr<std::vector<Trial>> Run(
      const CheckTask& task, const std::function<void(const Trial&)>& on_trial) override;
  // The fingerprint every member shares.
  absl::StatusOr<DeviceFingerprint> Device() override;
  // On the first member in rotation that is free (not idle-gated); while
  // every one runs a task, on one that ends (a waiting task may take the
  // first to end).
  absl::StatusOr<Ceilings> MeasureCeilings(const std::atomic<bool>* cancel) override;
  // "no GPU left for tuning (...)" while every member is out of the rotation
  // and none is due back by options.now; nullopt otherwise, busy or
  // idle-gated members included (a task waits for those).
  std::optional<std::string> Unavailable() const override;

  ~RunnerPool() override;  // Waits for workers being started.

  std::vector<MemberStats> stats() const;  // In member order.
  int waiting() const;                     // Runs waiting for a member now.
  int64_t deferred() const;                // Runs that gave up past max_wait_seconds.

 private:
  struct Slot {
    PoolMember m;
    MemberStats stats;
    uint64_t last_release = 0;  // Order of release: the least recent goes first.
    double idle_since = -1;     // Start of the current run of idle samples; -1: none.
    double last_sample = -1;    // When it was last sampled.
    std::string last_error;     // The probe's last failure.
    // Out of the rotation: when (options_.now) a task may try it again, and
    // how long it was out this time.
    double readmit_at = 0;
    double backoff_seconds = 0;
    std::thread starter;  // StartPending's, for a member that has not joined.
  };
  static constexpr double kNever = 1e300;  // readmit_at of a member of another model.

  RunnerPool(std::vector<Slot> slots, DeviceFingerprint device, RunnerPoolOptions options);
  absl::StatusOr<size_t> Acquire();
  // On its own thread: starts the worker of member i, which has not joined,
  // by asking its device; it joins, waits twice as long, or (another model)
  // leaves for good.
  void StartPending(size_t i);
  void Release(size_t i, double seconds, const absl::Status& status);
  // Puts members whose backoff has passed back in the rotation.
  void ReadmitLocked();
  bool AnyFreeLocked() const;
  size_t InRotationLocked() const;
  // The least recently released of `candidates`.
  size_t PickLocked(const std::vector<size_t>& candidates) const;
  void TakeLocked(size_t i);
  std::string GoneLocked() const;
  std::string DeferredLocked(const std::vector<size_t>& gated, double waited) const;

  const DeviceFingerprint device_;
  const RunnerPoolOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // A member was released, or the head left.
  std::vector<Slot> slots_;
  uint64_t next_ticket_ = 0;  // FIFO: tickets are served in order.
  uint64_t serving_ = 0;
  uint64_t releases_ = 0;
  int waiting_ = 0;
  int64_t deferred_ = 0;
};

// "all": every visible device; "0,2": those ordinals, in that order.
// InvalidArgument naming "devices" for an empty list, a non-number, a
// repeated ordinal or one out of [0, device_count).
absl::StatusOr<std::vector<int>> ParseDeviceList(std::string_view devices, int device_count);

struct WorkerPoolOptions {
  std::vector<int> devices;  // CUDA ordinals (ParseDeviceList); the first is the reference.
  WorkerOptions worker;      // For every worker; `device` is set per GPU.
  std::optional<IdlePolicy> idle;
  // The PCI bus id of a CUDA ordinal, so NVML finds the same GPU for sure;
  // empty: NVML matched by index (see NvmlDeviceSelector).
  std::function<absl::StatusOr<std::string>(int)> pci_bus_id;
};

struct WorkerPool {
  std::unique_ptr<RunnerPool> pool;
  // One line each: a GPU left out (no worker, another model) or tuned without
  // the idle gate, and why; how each gate samples its GPU.
  std::vector<std::string> notes;
};

// Starts one WorkerRunner per device (in parallel) and, with an idle policy,
// an NvmlLoadProbe per device that leaves that worker's own load out.
// When no worker starts: an error naming every device's reason, with their
// code when they share one (NotFound: no worker binary), else Unavailable.
absl::StatusOr<WorkerPool> CreateWorkerPool(const WorkerPoolOptions& options);

}  // namespace kfuse

#endif  // KFUSE_TUNER_RUNNER_POOL_H_
