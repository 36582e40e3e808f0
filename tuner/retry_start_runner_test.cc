#include "tuner/retry_start_runner.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A started runner: reports a device and counts the tasks it is given.
class StartedRunner : public Runner {
 public:
  absl::StatusOr<std::vector<Trial>> Run(const CheckTask&, const std::function<void(const Trial&)>&) override {
    ++runs;
    return std::vector<Trial>{};
  }
  absl::StatusOr<DeviceFingerprint> Device() override {
    DeviceFingerprint d;
    d.name = "Started GPU";
    d.cc_major = 9;
    return d;
  }
  absl::StatusOr<Ceilings> MeasureCeilings(const std::atomic<bool>* /*cancel*/) override { return NominalCeilings(90); }
  std::optional<std::string> Unavailable() const override { return why; }
  std::atomic<int> runs{0};
  std::optional<std::string> why;
};

// What the tasks are does not matter here.
const CheckTask& AnyTask() {
  static const CheckTask task;
  return task;
}

// Starts fail with each of `failures` in turn, then a StartedRunner comes.
struct Starts {
  std::vector<absl::Status> failures;
  std::atomic<int> calls{0};
  StartedRunner* made = nullptr;
  RetryStartRunner::StartFn Fn() {
    return [this]() -> absl::StatusOr<std::unique_ptr<Runner>> {
      const size_t i = static_cast<size_t>(calls++);
      if (i < failures.size()) return failures[i];
      auto r = std::make_unique<StartedRunner>();
      made = r.get();
      return r;
    };
  }
};

