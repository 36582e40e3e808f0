#include "tuner/runner_pool.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tuner/worker_process.h"

namespace kfuse {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30;

CompiledKernel Kernel(const std::string& entry) {
  CompiledKernel k;
  k.spec.entry = entry;
  k.spec.params = {KernelParam::Buffer({BufferRef::Kind::kInput, 0}),
                   KernelParam::Buffer({BufferRef::Kind::kOutput, 0})};
  k.spec.grid.x = SizeExpr::Const(4);
  k.spec.block.x = SizeExpr::Const(256);
  k.cubin = "cubin";
  return k;
}

// A valid task; `seed` names it in the fakes' logs.
CheckTask Task(uint64_t seed) {
  CheckTask t;
  t.candidates = {Kernel("a")};
  t.reference64 = Kernel("r");
  t.eager = Kernel("e");
  t.inputs = {{DType::kF32, 1024}};
  t.outputs = {{DType::kF32, 1024}};
  t.seed = seed;
  return t;
}

DeviceFingerprint H200() {
  DeviceFingerprint fp;
  fp.name = "NVIDIA H200";
  fp.cc_major = 9;
  fp.sm_count = 132;
  fp.memory_bytes = 141 * kGiB;
  fp.power_limit_mw = 700000;
  return fp;
}

DeviceFingerprint A100() {
  DeviceFingerprint fp;
  fp.name = "NVIDIA A100";
  fp.cc_major = 8;
  fp.sm_count = 108;
  fp.memory_bytes = 80 * kGiB;
  fp.power_limit_mw = 400000;
  return fp;
}

// Lets blocked Runs through one at a time.
class Gate {
 public:
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return permits_ > 0; });
    --permits_;
  }
  void Let(int n = 1) {
    std::lock_guard<std::mutex> lock(mu_);
    permits_ += n;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int permits_ = 0;
};

// Shared by the fakes of one test: who ran which task, and when.
struct Log {
  std::mutex mu;
  std::vector<std::pair<int, uint64_t>> started;  // (device, task seed)
  std::vector<double> at;                         // The clock when each started.
  std::atomic<int> running{0};
  std::atomic<int> max_running{0};
};

class FakeRunner : public Runner {
 public:
  FakeRunner(int device, DeviceFingerprint fp, Log* log)
      : device_(device), fp_(std::move(fp)), log_(log) {}

  absl::StatusOr<std::vector<Trial>> Run(const CheckTask& task,
                                         const std::function<void(const Trial&)>&) override {
    {
      std::lock_guard<std::mutex> lock(log_->mu);
      log_->started.emplace_back(device_, task.seed);
      log_->at.push_back(clock_ ? clock_() : 0);
    }
    int now = ++log_->running;
    int seen = log_->max_running.load();
    while (now > seen && !log_->max_running.compare_exchange_weak(seen, now)) {
    }
    if (gate_ != nullptr) gate_->Pass();
    --log_->running;
    if (!run_status_.ok()) return run_status_;
    return std::vector<Trial>(task.candidates.size());
  }
  absl::StatusOr<DeviceFingerprint> Device() override {
    if (device_calls_ != nullptr) ++*device_calls_;
    if (!device_status_.ok()) return device_status_;
    return fp_;
  }
  absl::StatusOr<Ceilings> MeasureCeilings(const std::atomic<bool>* /*cancel*/) override {
    Ceilings c;
    c.source = absl::StrCat("fake GPU ", device_);
    return c;
  }

  Gate* gate_ = nullptr;
  absl::Status run_status_;
  absl::Status device_status_;
  std::atomic<int>* device_calls_ = nullptr;  // Counts Device() calls when set.
  std::function<double()> clock_;

 private:
  int device_;
  DeviceFingerprint fp_;
  Log* log_;
};

class FakeProbe : public GpuLoadProbe {
 public:
  explicit FakeProbe(std::function<absl::StatusOr<GpuLoad>()> load) : load_(std::move(load)) {}
  absl::StatusOr<GpuLoad> Sample() override {
    ++samples;
    return load_();
  }
  std::atomic<int> samples{0};

 private:
  std::function<absl::StatusOr<GpuLoad>()> load_;
};

GpuLoad Load(double busy, int64_t free_bytes = 100 * kGiB) {
  return {busy, free_bytes, 141 * kGiB};
}

// Time passes only when the pool sleeps, so waits are exact and instant.
struct FakeClock {
  double t = 0;
  RunnerPoolOptions Options(IdlePolicy policy) {
    RunnerPoolOptions o;
    o.idle = policy;
    o.now = [this] { return t; };
    o.sleep = [this](double s) { t += s; };
    return o;
  }
};

struct Built {
  std::unique_ptr<RunnerPool> pool;
  std::vector<FakeRunner*> runners;
  std::vector<ExcludedMember> excluded;
};

