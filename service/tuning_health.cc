#include "service/tuning_health.h"

#include <string>
#include <utility>

#include "core/log.h"

namespace kfuse {

TuningHealth::TuningHealth(Unavailable unavailable, SetServing set_serving, double interval_seconds)
    : unavailable_(std::move(unavailable)), set_serving_(std::move(set_serving)), interval_(absl::Seconds(interval_seconds)) {}

TuningHealth::~TuningHealth() { Stop(); }

void TuningHealth::Start() {
  Check();
  if (unavailable_ && !poller_.joinable()) poller_ = std::thread([this] { Poll(); });
}

void TuningHealth::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (poller_.joinable()) poller_.join();
}

void TuningHealth::Check() {
  absl::MutexLock lock(&mu_);
  CheckLocked();
}

void TuningHealth::Poll() {
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stop_), interval_)) CheckLocked();
}

void TuningHealth::CheckLocked() {
  const std::optional<std::string> why =
      unavailable_ ? unavailable_() : std::optional<std::string>("no GPU");
  const bool serving = !why.has_value();
  if (serving_ == serving) return;
  const bool first = !serving_.has_value();
  serving_ = serving;
  set_serving_(serving);
  if (first) return;
  if (serving) {
    LogEvent(LogLevel::kInfo, "tuning_available", {});
  } else {
    LogEvent(LogLevel::kWarning, "tuning_unavailable", {{"reason", *why}});
  }
}

}  // namespace kfuse
