// Brings a node's GPU into tuning once its worker starts. A node whose
// worker (or every worker of its pool) did not start with it serves
// heuristic answers meanwhile; this tries again on the runner's schedule, on
// a thread of its own, and when a start works reads (or measures) the GPU's
// ceilings and attaches the GPU to the pipeline, so the node tunes without a
// restart.
//
//   TuningStarter starter(&retry_runner, store, pipeline);
//   if (starter.TryNow() == TuningStarter::Result::kRetry) starter.Start();
//   ...
//   starter.Stop();  // Before the pipeline and the runner go.
#ifndef KFUSE_SERVICE_TUNING_START_H_
#define KFUSE_SERVICE_TUNING_START_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "cache/store.h"
#include "core/key.h"
#include "core/roofline.h"
#include "service/pipeline.h"
#include "tuner/retry_start_runner.h"

namespace kfuse {

// Where a device's measured ceilings are kept in the store.
CacheKey CeilingsKey(const DeviceFingerprint& device);

// The device's ceilings from the store, else measured on `runner` and kept
// there; the nominal figures of its architecture when they cannot be
// measured (logged as ceilings_not_measured). Cancelled, with nothing
// logged or stored, when `cancel` (may be null) is raised by the time the
// measurement ends, or it ended Cancelled (its worker's start given up for
// the server's stop).
absl::StatusOr<Ceilings> StoredOrMeasuredCeilings(Store& store, Runner& runner,
                                                  const DeviceFingerprint& device,
                                                  const std::atomic<bool>* cancel);

class TuningStarter {
 public:
  // Each must outlive this. `now`: the runner's clock (empty: steady_clock).
  TuningStarter(RetryStartRunner* runner, Store* store, Pipeline* pipeline,
                std::function<double()> now = {});
  ~TuningStarter();  // Stop().
  TuningStarter(const TuningStarter&) = delete;
  TuningStarter& operator=(const TuningStarter&) = delete;

  enum class Result {
    kAttached,  // The GPU tunes now.
    kRetry,     // Not started; the runner tries again at next_try().
    kGaveUp,    // Not started, and trying again cannot help (or the node is stopping).
  };
  // One try, on the caller's thread. A try after the first logs its outcome
  // (tuning_started, tuning_start_failed); the first is kfused's start-up
  // line's to say.
  Result TryNow();
  // Tries at each of the runner's next_try() on a thread until the GPU is
  // attached or trying cannot help.
  void Start();
  // Ends the thread, after the try in progress: a worker start runs to its
  // end (at most its start timeout, unless its WorkerOptions::stop is
  // raised, as ServiceNode does first), a measurement of the GPU's ceilings
  // is cancelled (within a quarter second, plus its worker's kill: 3 s at
  // most for one stuck in the driver), and the GPU is not attached.
  void Stop();

 private:
  void Loop();

  RetryStartRunner* const runner_;
  Store* const store_;
  Pipeline* const pipeline_;
  const std::function<double()> now_;
  int tries_ = 0;  // Only TryNow's caller (one at a time) touches it.
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<bool> cancel_{false};  // stop_, for the runner to look at.
  std::thread thread_;
};

}  // namespace kfuse

#endif  // KFUSE_SERVICE_TUNING_START_H_