// One member per fingerprint; probes[i] may be null (no probe).
Built Build(Log* log, std::vector<DeviceFingerprint> fps,
            std::vector<std::unique_ptr<GpuLoadProbe>> probes, RunnerPoolOptions options,
            FakeClock* clock = nullptr) {
  Built b;
  std::vector<PoolMember> members;
  for (size_t i = 0; i < fps.size(); ++i) {
    auto r = std::make_unique<FakeRunner>(static_cast<int>(i), fps[i], log);
    if (clock != nullptr) r->clock_ = [clock] { return clock->t; };
    b.runners.push_back(r.get());
    PoolMember m;
    m.runner = std::move(r);
    if (i < probes.size()) m.probe = std::move(probes[i]);
    m.device = static_cast<int>(i);
    members.push_back(std::move(m));
  }
  absl::StatusOr<std::unique_ptr<RunnerPool>> pool =
      RunnerPool::Create(std::move(members), std::move(options), &b.excluded);
  EXPECT_TRUE(pool.ok()) << pool.status();
  if (pool.ok()) b.pool = std::move(*pool);
  return b;
}

template <typename F>
bool WaitUntil(F done) {
  for (int i = 0; i < 5000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

TEST(RunnerPoolTest, TwoRunsOccupyTwoMembersAndAThirdWaits) {
  Log log;
  Gate gate;
  Built b = Build(&log, {H200(), H200()}, {}, {});
  for (FakeRunner* r : b.runners) r->gate_ = &gate;
  std::vector<std::thread> runs;
  std::atomic<int> ok{0};
  for (uint64_t seed : {1, 2}) {
    runs.emplace_back([&, seed] { ok += b.pool->Run(Task(seed), {}).ok(); });
  }
  ASSERT_TRUE(WaitUntil([&] { return log.running == 2; }));
  std::vector<MemberStats> stats = b.pool->stats();
  EXPECT_TRUE(stats[0].running);
  EXPECT_TRUE(stats[1].running);

  runs.emplace_back([&] { ok += b.pool->Run(Task(3), {}).ok(); });
  ASSERT_TRUE(WaitUntil([&] { return b.pool->waiting() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  {
    std::lock_guard<std::mutex> lock(log.mu);
    EXPECT_EQ(log.started.size(), 2u);  // The third has no member yet.
  }
  gate.Let(1);  // One of the first two finishes; the third takes its member.
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(log.mu);
    return log.started.size() == 3;
  }));
  gate.Let(2);
  for (std::thread& t : runs) t.join();
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(log.max_running, 2);
  stats = b.pool->stats();
  EXPECT_EQ(stats[0].tasks + stats[1].tasks, 3);
  EXPECT_GE(stats[0].tasks, 1);
  EXPECT_GE(stats[1].tasks, 1);
  EXPECT_EQ(b.pool->waiting(), 0);
}

TEST(RunnerPoolTest, WaitersAreServedInArrivalOrder) {
  Log log;
  Gate gate;
  Built b = Build(&log, {H200()}, {}, {});
  b.runners[0]->gate_ = &gate;
  std::vector<std::thread> runs;
  runs.emplace_back([&] { EXPECT_TRUE(b.pool->Run(Task(1), {}).ok()); });
  ASSERT_TRUE(WaitUntil([&] { return log.running == 1; }));
  for (uint64_t seed : {2, 3, 4}) {
    runs.emplace_back([&, seed] { EXPECT_TRUE(b.pool->Run(Task(seed), {}).ok()); });
    const int queued = static_cast<int>(seed) - 1;
    ASSERT_TRUE(WaitUntil([&] { return b.pool->waiting() == queued; }));
  }
  gate.Let(4);
  for (std::thread& t : runs) t.join();
  std::vector<uint64_t> order;
  for (const auto& [device, seed] : log.started) order.push_back(seed);
  EXPECT_THAT(order, ElementsAre(1, 2, 3, 4));
}

TEST(RunnerPoolTest, SequentialRunsTakeTurnsOnTheMembers) {
  Log log;
  Built b = Build(&log, {H200(), H200(), H200()}, {}, {});
  for (uint64_t seed = 1; seed <= 6; ++seed) ASSERT_TRUE(b.pool->Run(Task(seed), {}).ok());
  std::vector<int> devices;
  for (const auto& [device, seed] : log.started) devices.push_back(device);
  EXPECT_THAT(devices, ElementsAre(0, 1, 2, 0, 1, 2));
}

TEST(RunnerPoolTest, ConcurrentRunsWithAnIdlePolicyUseEveryIdleMember) {
  Log log;
  Gate gate;
  IdlePolicy policy;
  policy.settle_seconds = 0;
  policy.poll_seconds = 0.001;
  std::vector<std::unique_ptr<GpuLoadProbe>> probes;
  for (int i = 0; i < 2; ++i)
    probes.push_back(std::make_unique<FakeProbe>([] { return Load(0.0); }));
  RunnerPoolOptions o;
  o.idle = policy;
  Built b = Build(&log, {H200(), H200()}, std::move(probes), o);
  for (FakeRunner* r : b.runners) r->gate_ = &gate;
  std::vector<std::thread> runs;
  for (uint64_t seed : {1, 2})
    runs.emplace_back([&, seed] { EXPECT_TRUE(b.pool->Run(Task(seed), {}).ok()); });
  ASSERT_TRUE(WaitUntil([&] { return log.running == 2; }));
  gate.Let(2);
  for (std::thread& t : runs) t.join();
}

TEST(RunnerPoolTest, BusyMemberIsNotUsedUntilIdleForTheSettleTime) {
  Log log;
  FakeClock clock;
  IdlePolicy policy;  // 0.2 busy, 0.25 s polls, 1 s settle.
  std::vector<std::unique_ptr<GpuLoadProbe>> probes;
  probes.push_back(std::make_unique<FakeProbe>([&] { return Load(clock.t < 3 ? 0.9 : 0.1); }));
  Built b = Build(&log, {H200()}, std::move(probes), clock.Options(policy), &clock);
  ASSERT_TRUE(b.pool->Run(Task(1), {}).ok());
  // Idle from the sample at 3.0; settled at 4.0.
  ASSERT_EQ(log.at.size(), 1u);
  EXPECT_DOUBLE_EQ(log.at[0], 4.0);
  MemberStats s = b.pool->stats()[0];
  EXPECT_EQ(s.tasks, 1);
  EXPECT_DOUBLE_EQ(s.idle_wait_seconds, 3.75);  // Samples 0 .. 3.75 held it back.
  ASSERT_TRUE(s.last_load.has_value());
  EXPECT_DOUBLE_EQ(s.last_load->others_busy_fraction, 0.1);
}

TEST(RunnerPoolTest, ABusySampleRestartsTheSettleTime) {
  Log log;
  FakeClock clock;
  IdlePolicy policy;
  std::vector<std::unique_ptr<GpuLoadProbe>> probes;
  probes.push_back(std::make_unique<FakeProbe>([&] { return Load(clock.t == 0.5 ? 0.5 : 0.0); }));
  Built b = Build(&log, {H200()}, std::move(probes), clock.Options(policy), &clock);
  ASSERT_TRUE(b.pool->Run(Task(1), {}).ok());
  ASSERT_EQ(log.at.size(), 1u);
  EXPECT_DOUBLE_EQ(log.at[0], 1.75);  // Idle again from 0.75.
}

TEST(RunnerPoolTest, AGapInTheSamplesRestartsTheSettleTime) {
  Log log;
  FakeClock clock;
  IdlePolicy policy;
  std::vector<std::unique_ptr<GpuLoadProbe>> probes;
  for (int i = 0; i < 2; ++i)
    probes.push_back(std::make_unique<FakeProbe>([] { return Load(0.0); }));
  Built b = Build(&log, {H200(), H200()}, std::move(probes), clock.Options(policy), &clock);
  b.runners[0]->clock_ = [&] { return clock.t += 99; };  // Nobody watches GPU 1 meanwhile.
  ASSERT_TRUE(b.pool->Run(Task(1), {}).ok());            // GPU 0, from 1.0 to 100.0.
  ASSERT_TRUE(b.pool->Run(Task(2), {}).ok());
  ASSERT_EQ(log.started.size(), 2u);
  EXPECT_EQ(log.started[1].first, 1);
  EXPECT_DOUBLE_EQ(log.at[1], 101.0);  // Watched again from 100.0, not since 0.
}

TEST(RunnerPoolTest, EachTaskWaitsForTheSettleTimeAfresh) {
  Log log;
  FakeClock clock;
  std::vector<std::unique_ptr<GpuLoadProbe>> probes;
  probes.push_back(std::make_unique<FakeProbe>([] { return Load(0.0); }));
  Built b = Build(&log, {H200()}, std::move(probes), clock.Options(IdlePolicy{}), &clock);
  ASSERT_TRUE(b.pool->Run(Task(1), {}).ok());
  ASSERT_TRUE(b.pool->Run(Task(2), {}).ok());  // Back to back: our own task is no idle time.
  EXPECT_THAT(log.at, ElementsAre(1.0, 2.0));
}

TEST(RunnerPoolTest, AnIdleMemberIsUsedWhileAnotherIsBusy) {
  Log log;
  FakeClock clock;
  IdlePolicy policy;
  policy.settle_seconds = 0.5;
  std::vector<std::unique_ptr<GpuLoadProbe>> probes;
  probes.push_back(std::make_unique<FakeProbe>([] { return Load(0.95); }));
  probes.push_back(std::make_unique<FakeProbe>([] { return Load(0.05); }));
  Built b = Build(&log, {H200(), H200()}, std::move(probes), clock.Options(policy), &clock);
  ASSERT_TRUE(b.pool->Run(Task(1), {}).ok());
  ASSERT_EQ(log.started.size(), 1u);
  EXPECT_EQ(log.started[0].first, 1);
  EXPECT_DOUBLE_EQ(log.at[0], 0.5);
  std::vector<MemberStats> s = b.pool->stats();
  EXPECT_EQ(s[0].tasks, 0);
  EXPECT_EQ(s[1].tasks, 1);
  EXPECT_DOUBLE_EQ(s[0].idle_wait_seconds, 0.25);
}

TEST(RunnerPoolTest, MemberWithoutAProbeIsNeverHeldBack) {
  Log log;
  FakeClock clock;
  std::vector<std::unique_ptr<GpuLoadProbe>> probes;
  probes.push_back(std::make_unique<FakeProbe>([] { return Load(1.0); }));
  probes.push_back(nullptr);
  Built b = Build(&log, {H200(), H200()}, std::move(probes), clock.Options(IdlePolicy{}), &clock);
  ASSERT_TRUE(b.pool->Run(Task(1), {}).ok());
  EXPECT_EQ(log.started[0].first, 1);
  EXPECT_DOUBLE_EQ(clock.t, 0);
}

TEST(RunnerPoolTest, MemoryBudgetHoldsTuningBackUntilEnoughIsFree) {
  Log log;
  FakeClock clock;
  IdlePolicy policy;
  policy.min_free_bytes = 8 * kGiB;
  policy.settle_seconds = 0;
  std::vector<std::unique_ptr<GpuLoadProbe>> probes;
  probes.push_back(
      std::make_unique<FakeProbe>([&] { return Load(0.0, clock.t < 2 ? 4 * kGiB : 8 * kGiB); }));
  Built b = Build(&log, {H200()}, std::move(probes), clock.Options(policy), &clock);
  ASSERT_TRUE(b.pool->Run(Task(1), {}).ok());
  ASSERT_EQ(log.at.size(), 1u);
  EXPECT_DOUBLE_EQ(log.at[0], 2.0);  // Exactly the budget free is enough.
}

TEST(RunnerPoolTest, PastMaxWaitTheRunIsDeferredWithUnavailable) {
  Log log;
  FakeClock clock;
  IdlePolicy policy;
  policy.max_wait_seconds = 2;
  bool busy = true;
  std::vector<std::unique_ptr<GpuLoadProbe>> probes;
  probes.push_back(std::make_unique<FakeProbe>([&] { return Load(busy ? 0.9 : 0.0); }));
  Built b = Build(&log, {H200()}, std::move(probes), clock.Options(policy), &clock);
  absl::StatusOr<std::vector<Trial>> r = b.pool->Run(Task(1), {});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("GPU 0 busy for 2.0 s"));
  EXPECT_THAT(r.status().message(), HasSubstr("others 90% busy"));
  EXPECT_THAT(r.status().message(), HasSubstr("tuning deferred"));
  EXPECT_TRUE(log.started.empty());
  EXPECT_EQ(b.pool->deferred(), 1);
  EXPECT_EQ(b.pool->waiting(), 0);
  MemberStats s = b.pool->stats()[0];
  EXPECT_TRUE(s.in_rotation);  // Busy is not gone.
  EXPECT_DOUBLE_EQ(s.idle_wait_seconds, 2.0);

  busy = false;  // The queue is not stuck behind the deferred run.
  EXPECT_TRUE(b.pool->Run(Task(2), {}).ok());
  EXPECT_EQ(log.started.size(), 1u);
}

TEST(RunnerPoolTest, ProbeFailureHoldsTuningBackAndIsReported) {
  Log log;
  FakeClock clock;
  IdlePolicy policy;
  policy.max_wait_seconds = 1;
  std::vector<std::unique_ptr<GpuLoadProbe>> probes;
  probes.push_back(std::make_unique<FakeProbe>(
      []() -> absl::StatusOr<GpuLoad> { return absl::UnavailableError("NVML: GPU is lost"); }));
  Built b = Build(&log, {H200()}, std::move(probes), clock.Options(policy), &clock);
  absl::StatusOr<std::vector<Trial>> r = b.pool->Run(Task(1), {});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("load unknown: NVML: GPU is lost"));
  EXPECT_TRUE(log.started.empty());
}