TEST(RetryStartRunnerTest, AStartThatFailsIsTriedAgainAfterTheBackoffAndThenIsThatRunner) {
  Starts starts{{absl::ResourceExhaustedError("cuCtxCreate: CUDA_ERROR_OUT_OF_MEMORY")}};
  double now = 1000;
  RetryStartRunner runner(starts.Fn(), [&] { return now; });
  EXPECT_FALSE(runner.started());

  absl::StatusOr<DeviceFingerprint> d = runner.Device();
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(d.status().message(), HasSubstr("CUDA_ERROR_OUT_OF_MEMORY; tried again in 60 s"));
  EXPECT_TRUE(runner.retrying());
  EXPECT_EQ(runner.next_try(), 1060);
  now = 1030;
  EXPECT_THAT(runner.Unavailable().value_or(""), HasSubstr("OUT_OF_MEMORY; tried again in 30 s"));
  // Within the backoff nothing is started: not by Device, Run or the ceilings.
  EXPECT_FALSE(runner.Device().ok());
  EXPECT_EQ(runner.Run(AnyTask(), nullptr).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(runner.MeasureCeilings(nullptr).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(starts.calls.load(), 1);

  now = 1060;
  EXPECT_THAT(runner.Unavailable().value_or(""), HasSubstr("trying again"));
  d = runner.Device();
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->name, "Started GPU");
  EXPECT_EQ(starts.calls.load(), 2);
  EXPECT_TRUE(runner.started());
  EXPECT_FALSE(runner.retrying());
  // Now it is that runner: its tasks, its ceilings, its availability.
  EXPECT_TRUE(runner.Run(AnyTask(), nullptr).ok());
  EXPECT_EQ(starts.made->runs.load(), 1);
  EXPECT_TRUE(runner.MeasureCeilings(nullptr).ok());
  EXPECT_EQ(runner.Unavailable(), std::nullopt);
  starts.made->why = "GPU 0 busy";
  EXPECT_EQ(runner.Unavailable(), "GPU 0 busy");
  EXPECT_TRUE(runner.Device().ok());
  EXPECT_EQ(starts.calls.load(), 2);
}

// A start given up because the server is stopping is not a failed GPU: it
// is answered as Cancelled and begins no backoff.
TEST(RetryStartRunnerTest, ACancelledStartIsNotAFailureAndBeginsNoBackoff) {
  Starts starts{{absl::CancelledError("tuning worker: start cancelled, the server is stopping")}};
  double now = 1000;
  RetryStartRunner runner(starts.Fn(), [&] { return now; });
  absl::StatusOr<DeviceFingerprint> d = runner.Device();
  EXPECT_EQ(d.status().code(), absl::StatusCode::kCancelled) << d.status();
  EXPECT_TRUE(runner.retrying());
  EXPECT_EQ(runner.next_try(), 0);  // No backoff: the next Device() may start at once.
  EXPECT_THAT(runner.Unavailable().value_or(""), HasSubstr("no tuning worker started yet"));
  EXPECT_TRUE(runner.Device().ok());
  EXPECT_EQ(starts.calls.load(), 2);
}

TEST(RetryStartRunnerTest, TheBackoffDoublesWhileStartsKeepFailing) {
  Starts starts{{absl::InternalError("cuInit: CUDA_ERROR_DEVICE_UNAVAILABLE"),
                 absl::InternalError("cuInit: CUDA_ERROR_DEVICE_UNAVAILABLE"),
                 absl::UnavailableError("tuning worker did not answer in time")}};
  double now = 0;
  RetryStartRunner runner(starts.Fn(), [&] { return now; });
  EXPECT_FALSE(runner.Device().ok());
  EXPECT_EQ(runner.next_try(), 60);
  now = 60;
  EXPECT_FALSE(runner.Device().ok());
  EXPECT_EQ(runner.next_try(), 180);
  now = 180;
  absl::StatusOr<DeviceFingerprint> d = runner.Device();
  EXPECT_THAT(d.status().message(), HasSubstr("did not answer in time; tried again in 240 s"));
  now = 420;
  EXPECT_TRUE(runner.Device().ok());
  EXPECT_EQ(starts.calls.load(), 4);
}

TEST(RetryStartRunnerTest, AFailureTryingCannotHelpEndsTheRetries) {
  for (const absl::Status& failure :
       {absl::NotFoundError("kfuse-worker: no such file"),
        absl::FailedPreconditionError("kfuse-worker speaks protocol 3, this server 4"),
        absl::InvalidArgumentError("devices: GPU 9 out of range")}) {
    Starts starts{{failure}};
    double now = 0;
    RetryStartRunner runner(starts.Fn(), [&] { return now; });
    absl::StatusOr<DeviceFingerprint> d = runner.Device();
    EXPECT_EQ(d.status().code(), failure.code());
    EXPECT_THAT(d.status().message(), HasSubstr(std::string(failure.message())));
    EXPECT_THAT(d.status().message(), Not(HasSubstr("tried again")));
    EXPECT_FALSE(runner.retrying());
    now = 1e6;
    EXPECT_FALSE(runner.Device().ok());
    EXPECT_EQ(starts.calls.load(), 1) << failure;
    // Tasks are Unavailable, as a GPU gone is, whatever the start's code.
    EXPECT_EQ(runner.Run(AnyTask(), nullptr).status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(runner.Unavailable().value_or(""), HasSubstr(std::string(failure.message())));
  }
}

TEST(RetryStartRunnerTest, NothingIsStartedBeforeItsDeviceIsAskedFor) {
  Starts starts;
  RetryStartRunner runner(starts.Fn());
  EXPECT_EQ(runner.Run(AnyTask(), nullptr).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(runner.Unavailable().value_or(""), HasSubstr("started yet"));
  EXPECT_EQ(starts.calls.load(), 0);
}

TEST(RetryStartRunnerTest, CallersAskingAtOnceShareOneStartAndItsStateIsReadWithoutWaitingOnIt) {
  std::atomic<int> calls{0};
  std::atomic<bool> release{false};
  RetryStartRunner runner([&]() -> absl::StatusOr<std::unique_ptr<Runner>> {
    ++calls;
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // A worker starting.
    return std::make_unique<StartedRunner>();
  });
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      if (runner.Device().ok()) ++ok;
    });
  }
  while (calls.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Tuning health polls these beside the start: they must not wait for it
  // (if they did, this test would hang here).
  EXPECT_THAT(runner.Unavailable().value_or(""), HasSubstr("started yet"));
  EXPECT_FALSE(runner.started());
  EXPECT_EQ(runner.Run(AnyTask(), nullptr).status().code(), absl::StatusCode::kUnavailable);
  release = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 4);
  EXPECT_EQ(calls.load(), 1);
}

}  // namespace
}  // namespace kfuse
