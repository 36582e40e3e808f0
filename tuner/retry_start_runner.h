// A tuning runner whose GPU may start later than the server: a node whose
// worker (or every worker of its pool) did not start with it (the GPU full,
// held in exclusive mode, not ready yet) would otherwise serve without tuning
// until restarted. This runner starts the real one on first use and, while
// that fails, again on NextRetryBackoff's schedule (60 s, doubling, up to an
// hour); once one starts it is that runner.
//
//   RetryStartRunner runner([&] { return WorkerRunner::Create(options); });
//   absl::StatusOr<DeviceFingerprint> d = runner.Device();  // Starts it.
//   if (!d.ok() && runner.retrying()) { /* try Device() again at next_try() */ }
#ifndef KFUSE_TUNER_RETRY_START_RUNNER_H_
#define KFUSE_TUNER_RETRY_START_RUNNER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tuner/runner.h"

namespace kfuse {

class RetryStartRunner : public Runner {
 public:
  // Makes the real runner, one whose Device() answers (a started worker, or
  // a pool with a member that reported its device). Its error's code says
  // whether trying again can help: NotFound (no worker binary),
  // FailedPrecondition (a worker of another build) and InvalidArgument (bad
  // options) cannot, and end the retries; any other code is retried.
  using StartFn = std::function<absl::StatusOr<std::unique_ptr<Runner>>()>;

  // `now`: monotonic seconds (empty: steady_clock); tests pass a fake clock.
  explicit RetryStartRunner(StartFn start, std::function<double()> now = {});
  ~RetryStartRunner() override;

  // The started runner's. Before one started: starts it on the caller's
  // thread when no failed start's backoff lasts (one start at a time; a
  // second caller waits for it), else the last failure, Unavailable. A
  // start that ends Cancelled (WorkerOptions::stop: the server stopping)
  // is answered as it is, and neither counts as a failure nor begins a
  // backoff.
  absl::StatusOr<DeviceFingerprint> Device() override;
  // The started runner's; Unavailable (never a start) before one started.
  absl::StatusOr<std::vector<Trial>> Run(
      const CheckTask& task, const std::function<void(const Trial&)>& on_trial) override;
  absl::StatusOr<Ceilings> MeasureCeilings(const std::atomic<bool>* cancel) override;
  // The started runner's; before: the last start's error and "; tried again
  // in N s" (without it when trying cannot help). Never waits on a start.
  std::optional<std::string> Unavailable() const override;

  // Whether a runner has started.
  bool started() const { return started_.load() != nullptr; }
  // Not started and a later Device() may start it.
  bool retrying() const;
  // When (on `now`'s clock) Device() will next try to start it.
  double next_try() const;

 private:
  absl::Status NotStartedLocked(double now) const;

  const StartFn start_;
  const std::function<double()> now_;
  std::mutex start_mu_;  // Held through a start.
  std::atomic<Runner*> started_{nullptr};
  mutable std::mutex mu_;  // What follows; never held through a start.
  std::unique_ptr<Runner> runner_;
  absl::Status last_failure_;  // OK before the first try.
  bool final_ = false;         // The last failure cannot be helped by trying again.
  double backoff_seconds_ = 0;
  double next_try_ = 0;
};

}  // namespace kfuse

#endif  // KFUSE_TUNER_RETRY_START_RUNNER_H_