TEST(RunnerPoolTest, MaxWaitZeroDefersAtOnceOnABusyGpu) {
  Log log;
  FakeClock clock;
  IdlePolicy policy;
  policy.max_wait_seconds = 0;
  std::vector<std::unique_ptr<GpuLoadProbe>> probes;
  probes.push_back(std::make_unique<FakeProbe>([] { return Load(0.5); }));
  Built b = Build(&log, {H200()}, std::move(probes), clock.Options(policy), &clock);
  EXPECT_EQ(b.pool->Run(Task(1), {}).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_DOUBLE_EQ(clock.t, 0);
}

TEST(RunnerPoolTest, MismatchedFingerprintsAreExcludedWithAReason) {
  Log log;
  DeviceFingerprint lower_power = H200();
  lower_power.power_limit_mw = 600000;
  Built b = Build(&log, {H200(), A100(), H200(), lower_power}, {}, {});
  std::vector<MemberStats> s = b.pool->stats();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].device, 0);
  EXPECT_EQ(s[1].device, 2);
  ASSERT_EQ(b.excluded.size(), 2u);
  EXPECT_EQ(b.excluded[0].member.device, 1);
  EXPECT_NE(b.excluded[0].member.runner, nullptr);  // Handed back.
  EXPECT_THAT(b.excluded[0].reason,
              HasSubstr("GPU 1 (NVIDIA A100) differs from GPU 0 (NVIDIA H200) in name"));
  EXPECT_THAT(b.excluded[0].reason, HasSubstr("not used for tuning"));
  EXPECT_THAT(b.excluded[1].reason, HasSubstr("GPU 3 (NVIDIA H200) differs"));
  EXPECT_THAT(b.excluded[1].reason, HasSubstr("power limit 600000 vs 700000 mW"));
  absl::StatusOr<DeviceFingerprint> fp = b.pool->Device();
  ASSERT_TRUE(fp.ok());
  EXPECT_EQ(fp->Digest(), H200().Digest());
}

