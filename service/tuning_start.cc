#include "service/tuning_start.h"

#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "core/key.h"
#include "core/log.h"
#include "kfuse/v1/kfuse.pb.h"
#include "service/convert.h"

namespace kfuse {

CacheKey CeilingsKey(const DeviceFingerprint& device) {
  return CacheKey{"ceilings", "v1", device.Digest(), "", "ceilings/1"};
}

// Ceilings are measured once per device and kept in the store.
absl::StatusOr<Ceilings> StoredOrMeasuredCeilings(Store& store, Runner& runner,
                                                  const DeviceFingerprint& device,
                                                  const std::atomic<bool>* cancel) {
  const CacheKey key = CeilingsKey(device);
  auto blob = store.GetDecision(key);
  v1::Ceilings stored;
  if (blob.ok() && blob->has_value() && stored.ParseFromString(**blob) && stored.measured()) {
    Ceilings c = FromProto(stored);
    c.source = absl::StrCat("measured on ", device.name);
    return c;
  }
  absl::StatusOr<Ceilings> measured = runner.MeasureCeilings(cancel);
  // Stopping: `cancel` raised, or the worker's start given up for the
  // server's stop (WorkerOptions::stop).
  if ((cancel != nullptr && cancel->load()) || absl::IsCancelled(measured.status())) {
    return absl::CancelledError("measuring ceilings: stopping");
  }
  if (!measured.ok()) {
    LogEvent(LogLevel::kWarning, "ceilings_not_measured",
             {{"error", measured.status().ToString()}, {"now", "using nominal figures"}});
    return NominalCeilings(device.compute_capability());
  }
  measured->measured = true;
  measured->source = absl::StrCat("measured on ", device.name);
  EntryMeta meta{"ceilings", "", device.name, "measured", "device ceilings"};
  absl::Status s = store.PutDecision(key, ToProto(*measured).SerializeAsString(), meta);
  if (!s.ok()) LogEvent(LogLevel::kWarning, "store_put_failed", {{"key", "ceilings"}, {"error", s.ToString()}});
  return *measured;
}

TuningStarter::TuningStarter(RetryStartRunner* runner, Store* store, Pipeline* pipeline,
                             std::function<double()> now)
    : runner_(runner),
      store_(store),
      pipeline_(pipeline),
      now_(now ? std::move(now) : std::function<double()>(SteadySeconds)) {}

TuningStarter::~TuningStarter() { Stop(); }

TuningStarter::Result TuningStarter::TryNow() {
  const bool first = tries_++ == 0;
  absl::StatusOr<DeviceFingerprint> device = runner_->Device();
  if (!device.ok()) {
    // Stopping: the start was given up, not failed.
    if (absl::IsCancelled(device.status()) || cancel_.load()) return Result::kGaveUp;
    const bool again = runner_->retrying();
    if (!first) {
      LogEvent(LogLevel::kWarning, "tuning_start_failed",
               {{"error", std::string(device.status().message())},
                {"effect", again ? "heuristic answers until a later try works" : "heuristic answers until restarted"}});
    }
    return again ? Result::kRetry : Result::kGaveUp;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return Result::kGaveUp;  // Stopping: no ceilings to measure for it.
  }
  absl::StatusOr<Ceilings> ceilings = StoredOrMeasuredCeilings(*store_, *runner_, *device, &cancel_);
  // Stopping (the measurement cancelled, or done as Stop came): not attached.
  if (!ceilings.ok() || cancel_.load()) return Result::kGaveUp;
  TuningGpu gpu{runner_, *device, *std::move(ceilings)};
  if (absl::Status s = pipeline_->AttachGpu(std::move(gpu)); !s.ok()) {
    LogEvent(LogLevel::kWarning, "tuning_start_failed", {{"error", s.ToString()}});
    return Result::kGaveUp;
  }
  if (!first) LogEvent(LogLevel::kInfo, "tuning_started", {{"gpu", device->name}});
  return Result::kAttached;
}

void TuningStarter::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { Loop(); });
}

void TuningStarter::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cancel_ = true;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TuningStarter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const double wait = runner_->next_try() - now_();
    if (wait > 0) {
      cv_.wait_for(lock, std::chrono::duration<double>(wait));
      continue;
    }
    lock.unlock();
    const Result r = TryNow();
    lock.lock();
    if (r != Result::kRetry) return;
  }
}

}  // namespace kfuse
