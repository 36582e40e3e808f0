// Keeps "kfuse.v1.Tuning" health in step with the tuning runner: a node whose
// GPUs have all left the tuning pool (or whose GPU has not joined) says NOT_SERVING, so a load balancer
// sends tuning work elsewhere until one of them is due back.
//
//   TuningHealth tuning([&] { return node->TuningUnavailable(); }, [health](bool serving) {
//     health->SetServingStatus("kfuse.v1.Tuning", serving);
//   }, /*interval_seconds=*/5);
//   tuning.Start();  // Sets the status now, then polls the runner.
//   ...
//   tuning.Stop();   // Before the server shuts down.
#ifndef KFUSE_SERVICE_TUNING_HEALTH_H_
#define KFUSE_SERVICE_TUNING_HEALTH_H_

#include <functional>
#include <optional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include <string>

namespace kfuse {

class TuningHealth {
 public:
  using SetServing = std::function<void(bool serving)>;
  // Why no tuning task can be taken now, or nullopt when one can (a
  // Runner's Unavailable(), say); cheap and thread-safe. Empty: no GPU,
  // never serving, not polled. What it reads must outlive this.
  using Unavailable = std::function<std::optional<std::string>()>;
  TuningHealth(Unavailable unavailable, SetServing set_serving, double interval_seconds);
  ~TuningHealth();  // Stops.
  TuningHealth(const TuningHealth&) = delete;
  TuningHealth& operator=(const TuningHealth&) = delete;

  // Sets the status now and, with a runner, checks it again every interval
  // on a thread of its own.
  void Start();
  // Ends the polling; the status stays as last set.
  void Stop();
  // One poll: sets the status when it differs from the last one set, and
  // logs the change (tuning_unavailable with the reason, tuning_available);
  // the first setting is not logged, as kfused's start-up line says it.
  void Check();

 private:
  void Poll();
  void CheckLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Unavailable unavailable_;
  const SetServing set_serving_;
  const absl::Duration interval_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<bool> serving_ ABSL_GUARDED_BY(mu_);  // As last set.
  std::thread poller_;
};

}  // namespace kfuse

#endif  // KFUSE_SERVICE_TUNING_HEALTH_H_
