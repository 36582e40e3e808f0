#include "tuner/worker_timing.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/status.h"
#include "tuner/cuda/driver.h"

namespace kfuse {

RunResult FromLaunch(CUresult r, const char* what, bool* poisoned) {
  if (r == CUDA_SUCCESS) return {};
  bool sticky = IsStickyError(r);
  *poisoned = *poisoned || sticky;
  return {sticky ? Outcome::kFault : Outcome::kLaunchError,
          std::string(CuCheck(r, what).message())};
}

RunResult FromSync(CUresult r, const char* what, bool* poisoned) {
  if (r == CUDA_SUCCESS) return {};
  *poisoned = true;
  return {Outcome::kFault, std::string(CuCheck(r, what).message())};
}

int TimedRepeats(const TimingOptions& opt, double share_seconds, double per_repeat_seconds) {
  const int most = std::max(1, opt.repeats);
  const int least = std::clamp(opt.min_repeats, 1, most);
  if (!(per_repeat_seconds > 0)) return most;
  auto fit = [&](double seconds) {
    double n = std::floor(std::max(0.0, seconds) / per_repeat_seconds);
    return n >= most ? most : static_cast<int>(n);
  };
  const int n = std::clamp(fit(share_seconds), least, most);
  return std::max(1, std::min(n, fit(opt.max_seconds)));
}

double CandidateShare(const TimingOptions& opt, double budget_left_seconds, int candidates_left) {
  if (budget_left_seconds < 0) return opt.max_seconds;
  return budget_left_seconds / std::max(1, candidates_left);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

absl::StatusOr<TimingEvents> TimingEvents::Create(int pairs) {
  KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
  TimingEvents ev;
  for (int i = 0; i <= pairs; ++i) {
    CUevent a = nullptr, b = nullptr;
    KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuEventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate"));
    ev.start_.push_back(a);
    KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuEventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate"));
    ev.end_.push_back(b);
  }
  return ev;
}

TimingEvents& TimingEvents::operator=(TimingEvents&& o) noexcept {
  if (this != &o) {
    Destroy();
    start_ = std::move(o.start_);
    end_ = std::move(o.end_);
    o.start_.clear();
    o.end_.clear();
  }
  return *this;
}

TimingEvents::~TimingEvents() { Destroy(); }

void TimingEvents::Destroy() {
  if (start_.empty() && end_.empty()) return;
  const DriverApi* cu = *LoadDriver();
  for (CUevent e : start_) cu->cuEventDestroy(e);
  for (CUevent e : end_) cu->cuEventDestroy(e);
  start_.clear();
  end_.clear();
}

RunResult TimeCandidate(const LoadedKernel& k, BoundLaunch& l, const TimingOptions& opt,
                        double share_seconds, const DeviceBuffer* flush, CUstream s,
                        const TimingEvents& ev, bool* poisoned, std::vector<double>* samples) {
  const DriverApi* cu = *LoadDriver();
  // do_bench zeroes its cache buffer: the same work before every launch.
  auto flush_and_launch = [&](int timed) -> RunResult {
    if (flush != nullptr) {
      RunResult r = FromLaunch(cu->cuMemsetD8Async(flush->ptr(), 0, flush->bytes(), s),
                               "cuMemsetD8Async (L2 flush)", poisoned);
      if (r.outcome != Outcome::kOk) return r;
    }
    if (timed > 0) cu->cuEventRecord(ev.start(timed), s);
    RunResult r = FromLaunch(LaunchOn(k, l, s), "cuLaunchKernel (timed)", poisoned);
    if (r.outcome != Outcome::kOk) return r;
    if (timed > 0) cu->cuEventRecord(ev.end(timed), s);
    return r;
  };
  auto elapsed = [&](CUevent a, CUevent b, double* seconds) -> RunResult {
    float ms = 0;
    RunResult r = FromLaunch(cu->cuEventElapsedTime(&ms, a, b), "cuEventElapsedTime", poisoned);
    *seconds = ms * 1e-3;
    return r;
  };

  // The estimate doubles as the warm-up.
  const int warmup = std::max(1, opt.warmup);
  cu->cuEventRecord(ev.start(0), s);
  for (int i = 0; i < warmup; ++i) {
    RunResult r = flush_and_launch(0);
    if (r.outcome != Outcome::kOk) return r;
  }
  cu->cuEventRecord(ev.end(0), s);
  RunResult r = FromSync(cu->cuEventSynchronize(ev.end(0)), "kernel execution (warm-up)", poisoned);
  if (r.outcome != Outcome::kOk) return r;
  double warm = 0;
  r = elapsed(ev.start(0), ev.end(0), &warm);
  if (r.outcome != Outcome::kOk) return r;

  const int n = std::min(TimedRepeats(opt, share_seconds, warm / warmup), ev.pairs() - 1);
  for (int i = 1; i <= n; ++i) {
    r = flush_and_launch(i);
    if (r.outcome != Outcome::kOk) return r;
  }
  r = FromSync(cu->cuEventSynchronize(ev.end(n)), "kernel execution (timed)", poisoned);
  if (r.outcome != Outcome::kOk) return r;
  for (int i = 1; i <= n; ++i) {
    double t = 0;
    r = elapsed(ev.start(i), ev.end(i), &t);
    if (r.outcome != Outcome::kOk) return r;
    samples->push_back(t);
  }
  return {};
}

}  // namespace kfuse
