#include "service/jobs.h"

#include "gtest/gtest.h"

namespace kfuse {
namespace {

// Shutdown cancels what is left: background work too, which no caller's
// leaving ever cancels.
TEST(JobTableTest, CancelAllReachesBackgroundJobs) {
  JobTable jobs;
  bool started = false;
  const auto done = [](const JobTable::Result&, bool) {};
  JobTable::Ticket waited =
      jobs.Join("a", /*background=*/false, /*background_pool=*/false, done, nullptr, &started);
  ASSERT_TRUE(started);
  JobTable::Ticket background =
      jobs.Join("b", /*background=*/true, /*background_pool=*/true, done, nullptr, &started);
  ASSERT_TRUE(started);
  jobs.Leave(background);  // Background work stays, uncancelled.
  EXPECT_FALSE(background.job->cancel.load());
  EXPECT_EQ(jobs.CancelAll(), 2);
  EXPECT_TRUE(waited.job->cancel.load());
  EXPECT_TRUE(background.job->cancel.load());
  jobs.Finish(waited.job, absl::CancelledError("test"));
  jobs.Finish(background.job, absl::CancelledError("test"));
  EXPECT_EQ(jobs.CancelAll(), 0);
}

}  // namespace
}  // namespace kfuse