// GPU 0 an H200; GPU 1 (`late_fp`) a GPU whose worker did not start when
// the pool was made; the pool's clock is `clock`.
struct LatePool {
  explicit LatePool(DeviceFingerprint late_fp) {
    std::vector<PoolMember> members;
    members.push_back({std::make_unique<FakeRunner>(0, H200(), &log), nullptr, 0});
    auto runner = std::make_unique<FakeRunner>(1, std::move(late_fp), &log);
    late = runner.get();
    late->device_status_ = absl::UnavailableError("worker did not start");
    late->device_calls_ = &device_calls;
    members.push_back({std::move(runner), nullptr, 1});
    RunnerPoolOptions o;
    o.now = [this] { return clock.t; };
    absl::StatusOr<std::unique_ptr<RunnerPool>> made = RunnerPool::Create(std::move(members), o, &excluded);
    EXPECT_TRUE(made.ok()) << made.status();
    if (made.ok()) pool = std::move(*made);
  }
  Log log;
  FakeClock clock;
  std::atomic<int> device_calls{0};
  FakeRunner* late = nullptr;
  std::vector<ExcludedMember> excluded;
  std::unique_ptr<RunnerPool> pool;
};

// A GPU whose worker did not start when the pool was made waits out of the
// rotation; once its backoff passed, a task's wait starts its worker in the
// background (the task runs elsewhere, never waiting on that start), and it
// joins once it reports the pool's model.
TEST(RunnerPoolTest, AMemberThatCannotReportItsDeviceJoinsWhenItCan) {
  LatePool p(H200());
  ASSERT_NE(p.pool, nullptr);
  RunnerPool& pool = *p.pool;
  FakeClock& clock = p.clock;
  Log& log = p.log;
  std::atomic<int>& device_calls = p.device_calls;
  FakeRunner* late_runner = p.late;
  EXPECT_TRUE(p.excluded.empty());
  ASSERT_EQ(pool.stats().size(), 2u);
  EXPECT_FALSE(pool.stats()[1].joined);
  EXPECT_FALSE(pool.stats()[1].in_rotation);
  EXPECT_EQ(pool.stats()[1].removed_reason, "worker did not start");
  EXPECT_EQ(pool.Unavailable(), std::nullopt);
  auto started = [&] { return !pool.stats()[1].starting; };

  ASSERT_TRUE(pool.Run(Task(1), {}).ok());
  EXPECT_EQ(device_calls.load(), 1);  // Create's.
  clock.t = 60;  // Due back, still down: asked in the background; out for 120 s.
  ASSERT_TRUE(pool.Run(Task(2), {}).ok());
  ASSERT_TRUE(WaitUntil(started));
  EXPECT_EQ(device_calls.load(), 2);
  EXPECT_FALSE(pool.stats()[1].in_rotation);
  clock.t = 179;
  late_runner->device_status_ = absl::OkStatus();
  ASSERT_TRUE(pool.Run(Task(3), {}).ok());  // Not asked yet.
  EXPECT_EQ(device_calls.load(), 2);
  clock.t = 180;
  ASSERT_TRUE(pool.Run(Task(4), {}).ok());
  ASSERT_TRUE(WaitUntil([&] { return pool.stats()[1].joined; }));
  EXPECT_TRUE(pool.stats()[1].in_rotation);
  ASSERT_TRUE(pool.Run(Task(5), {}).ok());  // GPU 1 was released least recently.
  EXPECT_THAT(log.started, ElementsAre(std::pair{0, uint64_t{1}}, std::pair{0, uint64_t{2}},
                                       std::pair{0, uint64_t{3}}, std::pair{0, uint64_t{4}},
                                       std::pair{1, uint64_t{5}}));
  EXPECT_EQ(pool.stats()[1].tasks, 1);
}

