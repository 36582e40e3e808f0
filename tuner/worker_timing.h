// Timing one candidate in the worker the way the benchmark does (triton's
// do_bench): an L2 flush before every launch, events around the launch
// alone, all launches enqueued back to back and synchronized once, the
// median kept with every sample. How many launches follows the candidate's
// share of the task's budget. The policy functions are pure, for tests.
//
//   int n = TimedRepeats(task.timing, /*share=*/0.05, /*per_repeat=*/2.6e-4);  // 100
//   KFUSE_ASSIGN_OR_RETURN(TimingEvents ev, TimingEvents::Create(task.timing.repeats));
//   RunResult r = TimeCandidate(kernel, launch, task.timing, share, &flush, stream, ev,
//                               &poisoned, &trial.samples_seconds);
#ifndef KFUSE_TUNER_WORKER_TIMING_H_
#define KFUSE_TUNER_WORKER_TIMING_H_

#include <cuda.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/trial.h"
#include "tuner/runner.h"
#include "tuner/worker_buffers.h"
#include "tuner/worker_launch.h"

namespace kfuse {

// The outcome of launching (and maybe synchronizing) a candidate.
struct RunResult {
  Outcome outcome = Outcome::kOk;
  std::string message;
};

// A launch the driver refused: kLaunchError, or kFault (and *poisoned) for a
// sticky error.
RunResult FromLaunch(CUresult r, const char* what, bool* poisoned);
// After a launch was accepted, any error at synchronization comes from the
// kernel: a fault, and the context is unusable (*poisoned).
RunResult FromSync(CUresult r, const char* what, bool* poisoned);

// Timed launches for a candidate whose flush + launch takes
// `per_repeat_seconds`: fill `share_seconds`, between min(min_repeats,
// repeats) and repeats, and never past max_seconds (at least 1).
int TimedRepeats(const TimingOptions& opt, double share_seconds, double per_repeat_seconds);

// A candidate's share of the budget: what is left over the candidates left
// (this one included); max_seconds when the task has no budget
// (budget_left_seconds < 0).
double CandidateShare(const TimingOptions& opt, double budget_left_seconds, int candidates_left);

double Median(std::vector<double> v);

// Event pairs for up to `pairs` timed launches plus the estimate's pair.
class TimingEvents {
 public:
  static absl::StatusOr<TimingEvents> Create(int pairs);
  TimingEvents() = default;
  TimingEvents(TimingEvents&& o) noexcept = default;
  TimingEvents& operator=(TimingEvents&& o) noexcept;
  TimingEvents(const TimingEvents&) = delete;
  TimingEvents& operator=(const TimingEvents&) = delete;
  ~TimingEvents();

  int pairs() const { return static_cast<int>(start_.size()); }
  CUevent start(int i) const { return start_[i]; }
  CUevent end(int i) const { return end_[i]; }

 private:
  void Destroy();
  std::vector<CUevent> start_, end_;  // Index 0 is the estimate's.
};

// Warm-up (also the estimate: `warmup` flush + launch pairs between one
// event pair), then TimedRepeats(...) flush + timed launch pairs enqueued
// back to back, one synchronization, one sample per launch in *samples.
// `flush` may be null (no flush).
RunResult TimeCandidate(const LoadedKernel& k, BoundLaunch& l, const TimingOptions& opt,
                        double share_seconds, const DeviceBuffer* flush, CUstream s,
                        const TimingEvents& ev, bool* poisoned, std::vector<double>* samples);

}  // namespace kfuse

#endif  // KFUSE_TUNER_WORKER_TIMING_H_
