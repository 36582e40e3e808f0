#include "service/tuning_health.h"

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tuner/runner.h"

namespace kfuse {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// Tunes nothing; says whatever `why` says about its GPUs.
class FlippingRunner : public Runner {
 public:
  absl::StatusOr<std::vector<Trial>> Run(const CheckTask&, const std::function<void(const Trial&)>&) override {
    return absl::UnimplementedError("not in this test");
  }
  absl::StatusOr<DeviceFingerprint> Device() override { return absl::UnimplementedError("not in this test"); }
  absl::StatusOr<Ceilings> MeasureCeilings(const std::atomic<bool>* /*cancel*/) override { return absl::UnimplementedError("not in this test"); }
  std::optional<std::string> Unavailable() const override {
    absl::MutexLock lock(&mu_);
    return why_;
  }
  void Set(std::optional<std::string> why) {
    absl::MutexLock lock(&mu_);
    why_ = std::move(why);
  }

 private:
  mutable absl::Mutex mu_;
  std::optional<std::string> why_;
};

// What the health service was told, in order.
struct Statuses {
  absl::Mutex mu;
  std::vector<bool> set;
  TuningHealth::SetServing Callback() {
    return [this](bool serving) {
      absl::MutexLock lock(&mu);
      set.push_back(serving);
    };
  }
  std::vector<bool> Get() {
    absl::MutexLock lock(&mu);
    return set;
  }
};

TEST(TuningHealthTest, FollowsTheRunnerAndReportsEachChangeOnce) {
  FlippingRunner runner;
  Statuses statuses;
  TuningHealth health([&runner] { return runner.Unavailable(); }, statuses.Callback(), 3600);  // Checks only when told.
  ::testing::internal::CaptureStderr();
  health.Check();
  health.Check();
  runner.Set("no GPU left for tuning (GPU 0: no hello; tried again in 60 s)");
  health.Check();
  health.Check();
  runner.Set(std::nullopt);
  health.Check();
  health.Check();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(statuses.Get(), ElementsAre(true, false, true));
  // The first status is not a change; each change is one line.
  const size_t down = log.find("tuning_unavailable");
  ASSERT_NE(down, std::string::npos) << log;
  EXPECT_THAT(log.substr(down + 1), Not(HasSubstr("tuning_unavailable"))) << log;
  EXPECT_THAT(log, HasSubstr("GPU 0: no hello")) << log;
  const size_t up = log.find("tuning_available");
  ASSERT_NE(up, std::string::npos) << log;
  EXPECT_GT(up, down);
  EXPECT_THAT(log.substr(up + 1), Not(HasSubstr("tuning_available"))) << log;
}

TEST(TuningHealthTest, StartSetsTheStatusAndThePollerFollowsUntilStopped) {
  FlippingRunner runner;
  Statuses statuses;
  TuningHealth health([&runner] { return runner.Unavailable(); }, statuses.Callback(), 0.001);
  health.Start();
  EXPECT_THAT(statuses.Get(), ElementsAre(true));  // At once, not after an interval.
  runner.Set("no GPU left for tuning");
  for (int i = 0; i < 5000 && statuses.Get().size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_THAT(statuses.Get(), ElementsAre(true, false));
  health.Stop();
  runner.Set(std::nullopt);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // Many intervals.
  EXPECT_THAT(statuses.Get(), ElementsAre(true, false));
}

TEST(TuningHealthTest, WithoutAGpuItIsNeverServing) {
  Statuses statuses;
  TuningHealth health({}, statuses.Callback(), 0.001);
  health.Start();
  health.Check();
  health.Stop();
  EXPECT_THAT(statuses.Get(), ElementsAre(false));
}

}  // namespace
}  // namespace kfuse