TEST(RunnerPoolTest, AMemberThatTurnsOutToBeAnotherModelLeavesForGood) {
  LatePool p(A100());
  ASSERT_NE(p.pool, nullptr);
  RunnerPool& pool = *p.pool;
  FakeClock& clock = p.clock;
  Log& log = p.log;
  FakeRunner* late_runner = p.late;
  late_runner->device_status_ = absl::OkStatus();
  clock.t = 60;
  ASSERT_TRUE(pool.Run(Task(1), {}).ok());
  ASSERT_TRUE(WaitUntil([&] { return !pool.stats()[1].starting; }));
  EXPECT_FALSE(pool.stats()[1].joined);
  EXPECT_FALSE(pool.stats()[1].in_rotation);
  EXPECT_THAT(pool.stats()[1].removed_reason,
              HasSubstr("its GPU (NVIDIA A100) differs from the pool's (NVIDIA H200) in name"));
  // Never asked again.
  clock.t = 1e6;
  ASSERT_TRUE(pool.Run(Task(2), {}).ok());
  EXPECT_FALSE(pool.stats()[1].starting);
  EXPECT_THAT(log.started, ElementsAre(std::pair{0, uint64_t{1}}, std::pair{0, uint64_t{2}}));
}

// No candidate reports a device: there is no model to hold the others to.
TEST(RunnerPoolTest, APoolOfMembersThatCannotReportADeviceIsUnavailable) {
  Log log;
  std::vector<PoolMember> none;
  auto alone = std::make_unique<FakeRunner>(0, H200(), &log);
  alone->device_status_ = absl::UnavailableError("no GPU");
  none.push_back({std::move(alone), nullptr, 0});
  EXPECT_EQ(RunnerPool::Create(std::move(none), {}, nullptr).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(RunnerPoolTest, CreateRejectsBadInputNamingTheField) {
  struct Case {
    const char* name;
    int members;
    bool null_runner, repeat_device;
    void (*mutate)(IdlePolicy&);
    const char* message;
  };
  const Case cases[] = {
      {"no members", 0, false, false, nullptr, "members: none given"},
      {"null runner", 2, true, false, nullptr, "members[1].runner is null"},
      {"repeated device", 2, false, true, nullptr, "members[1].device: GPU 0 given twice"},
      {"busy > 1", 1, false, false, [](IdlePolicy& p) { p.max_others_busy = 1.5; },
       "max_others_busy"},
      {"busy < 0", 1, false, false, [](IdlePolicy& p) { p.max_others_busy = -0.1; },
       "max_others_busy"},
      {"free < 0", 1, false, false, [](IdlePolicy& p) { p.min_free_bytes = -1; }, "min_free_bytes"},
      {"poll 0", 1, false, false, [](IdlePolicy& p) { p.poll_seconds = 0; }, "poll_seconds"},
      {"settle < 0", 1, false, false, [](IdlePolicy& p) { p.settle_seconds = -1; },
       "settle_seconds"},
      {"wait < 0", 1, false, false, [](IdlePolicy& p) { p.max_wait_seconds = -1; },
       "max_wait_seconds"},
  };
  for (const Case& c : cases) {
    Log log;
    std::vector<PoolMember> members;
    for (int i = 0; i < c.members; ++i) {
      PoolMember m;
      if (!(c.null_runner && i == 1)) m.runner = std::make_unique<FakeRunner>(i, H200(), &log);
      m.device = c.repeat_device ? 0 : i;
      members.push_back(std::move(m));
    }
    RunnerPoolOptions o;
    if (c.mutate != nullptr) {
      o.idle = IdlePolicy{};
      c.mutate(*o.idle);
    }
    absl::StatusOr<std::unique_ptr<RunnerPool>> pool =
        RunnerPool::Create(std::move(members), o, nullptr);
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(pool.status().message(), HasSubstr(c.message)) << c.name;
  }
}

TEST(RunnerPoolTest, UnavailableTakesTheMemberOutOfRotation) {
  Log log;
  Built b = Build(&log, {H200(), H200()}, {}, {});
  b.runners[0]->run_status_ = absl::UnavailableError("tuning worker died before the task");
  absl::StatusOr<std::vector<Trial>> r = b.pool->Run(Task(1), {});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("GPU 0 left the tuning pool: tuning worker died"));
  std::vector<MemberStats> s = b.pool->stats();
  EXPECT_FALSE(s[0].in_rotation);
  EXPECT_THAT(s[0].removed_reason, HasSubstr("worker died"));
  EXPECT_TRUE(s[1].in_rotation);

  for (uint64_t seed : {2, 3}) EXPECT_TRUE(b.pool->Run(Task(seed), {}).ok());
  s = b.pool->stats();
  EXPECT_EQ(s[0].tasks, 1);
  EXPECT_EQ(s[1].tasks, 2);

  b.runners[1]->run_status_ = absl::UnavailableError("GPU fell off the bus");
  EXPECT_EQ(b.pool->Run(Task(4), {}).status().code(), absl::StatusCode::kUnavailable);
  r = b.pool->Run(Task(5), {});
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("no GPU left for tuning"));
  EXPECT_THAT(r.status().message(), HasSubstr("GPU 1: GPU fell off the bus"));
  EXPECT_EQ(log.started.size(), 4u);
  EXPECT_EQ(b.pool->MeasureCeilings(nullptr).status().code(), absl::StatusCode::kUnavailable);
}

