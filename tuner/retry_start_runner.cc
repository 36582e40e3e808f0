#include "tuner/retry_start_runner.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/clock.h"

namespace kfuse {
namespace {

// Failures a later start would meet again: the binary is missing, it is of
// another build, the options are wrong. A restart with a fix is needed.
bool CannotBeHelpedByTrying(const absl::Status& s) {
  return absl::IsNotFound(s) || absl::IsFailedPrecondition(s) || absl::IsInvalidArgument(s);
}

}  // namespace

RetryStartRunner::RetryStartRunner(StartFn start, std::function<double()> now)
    : start_(std::move(start)), now_(now ? std::move(now) : std::function<double()>(SteadySeconds)) {}

RetryStartRunner::~RetryStartRunner() = default;

absl::Status RetryStartRunner::NotStartedLocked(double now) const {
  if (last_failure_.ok()) return absl::UnavailableError("no tuning worker started yet");
  std::string why(last_failure_.message());
  if (final_) return absl::Status(last_failure_.code(), why);
  const double left = next_try_ - now;
  absl::StrAppend(&why, left > 0 ? absl::StrCat("; tried again in ", static_cast<int64_t>(std::ceil(left)), " s")
                                 : "; trying again");
  return absl::UnavailableError(why);
}

absl::StatusOr<DeviceFingerprint> RetryStartRunner::Device() {
  if (Runner* r = started_.load()) return r->Device();
  std::lock_guard<std::mutex> start(start_mu_);
  if (Runner* r = started_.load()) return r->Device();  // Started while this waited.
  {
    std::lock_guard<std::mutex> lock(mu_);
    const double now = now_();
    if (final_ || (!last_failure_.ok() && now < next_try_)) return NotStartedLocked(now);
  }
  absl::StatusOr<std::unique_ptr<Runner>> made = start_();
  if (made.ok() && *made == nullptr) made = absl::InternalError("the start gave no runner");
  if (absl::IsCancelled(made.status())) return made.status();  // Stopping: not a failure.
  std::lock_guard<std::mutex> lock(mu_);
  if (made.ok()) {
    runner_ = *std::move(made);
    started_.store(runner_.get());
    last_failure_ = absl::OkStatus();
    return runner_->Device();
  }
  last_failure_ = made.status();
  final_ = CannotBeHelpedByTrying(last_failure_);
  backoff_seconds_ = NextRetryBackoff(backoff_seconds_);
  next_try_ = now_() + backoff_seconds_;
  return NotStartedLocked(now_());
}

absl::StatusOr<std::vector<Trial>> RetryStartRunner::Run(
    const CheckTask& task, const std::function<void(const Trial&)>& on_trial) {
  if (Runner* r = started_.load()) return r->Run(task, on_trial);
  std::lock_guard<std::mutex> lock(mu_);
  return absl::UnavailableError(NotStartedLocked(now_()).message());
}

absl::StatusOr<Ceilings> RetryStartRunner::MeasureCeilings(const std::atomic<bool>* cancel) {
  if (Runner* r = started_.load()) return r->MeasureCeilings(cancel);
  std::lock_guard<std::mutex> lock(mu_);
  return absl::UnavailableError(NotStartedLocked(now_()).message());
}

std::optional<std::string> RetryStartRunner::Unavailable() const {
  if (const Runner* r = started_.load()) return r->Unavailable();
  std::lock_guard<std::mutex> lock(mu_);
  return std::string(NotStartedLocked(now_()).message());
}

bool RetryStartRunner::retrying() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_.load() == nullptr && !final_;
}

double RetryStartRunner::next_try() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_try_;
}

}  // namespace kfuse
