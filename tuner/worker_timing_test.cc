// The timing policy: how many launches fill a candidate's share of the
// budget, and how the budget is shared. No GPU needed.
#include "tuner/worker_timing.h"

#include <vector>

#include "gtest/gtest.h"

namespace kfuse {
namespace {

TEST(WorkerTimingTest, TimedRepeatsFillTheShareWithinBounds) {
  TimingOptions opt;  // 10..100 repeats, at most 1 s.
  struct Case {
    double share, per_repeat;
    int want;
  };
  const Case cases[] = {
      {0.070, 2.6e-4, 100},  // 128M bf16 with a 14-candidate, 1 s share: capped at 100.
      {0.010, 2.6e-4, 38},   // Fills the share.
      {0.0, 2.6e-4, 10},     // Budget spent (the seed): still the minimum.
      {-1.0, 2.6e-4, 10},
      {0.5, 0.2, 5},         // A slow kernel: max_seconds (1 s) beats min_repeats.
      {0.5, 3.0, 1},         // Slower than max_seconds: one launch.
      {0.5, 0.0, 100},       // No estimate: the most.
  };
  for (const Case& c : cases) {
    EXPECT_EQ(TimedRepeats(opt, c.share, c.per_repeat), c.want)
        << "share " << c.share << " per repeat " << c.per_repeat;
  }
  opt.repeats = 5;  // Fewer allowed than the minimum: the maximum rules.
  EXPECT_EQ(TimedRepeats(opt, 0.0, 1e-4), 5);
  EXPECT_EQ(TimedRepeats(opt, 10.0, 1e-4), 5);
}

TEST(WorkerTimingTest, CandidateShareSplitsWhatIsLeft) {
  TimingOptions opt;
  opt.max_seconds = 0.7;
  EXPECT_DOUBLE_EQ(CandidateShare(opt, 1.0, 4), 0.25);
  EXPECT_DOUBLE_EQ(CandidateShare(opt, 1.0, 0), 1.0);
  EXPECT_DOUBLE_EQ(CandidateShare(opt, 0.0, 3), 0.0);
  EXPECT_DOUBLE_EQ(CandidateShare(opt, -1, 3), 0.7);  // No budget.
}

TEST(WorkerTimingTest, Median) {
  EXPECT_EQ(Median({}), 0);
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
}

}  // namespace
}  // namespace kfuse