// Unavailable may be a worker that failed once (no answer to its hello in
// time, a crash at start): the member is tried again after a backoff that
// doubles while it keeps failing and starts afresh once it works.
TEST(RunnerPoolTest, AMemberOutOfRotationIsTriedAgainAfterABackoff) {
  Log log;
  FakeClock clock;
  RunnerPoolOptions o;
  o.now = [&] { return clock.t; };
  Built b = Build(&log, {H200()}, {}, o);
  FakeRunner& runner = *b.runners[0];
  // At each time, whether a Run reaches the member, and whether it works there.
  const struct {
    double t;
    bool tried;
    bool works;
  } steps[] = {
      {0, true, false},     // Out for 60 s.
      {59, false, false},   // Not yet.
      {60, true, false},    // Out for 120 s.
      {179, false, false},  // Not yet.
      {180, true, true},    // Back.
      {181, true, false},   // Out for 60 s: the backoff starts afresh.
      {240, false, false},  // Not yet.
      {241, true, true},    // Back.
  };
  size_t runs = 0;
  for (const auto& step : steps) {
    clock.t = step.t;
    runner.run_status_ = step.works ? absl::OkStatus() : absl::UnavailableError("no hello");
    absl::StatusOr<std::vector<Trial>> r = b.pool->Run(Task(1), {});
    runs += step.tried;
    EXPECT_EQ(log.started.size(), runs) << "t=" << step.t;
    EXPECT_EQ(r.ok(), step.works) << "t=" << step.t << ": " << r.status();
    EXPECT_EQ(b.pool->stats()[0].in_rotation, step.works) << "t=" << step.t;
    if (!step.tried) {
      EXPECT_THAT(r.status().message(), HasSubstr("no GPU left for tuning")) << "t=" << step.t;
      EXPECT_THAT(r.status().message(), HasSubstr("GPU 0: no hello; tried again in 1 s"));
    }
  }
}

// Tuning health reads this: unavailable only while no member is in the
// rotation or due back, by the pool's clock, whether or not a task came.
TEST(RunnerPoolTest, UnavailableUntilAMemberIsDueBack) {
  Log log;
  FakeClock clock;
  RunnerPoolOptions o;
  o.now = [&] { return clock.t; };
  Built b = Build(&log, {H200(), H200()}, {}, o);
  EXPECT_EQ(b.pool->Unavailable(), std::nullopt);
  b.runners[0]->run_status_ = absl::UnavailableError("GPU fell off the bus");
  EXPECT_FALSE(b.pool->Run(Task(1), {}).ok());  // GPU 0 out until t=60.
  EXPECT_EQ(b.pool->Unavailable(), std::nullopt);

  clock.t = 30;
  b.runners[1]->run_status_ = absl::UnavailableError("no hello");
  EXPECT_FALSE(b.pool->Run(Task(2), {}).ok());  // GPU 1 out until t=90.
  std::optional<std::string> why = b.pool->Unavailable();
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("no GPU left for tuning"));
  EXPECT_THAT(*why, HasSubstr("GPU 0: GPU fell off the bus; tried again in 30 s"));
  EXPECT_THAT(*why, HasSubstr("GPU 1: no hello; tried again in 60 s"));
  clock.t = 59.5;
  EXPECT_NE(b.pool->Unavailable(), std::nullopt);

  clock.t = 60;
  EXPECT_EQ(b.pool->Unavailable(), std::nullopt);
  EXPECT_FALSE(b.pool->stats()[0].in_rotation);  // Back only when a task comes.
  EXPECT_EQ(log.started.size(), 2u);
  b.runners[0]->run_status_ = absl::OkStatus();
  EXPECT_TRUE(b.pool->Run(Task(3), {}).ok());
  EXPECT_EQ(b.pool->Unavailable(), std::nullopt);
}

TEST(RunnerPoolTest, OtherErrorsLeaveTheMemberInRotation) {
  Log log;
  Built b = Build(&log, {H200()}, {}, {});
  b.runners[0]->run_status_ = absl::InternalError("reference kernel faulted");
  EXPECT_EQ(b.pool->Run(Task(1), {}).status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(b.pool->stats()[0].in_rotation);
  b.runners[0]->run_status_ = absl::OkStatus();
  EXPECT_TRUE(b.pool->Run(Task(2), {}).ok());
}

TEST(RunnerPoolTest, MalformedTaskIsRejectedWithoutAMember) {
  Log log;
  Built b = Build(&log, {H200()}, {}, {});
  CheckTask t = Task(1);
  t.candidates.clear();
  EXPECT_EQ(b.pool->Run(t, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(log.started.empty());
  EXPECT_EQ(b.pool->stats()[0].tasks, 0);
}

TEST(RunnerPoolTest, CeilingsComeFromTheFirstMember) {
  Log log;
  Built b = Build(&log, {H200(), H200()}, {}, {});
  absl::StatusOr<Ceilings> c = b.pool->MeasureCeilings(nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->source, "fake GPU 0");
  EXPECT_FALSE(b.pool->stats()[0].running);
}

// Every member is the same model, so a task on the first does not hold the
// ceilings back while another is free.
TEST(RunnerPoolTest, CeilingsComeFromAFreeMemberWhileTheFirstRunsATask) {
  Log log;
  Gate gate;
  Built b = Build(&log, {H200(), H200()}, {}, {});
  b.runners[0]->gate_ = &gate;
  std::thread run([&] { EXPECT_TRUE(b.pool->Run(Task(1), {}).ok()); });
  ASSERT_TRUE(WaitUntil([&] { return log.running == 1; }));
  ASSERT_TRUE(b.pool->stats()[0].running);
  std::atomic<bool> returned{false};
  absl::StatusOr<Ceilings> c;
  std::thread measure([&] {
    c = b.pool->MeasureCeilings(nullptr);
    returned = true;
  });
  EXPECT_TRUE(WaitUntil([&] { return returned.load(); }));  // Not waiting for member 0's task.
  gate.Let();
  measure.join();
  run.join();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->source, "fake GPU 1");
  EXPECT_FALSE(b.pool->stats()[1].running);
}

// Ceilings wait for their member's task; a cancel (kfused stopping) ends
// that wait, and the member is left to its task.
TEST(RunnerPoolTest, ACancelledCeilingsMeasurementStopsWaitingForItsMember) {
  Log log;
  Gate gate;
  Built b = Build(&log, {H200()}, {}, {});
  b.runners[0]->gate_ = &gate;
  std::thread run([&] { EXPECT_TRUE(b.pool->Run(Task(1), {}).ok()); });
  ASSERT_TRUE(WaitUntil([&] { return log.running == 1; }));
  std::atomic<bool> cancel{false};
  std::atomic<bool> returned{false};
  absl::Status measured;
  std::thread measure([&] {
    measured = b.pool->MeasureCeilings(&cancel).status();
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(returned.load());  // Waiting for the member.
  cancel = true;
  EXPECT_TRUE(WaitUntil([&] { return returned.load(); }));
  if (!returned.load()) gate.Let();  // Failed: let it end rather than hang.
  measure.join();
  EXPECT_EQ(measured.code(), absl::StatusCode::kCancelled) << measured;
  EXPECT_TRUE(b.pool->stats()[0].running);  // Still its task's.
  gate.Let();
  run.join();
  EXPECT_FALSE(b.pool->stats()[0].running);
}

TEST(RunnerPoolTest, BusySecondsAreCounted) {
  Log log;
  FakeClock clock;
  Built b = Build(&log, {H200()}, {}, clock.Options(IdlePolicy{}), &clock);
  b.runners[0]->clock_ = [&] { return clock.t += 2.5; };  // The task takes 2.5 s.
  ASSERT_TRUE(b.pool->Run(Task(2), {}).ok());
  EXPECT_DOUBLE_EQ(b.pool->stats()[0].busy_seconds, 2.5);
}

TEST(RunnerPoolTest, ParseDeviceList) {
  EXPECT_THAT(*ParseDeviceList("all", 3), ElementsAre(0, 1, 2));
  EXPECT_THAT(*ParseDeviceList("0,1", 2), ElementsAre(0, 1));
  EXPECT_THAT(*ParseDeviceList(" 2, 0 ", 4), ElementsAre(2, 0));
  struct Case {
    const char* flag;
    int count;
    const char* message;
  };
  const Case cases[] = {
      {"", 2, "devices: empty"},        {"all", 0, "no GPU is visible"},
      {"0,x", 2, "\"x\" is not a GPU"}, {"0,,1", 2, "\"\" is not a GPU"},
      {"-1", 2, "\"-1\" is not a GPU"}, {"2", 2, "GPU 2 out of range: 2 visible"},
      {"1,1", 2, "GPU 1 listed twice"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<int>> d = ParseDeviceList(c.flag, c.count);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << c.flag;
    EXPECT_THAT(d.status().message(), HasSubstr(c.message)) << c.flag;
  }
}

// Every worker failing the same way that trying again cannot help (no
// binary) gives that code, so the node does not retry the start for ever.
TEST(CreateWorkerPoolTest, NoWorkerBinaryOnAnyGpuIsNotFoundNamingEach) {
  WorkerPoolOptions o;
  o.devices = {0, 1};
  o.worker.worker_path = "/nonexistent/kfuse-worker";
  absl::StatusOr<WorkerPool> wp = CreateWorkerPool(o);
  ASSERT_FALSE(wp.ok());
  EXPECT_EQ(wp.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(wp.status().message(), ::testing::HasSubstr("GPU 0: tuning worker /nonexistent/kfuse-worker"));
  EXPECT_THAT(wp.status().message(), ::testing::HasSubstr("GPU 1: tuning worker /nonexistent/kfuse-worker"));
}

// The server stopping while a pool starts (WorkerOptions::stop raised as
// GPU 1's worker waits to answer) is not a failed GPU, even beside a GPU
// that did fail: no pool, Cancelled, so no backoff follows.
TEST(CreateWorkerPoolTest, AStartGivenUpForTheServersStopIsCancelled) {
  const std::string worker = DefaultWorkerPath();
  WorkerPoolOptions o;
  o.devices = {0, 1};
  o.worker.worker_path = worker.substr(0, worker.rfind('/') + 1) + "kfuse-fake-worker";
  std::atomic<bool> stop{false};
  o.worker.stop = &stop;
  const std::string mark = absl::StrCat(::testing::TempDir(), "kfuse_pool_hello_mark_", getpid());
  unlink(mark.c_str());
  ASSERT_EQ(setenv("KFUSE_FAKE_WORKER_MODE_0", "no_gpu", 1), 0);
  ASSERT_EQ(setenv("KFUSE_FAKE_WORKER_MODE_1", "slow_hello", 1), 0);
  ASSERT_EQ(setenv("KFUSE_FAKE_WORKER_MARK", mark.c_str(), 1), 0);
  std::thread raise([&stop, &mark] {  // Once GPU 1's worker waits to answer.
    for (int i = 0; i < 1000 && access(mark.c_str(), F_OK) != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stop = true;
  });
  absl::StatusOr<WorkerPool> wp = CreateWorkerPool(o);
  raise.join();
  unsetenv("KFUSE_FAKE_WORKER_MODE_0");
  unsetenv("KFUSE_FAKE_WORKER_MODE_1");
  unsetenv("KFUSE_FAKE_WORKER_MARK");
  unlink(mark.c_str());
  EXPECT_EQ(wp.status().code(), absl::StatusCode::kCancelled) << wp.status();
  EXPECT_THAT(wp.status().message(), ::testing::HasSubstr("the server is stopping"));
}

}  // namespace
}  // namespace kfuse
