#include "tuner/runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tuner/check.h"
#include "tuner/cuda/device.h"
#include "tuner/worker_buffers.h"
#include "tuner/worker_process.h"
#include "tuner/worker_protocol.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

CompiledKernel Fake(const std::string& entry) {
  CompiledKernel k;
  k.spec.entry = entry;
  k.spec.params = {KernelParam::Buffer({BufferRef::Kind::kInput, 0}),
                   KernelParam::Buffer({BufferRef::Kind::kOutput, 0}),
                   KernelParam::Scalar(SizeExpr::Symbol(0), DType::kI64)};
  k.spec.grid.x = SizeExpr::CeilDiv(SizeExpr::Symbol(0), SizeExpr::Const(256));
  k.spec.block.x = SizeExpr::Const(256);
  k.cubin = "cubin";
  return k;
}

CheckTask GoodTask() {
  CheckTask t;
  t.candidates = {Fake("a"), Fake("b")};
  t.reference64 = Fake("r");
  t.eager = Fake("e");
  t.symbol_values = {1000};
  t.inputs = {{DType::kF32, 1000}};
  t.outputs = {{DType::kBF16, 1000}};
  return t;
}

TEST(RunnerTest, ValidateTaskAcceptsAGoodTask) { EXPECT_TRUE(ValidateTask(GoodTask()).ok()); }

TEST(RunnerTest, ValidateTaskRejectsBadTasks) {
  struct Case {
    const char* name;
    void (*mutate)(CheckTask&);
    const char* message;
  };
  const Case cases[] = {
      {"no candidates", [](CheckTask& t) { t.candidates.clear(); }, "no candidates"},
      {"no outputs", [](CheckTask& t) { t.outputs.clear(); }, "no outputs"},
      {"zero elements", [](CheckTask& t) { t.inputs[0].elements = 0; }, "inputs[0]"},
      {"bad dtype", [](CheckTask& t) { t.outputs[0].dtype = DType::kInvalid; }, "outputs[0]"},
      {"slack < 1", [](CheckTask& t) { t.slack = 0.5; }, "slack"},
      {"watchdog", [](CheckTask& t) { t.watchdog_seconds = 0; }, "watchdog"},
      {"repeats", [](CheckTask& t) { t.timing.repeats = 0; }, "repeats"},
      {"too many repeats", [](CheckTask& t) { t.timing.repeats = 1 << 20; }, "repeats"},
      {"min repeats", [](CheckTask& t) { t.timing.min_repeats = 0; }, "min_repeats"},
      {"budget", [](CheckTask& t) { t.budget_seconds = -1; }, "budget_seconds"},
      {"unbound symbol", [](CheckTask& t) { t.symbol_values.clear(); }, "candidates[0]"},
      {"missing buffer", [](CheckTask& t) { t.candidates[1].spec.params[1].buffer.index = 3; },
       "candidates[1]: params[1]"},
      {"no cubin", [](CheckTask& t) { t.eager.cubin.clear(); }, "eager: no cubin"},
      {"no entry", [](CheckTask& t) { t.reference64.spec.entry.clear(); }, "reference64"},
  };
  for (const Case& c : cases) {
    CheckTask t = GoodTask();
    c.mutate(t);
    absl::Status s = ValidateTask(t);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message)) << c.name;
  }
}

TEST(RunnerTest, TaskDeviceBytesCountsEveryBuffer) {
  CheckTask t = GoodTask();
  // 1000 f32 in, 1000 bf16 out + 1000 f64 reference, 2 x 150 MB flush.
  EXPECT_EQ(TaskDeviceBytes(t, 150'000'000), 4000 + 2000 + 8000 + 300'000'000);
  // A small L2 still gets do_bench's 256 MB flush.
  EXPECT_EQ(TaskDeviceBytes(t, 50'000'000), 4000 + 2000 + 8000 + 256'000'000);
  EXPECT_EQ(L2FlushBytes(60 << 20), 256'000'000);
  t.timing.flush_l2 = false;
  EXPECT_EQ(TaskDeviceBytes(t, 50'000'000), 14000);
  // An intermediate input adds its widened copy for the reference.
  t.inputs[0].wide_reference = true;
  EXPECT_EQ(TaskDeviceBytes(t, 50'000'000), 14000 + 8000);
  t.inputs[0].wide_reference = false;
  // Three f32 outputs: each has its f64 reference (the three-outputs case).
  t.outputs = {{DType::kF32, 1000}, {DType::kF32, 1000}, {DType::kF32, 1000}};
  EXPECT_EQ(TaskDeviceBytes(t, 50'000'000), 4000 + 3 * (4000 + 8000));
}

TEST(RunnerTest, RandomInputsFollowTheirDomainAndAreNeverZero) {
  struct Case {
    DType dtype;
    InputDomain domain;
    double lo, hi;
  };
  const Case cases[] = {
      {DType::kF32, InputDomain::kAny, -6, 6},
      {DType::kF32, InputDomain::kPositive, 0.1, 4},
      {DType::kBF16, InputDomain::kUnit, -1, 1},
      {DType::kF16, InputDomain::kPositive, 0.0999, 4.01},
      {DType::kI32, InputDomain::kAny, -8, 8},
      {DType::kI64, InputDomain::kPositive, 1, 8},
      {DType::kBool, InputDomain::kAny, 0, 1},
  };
  for (const Case& c : cases) {
    BufferSpec spec{c.dtype, 4096, c.domain};
    std::string bytes = RandomInput(spec, /*seed=*/42, /*stream=*/0);
    ASSERT_EQ(bytes.size(), 4096u * DTypeBytes(c.dtype));
    std::vector<double> v = ToDouble(c.dtype, bytes.data(), 4096);
    int nonzero = 0, negative = 0;
    double sum = 0;
    for (double x : v) {
      ASSERT_TRUE(std::isfinite(x));
      EXPECT_GE(x, c.lo) << DTypeName(c.dtype);
      EXPECT_LE(x, c.hi) << DTypeName(c.dtype);
      nonzero += x != 0;
      negative += x < 0;
      sum += x;
    }
    EXPECT_GT(nonzero, 1000) << DTypeName(c.dtype);
    if (c.lo < 0) {
      EXPECT_GT(negative, 1000) << DTypeName(c.dtype);
    }
    // Same seed, same data; another stream (input), other data.
    EXPECT_EQ(RandomInput(spec, 42, 0), bytes);
    EXPECT_NE(RandomInput(spec, 42, 1), bytes);
    EXPECT_NE(RandomInput(spec, 43, 0), bytes);
    // Counter-based: a prefix is the same data (how the GPU can make it).
    BufferSpec shorter = spec;
    shorter.elements = 100;
    EXPECT_EQ(RandomInput(shorter, 42, 0), bytes.substr(0, 100 * DTypeBytes(c.dtype)));
  }
}

// Class labels: every class can be drawn, none outside [0, extent) but the
// value set apart (an ignore_index), about one in 16.
TEST(RunnerTest, IndexInputsCoverTheirExtentAndTheValueSetApart) {
  for (DType t : {DType::kI32, DType::kI64}) {
    BufferSpec spec{t, 1 << 16, InputDomain::kAny};
    spec.index_extent = 50257;
    spec.index_other = -100;
    std::vector<double> v = ToDouble(t, RandomInput(spec, 42, 0).data(), spec.elements);
    int other = 0, high = 0;
    for (double x : v) {
      if (x == -100) {
        ++other;
        continue;
      }
      ASSERT_GE(x, 0) << DTypeName(t);
      ASSERT_LT(x, 50257) << DTypeName(t);
      high += x >= 40000;
    }
    EXPECT_GT(other, (1 << 16) / 32) << DTypeName(t);
    EXPECT_LT(other, (1 << 16) / 8) << DTypeName(t);
    EXPECT_GT(high, (1 << 16) / 8) << DTypeName(t);  // Not just the first few classes.
  }
  // An index that is a divisor too: [1, extent), never the value set apart.
  BufferSpec positive{DType::kI32, 4096, InputDomain::kPositive};
  positive.index_extent = 10;
  positive.index_other = -100;
  for (double x : ToDouble(DType::kI32, RandomInput(positive, 7, 0).data(), 4096)) {
    ASSERT_GE(x, 1);
    ASSERT_LT(x, 10);
  }
  // One class: element 0 stays in range (or is the value set apart).
  BufferSpec one{DType::kI64, 64, InputDomain::kAny};
  one.index_extent = 1;
  for (double x : ToDouble(DType::kI64, RandomInput(one, 7, 0).data(), 64)) EXPECT_TRUE(x == 0 || x == -1) << x;
}

TEST(RunnerTest, RandomInputOfOneElementIsNotZero) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kI32, DType::kI64, DType::kBool,
                  DType::kF64}) {
    for (uint64_t seed = 1; seed < 200; ++seed) {
      std::string b = RandomInput({t, 1, InputDomain::kAny}, seed, 0);
      EXPECT_NE(ToDouble(t, b.data(), 1)[0], 0) << DTypeName(t) << " seed " << seed;
    }
  }
}

TEST(RunnerTest, CreateWithoutWorkerBinaryIsNotFound) {
  WorkerOptions opts;
  opts.worker_path = "/nonexistent/kfuse-worker";
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(opts);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("/nonexistent/kfuse-worker"));
}

TEST(RunnerTest, CreateWithoutGpuIsUnavailable) {
  if (DeviceCount() > 0) GTEST_SKIP() << "a GPU is present; this checks the no-GPU path";
  ASSERT_EQ(access(DefaultWorkerPath().c_str(), X_OK), 0)
      << DefaultWorkerPath() << " missing: build kfuse-worker before this test";
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(WorkerOptions{});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("libcuda.so.1"));
}

// kfuse-fake-worker (built beside kfuse-worker) answers hello as a worker of
// the version in its environment would.
TEST(RunnerTest, WorkerOfAnotherBuildIsRefusedNamingBothVersions) {
  const std::string worker = DefaultWorkerPath();
  WorkerOptions opts;
  opts.worker_path = worker.substr(0, worker.rfind('/') + 1) + "kfuse-fake-worker";
  ASSERT_EQ(access(opts.worker_path.c_str(), X_OK), 0) << opts.worker_path << " missing";
  for (uint32_t version : {1u, kWorkerProtocolVersion + 1}) {
    ASSERT_EQ(setenv("KFUSE_FAKE_WORKER_VERSION", absl::StrCat(version).c_str(), 1), 0);
    absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(opts);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr(absl::StrCat(opts.worker_path, ": the tuning worker speaks worker protocol ",
                                       version, ", this build ", kWorkerProtocolVersion)));
  }
  // The same worker at this build's version gets as far as its (GPU-less) init.
  ASSERT_EQ(setenv("KFUSE_FAKE_WORKER_VERSION", absl::StrCat(kWorkerProtocolVersion).c_str(), 1),
            0);
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(opts);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("a fake worker has no GPU"));
  unsetenv("KFUSE_FAKE_WORKER_VERSION");
}

// kfuse-fake-worker misbehaving as `mode` says (see fake_worker_main.cc),
// for as long as this lives.
class FakeWorker {
 public:
  explicit FakeWorker(const char* mode) {
    EXPECT_EQ(setenv("KFUSE_FAKE_WORKER_MODE", mode, 1), 0);
    const std::string worker = DefaultWorkerPath();
    opts.worker_path = worker.substr(0, worker.rfind('/') + 1) + "kfuse-fake-worker";
    EXPECT_EQ(access(opts.worker_path.c_str(), X_OK), 0) << opts.worker_path << " missing";
    opts.start_timeout_seconds = 10;
  }
  ~FakeWorker() { unsetenv("KFUSE_FAKE_WORKER_MODE"); }
  WorkerOptions opts;
};

// A task the fake worker's misdeeds show in quickly.
CheckTask QuickTask() {
  CheckTask t = GoodTask();
  t.watchdog_seconds = 1;
  t.timing.max_seconds = 0.5;
  return t;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A worker runs in a process group of its own: a terminal's Ctrl-C (or any
// signal to kfused's group) stops kfused, which lets its tasks finish
// within the grace, and does not kill the workers under them.
TEST(RunnerTest, AWorkerRunsInAProcessGroupOfItsOwn) {
  FakeWorker fake("ok");
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(fake.opts);
  ASSERT_TRUE(r.ok()) << r.status();
  const pid_t pid = (*r)->pid();
  ASSERT_GT(pid, 0);
  EXPECT_EQ(getpgid(pid), pid);
  EXPECT_NE(getpgid(pid), getpgrp());
}

TEST(RunnerTest, ATrialPastTheLastCandidateIsDataLoss) {
  FakeWorker fake("extra_trial");
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(fake.opts);
  ASSERT_TRUE(r.ok()) << r.status();
  int reported = 0;
  absl::StatusOr<std::vector<Trial>> trials =
      (*r)->Run(QuickTask(), [&](const Trial&) { ++reported; });
  EXPECT_EQ(trials.status().code(), absl::StatusCode::kDataLoss) << trials.status();
  EXPECT_THAT(std::string(trials.status().message()), HasSubstr("trial 2 out of order"));
  EXPECT_EQ(reported, 2);
}

// A corrupt stream is the worker's error, not the candidate's: no trial is
// recorded as a fault or a timeout, and an oversized frame is refused at its
// header, not waited for (nor allocated).
TEST(RunnerTest, AGarbledStreamIsTheWorkersErrorNotTheCandidates) {
  for (const char* mode : {"huge_frame", "bad_magic"}) {
    FakeWorker fake(mode);
    absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(fake.opts);
    ASSERT_TRUE(r.ok()) << r.status();
    CheckTask task = QuickTask();
    task.watchdog_seconds = 5;
    int reported = 0;
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<Trial>> trials = (*r)->Run(task, [&](const Trial&) { ++reported; });
    EXPECT_LT(SecondsSince(start), 5.0) << mode;
    EXPECT_EQ(trials.status().code(), absl::StatusCode::kDataLoss) << mode << trials.status();
    EXPECT_THAT(std::string(trials.status().message()),
                HasSubstr(fake.opts.worker_path + ": worker stream: "))
        << mode;
    EXPECT_EQ(reported, 0) << mode;
  }
}

TEST(RunnerTest, AWorkerThatStopsReadingIsKilledNotWaitedFor) {
  FakeWorker fake("deaf");
  fake.opts.send_timeout_seconds = 0.5;
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(fake.opts);
  ASSERT_TRUE(r.ok()) << r.status();
  CheckTask task = QuickTask();
  task.candidates[0].cubin = std::string(8 << 20, 'x');  // More than the socket holds.
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<Trial>> trials = (*r)->Run(task, {});
  EXPECT_LT(SecondsSince(start), 10.0);
  EXPECT_EQ(trials.status().code(), absl::StatusCode::kUnavailable) << trials.status();
  EXPECT_THAT(std::string(trials.status().message()), HasSubstr("not reading"));
  EXPECT_EQ((*r)->starts(), 2);  // One fresh try, stuck as well.
}

// Runs `task` on `runner`, every caller leaving `after` into the run.
struct CancelledRun {
  absl::StatusOr<std::vector<Trial>> trials;
  double seconds = 0;
  int reported = 0;
};
CancelledRun RunAndLeave(WorkerRunner& runner, CheckTask task, std::chrono::milliseconds after) {
  std::atomic<bool> cancel{false};
  task.cancel = &cancel;
  std::thread leave([&] {
    std::this_thread::sleep_for(after);
    cancel = true;
  });
  CancelledRun out;
  const auto start = std::chrono::steady_clock::now();
  out.trials = runner.Run(task, [&](const Trial&) { ++out.reported; });
  out.seconds = SecondsSince(start);
  leave.join();
  return out;
}

// `task` (no cancel) runs to its end on the worker `pid`, started once.
void ExpectTheNextTaskRunsOnTheSameWorker(WorkerRunner& runner, CheckTask task, pid_t pid) {
  task.cancel = nullptr;
  absl::StatusOr<std::vector<Trial>> trials = runner.Run(task, {});
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ(trials->size(), task.candidates.size());
  EXPECT_EQ(runner.pid(), pid);
  EXPECT_EQ(runner.starts(), 1);
}

// Every caller left while a candidate is on the GPU and the worker does not
// stop: the run ends once the drain allowance is spent, its worker killed,
// rather than after the candidate (or the whole budget).
TEST(RunnerTest, ACancelledRunWhoseWorkerDoesNotStopEndsWithItKilled) {
  FakeWorker fake("slow");
  fake.opts.cancel_drain_seconds = 0.5;
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(fake.opts);
  ASSERT_TRUE(r.ok()) << r.status();
  const pid_t pid = (*r)->pid();
  CheckTask task = QuickTask();
  task.watchdog_seconds = 60;
  const CancelledRun run = RunAndLeave(**r, task, std::chrono::milliseconds(300));
  EXPECT_EQ(run.trials.status().code(), absl::StatusCode::kCancelled) << run.trials.status();
  EXPECT_LT(run.seconds, 2.0);
  EXPECT_NE(kill(pid, 0), 0);  // Killed and reaped.
}

// A worker that stops when asked is kept: the next task runs on it without
// a restart (a CUDA context and the helper kernels' compile).
TEST(RunnerTest, ACancelledRunKeepsAWorkerThatStopsWhenAsked) {
  FakeWorker fake("cancellable");
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(fake.opts);
  ASSERT_TRUE(r.ok()) << r.status();
  const pid_t pid = (*r)->pid();
  CheckTask task = QuickTask();
  task.candidates.resize(50, task.candidates[0]);  // 10 s at 200 ms each.
  const CancelledRun run = RunAndLeave(**r, task, std::chrono::milliseconds(500));
  EXPECT_EQ(run.trials.status().code(), absl::StatusCode::kCancelled) << run.trials.status();
  EXPECT_LT(run.seconds, 3.0);
  EXPECT_LT(run.reported, 10);
  EXPECT_EQ(kill(pid, 0), 0);  // Still running.
  EXPECT_EQ((*r)->starts(), 1);

  task.candidates.resize(2);
  ExpectTheNextTaskRunsOnTheSameWorker(**r, task, pid);
}

// A cancelled task that ends with an error (a worker on its way out after a
// fault) is not kept for the next task: that one starts a fresh worker.
TEST(RunnerTest, ACancelledRunDropsAWorkerWhoseTaskEndedInError) {
  FakeWorker fake("cancel_fails");
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(fake.opts);
  ASSERT_TRUE(r.ok()) << r.status();
  CheckTask task = QuickTask();
  task.candidates.resize(50, task.candidates[0]);
  EXPECT_EQ(RunAndLeave(**r, task, std::chrono::milliseconds(300)).trials.status().code(),
            absl::StatusCode::kCancelled);
  task.candidates.resize(2);
  absl::StatusOr<std::vector<Trial>> trials = (*r)->Run(task, {});
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ(trials->size(), 2u);
  EXPECT_EQ((*r)->starts(), 2);
}

// A run whose callers left before it started sends nothing.
TEST(RunnerTest, ARunCancelledBeforeItStartsSendsNothing) {
  FakeWorker fake("slow");
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(fake.opts);
  ASSERT_TRUE(r.ok()) << r.status();
  const pid_t pid = (*r)->pid();
  CheckTask task = QuickTask();
  std::atomic<bool> cancel{true};
  task.cancel = &cancel;
  EXPECT_EQ((*r)->Run(task, {}).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(kill(pid, 0), 0);  // Not asked to do anything, so not killed.
  EXPECT_EQ((*r)->starts(), 1);
}

// A cancel that reaches the worker after its task ended (the race every
// cancel can lose) is ignored there, and the stream stays in step.
TEST(RunnerTest, ACancelThatArrivesAfterTheTaskEndedLeavesTheStreamInStep) {
  FakeWorker fake("late_cancel");
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(fake.opts);
  ASSERT_TRUE(r.ok()) << r.status();
  const pid_t pid = (*r)->pid();
  const CheckTask task = QuickTask();
  EXPECT_EQ(RunAndLeave(**r, task, std::chrono::milliseconds(100)).trials.status().code(),
            absl::StatusCode::kCancelled);
  ExpectTheNextTaskRunsOnTheSameWorker(**r, task, pid);
}

TEST(RunnerTest, CeilingsRestartAWorkerThatDiedWhileIdle) {
  FakeWorker fake("ok");
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(fake.opts);
  ASSERT_TRUE(r.ok()) << r.status();
  const pid_t pid = (*r)->pid();
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  siginfo_t info;
  ASSERT_EQ(waitid(P_PID, pid, &info, WEXITED | WNOWAIT), 0);  // Dead, left for the runner.
  for (int call = 0; call < 2; ++call) {
    absl::StatusOr<Ceilings> c = (*r)->MeasureCeilings(nullptr);
    ASSERT_TRUE(c.ok()) << call << ": " << c.status();
    EXPECT_EQ(c->source, "kfuse-fake-worker");
  }
  EXPECT_EQ((*r)->starts(), 2);
}

// A measurement of the ceilings stops when its caller cancels (kfused
// stopping while a late GPU's are measured): its worker is killed at once,
// not waited for, and the next call starts a fresh one.
TEST(RunnerTest, CancelledCeilingsStopAtOnceAndTheNextCallStartsAFreshWorker) {
  FakeWorker fake("slow_ceilings");  // Answers ceilings after 30 s.
  const std::string mark = absl::StrCat(::testing::TempDir(), "kfuse_ceilings_mark_", getpid());
  unlink(mark.c_str());
  ASSERT_EQ(setenv("KFUSE_FAKE_WORKER_MARK", mark.c_str(), 1), 0);
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(fake.opts);
  ASSERT_TRUE(r.ok()) << r.status();
  const pid_t pid = (*r)->pid();
  std::atomic<bool> cancel{false};
  std::thread raise([&cancel, &mark] {  // Once the worker is measuring.
    for (int i = 0; i < 1000 && access(mark.c_str(), F_OK) != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cancel = true;
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ((*r)->MeasureCeilings(&cancel).status().code(), absl::StatusCode::kCancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  raise.join();
  unsetenv("KFUSE_FAKE_WORKER_MARK");
  EXPECT_EQ(access(mark.c_str(), F_OK), 0);  // It was measuring when cancelled.
  unlink(mark.c_str());
  EXPECT_NE(kill(pid, 0), 0);  // Killed and reaped.
  EXPECT_EQ((*r)->MeasureCeilings(&cancel).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ((*r)->starts(), 1);  // Raised before the call: no worker started for it.
  ASSERT_EQ(setenv("KFUSE_FAKE_WORKER_MODE", "ok", 1), 0);
  absl::StatusOr<Ceilings> c = (*r)->MeasureCeilings(nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*r)->starts(), 2);
}

// A worker start waiting for its hello (a driver slow to come up) gives up
// when the server stops, instead of waiting out the start timeout: the
// worker is killed, no backoff begins, and no start begins after it.
TEST(RunnerTest, AStartWaitingForItsHelloGivesUpWhenTheServerStops) {
  FakeWorker fake("slow_hello");  // Answers hello after 30 s.
  fake.opts.start_timeout_seconds = 60;
  std::atomic<bool> stop{false};
  fake.opts.stop = &stop;
  const std::string mark = absl::StrCat(::testing::TempDir(), "kfuse_hello_mark_", getpid());
  unlink(mark.c_str());
  ASSERT_EQ(setenv("KFUSE_FAKE_WORKER_MARK", mark.c_str(), 1), 0);
  std::thread raise([&stop, &mark] {  // Once the worker waits to answer.
    for (int i = 0; i < 1000 && access(mark.c_str(), F_OK) != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    stop = true;
  });
  const auto start = std::chrono::steady_clock::now();
  absl::Status started;
  std::unique_ptr<WorkerRunner> r = WorkerRunner::CreateEvenIfDown(fake.opts, &started);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  raise.join();
  unsetenv("KFUSE_FAKE_WORKER_MARK");
  EXPECT_EQ(started.code(), absl::StatusCode::kCancelled) << started;
  EXPECT_THAT(started.message(), HasSubstr("the server is stopping"));
  std::ifstream in(mark);
  pid_t pid = 0;
  EXPECT_TRUE(in >> pid) << "the worker never wrote " << mark;
  unlink(mark.c_str());
  if (pid > 0) {
    EXPECT_NE(kill(pid, 0), 0);  // Killed and reaped.
  }
  EXPECT_EQ(r->starts(), 1);
  EXPECT_FALSE(r->Unavailable().has_value());  // Stopping is not a failed GPU.
  EXPECT_EQ(r->Device().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(r->MeasureCeilings(nullptr).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(r->starts(), 1);  // None begins once stopping.
}

// A worker that no longer starts (the GPU gone) is not started again for
// each task: the runner says why and when it will try, answers at once
// meanwhile, and starts one once the backoff has passed.
TEST(RunnerTest, AWorkerThatFailsToStartIsTriedAgainOnlyAfterABackoff) {
  FakeWorker fake("exit7");
  double now = 1000;
  fake.opts.now = [&now] { return now; };
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(fake.opts);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE((*r)->Unavailable().has_value());
  (*r)->Run(QuickTask(), nullptr).IgnoreError();  // Each worker exits 7 during the task: faults.
  // The driver failing in the worker's start (Internal there) is the GPU
  // unavailable here, so a pool takes it out of the rotation.
  ASSERT_EQ(setenv("KFUSE_FAKE_WORKER_MODE", "broken_gpu", 1), 0);
  absl::StatusOr<std::vector<Trial>> down = (*r)->Run(QuickTask(), nullptr);
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  const int starts = (*r)->starts();
  std::optional<std::string> why = (*r)->Unavailable();
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("cuDevicePrimaryCtxRetain failed (fake)"));
  EXPECT_THAT(*why, HasSubstr("tried again in 60 s"));

  now += 59;
  ASSERT_EQ(setenv("KFUSE_FAKE_WORKER_MODE", "ok", 1), 0);
  EXPECT_EQ((*r)->Run(QuickTask(), nullptr).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*r)->MeasureCeilings(nullptr).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*r)->starts(), starts);  // Not tried within the backoff.
  now += 2;
  EXPECT_FALSE((*r)->Unavailable().has_value());
  absl::StatusOr<std::vector<Trial>> back = (*r)->Run(QuickTask(), nullptr);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*r)->starts(), starts + 1);
}

// For a pool member whose GPU may come back: the runner outlives a failed
// first start, and its Device() starts the worker once the backoff passed.
TEST(RunnerTest, ARunnerWhoseFirstStartFailedStartsForItsDeviceAfterTheBackoff) {
  FakeWorker fake("no_gpu");
  double now = 1000;
  fake.opts.now = [&now] { return now; };
  absl::Status started;
  std::unique_ptr<WorkerRunner> r = WorkerRunner::CreateEvenIfDown(fake.opts, &started);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(started.code(), absl::StatusCode::kUnavailable) << started;
  EXPECT_THAT(started.message(), HasSubstr("no usable GPU (fake)"));
  EXPECT_EQ(r->starts(), 1);
  ASSERT_EQ(setenv("KFUSE_FAKE_WORKER_MODE", "ok", 1), 0);
  EXPECT_EQ(r->Device().status().code(), absl::StatusCode::kUnavailable);  // In the backoff.
  EXPECT_EQ(r->starts(), 1);
  now += 61;
  absl::StatusOr<DeviceFingerprint> fp = r->Device();
  ASSERT_TRUE(fp.ok()) << fp.status();
  EXPECT_FALSE(fp->name.empty());
  EXPECT_EQ(r->starts(), 2);
  EXPECT_TRUE(r->Device().ok());
  EXPECT_EQ(r->starts(), 2);  // Started once: Device() asks no more.
}

// SIGCHLD inherited as ignored: the kernel reaps the worker, and its exit
// status is lost. Say so; never report it as a clean exit.
TEST(WorkerProcessTest, AnExitStatusLostToAnIgnoredSigchldIsNotCodeZero) {
  FakeWorker fake("exit7");
  CheckTask task = QuickTask();
  task.candidates.resize(1);
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(fake.opts);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<std::vector<Trial>> trials = (*r)->Run(task, {});
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ((*trials)[0].outcome, Outcome::kFault);
  EXPECT_EQ((*trials)[0].message, "worker died: exited with code 7");

  struct sigaction ignore = {}, saved = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGCHLD, &ignore, &saved), 0);
  trials = (*r)->Run(task, {});
  ASSERT_EQ(sigaction(SIGCHLD, &saved, nullptr), 0);
  ASSERT_TRUE(trials.ok()) << trials.status();
  EXPECT_EQ((*trials)[0].outcome, Outcome::kFault);
  EXPECT_THAT((*trials)[0].message, HasSubstr("exit status is lost"));
  EXPECT_THAT((*trials)[0].message, Not(HasSubstr("code 0")));
}

// A killed child that stays unreapable (here: traced by a process that never
// waits for it; in production, stuck in the driver) does not hold Kill, and
// so the runner's lock, beyond a few seconds; it is reaped once it can be.
TEST(WorkerProcessTest, KillDoesNotWaitForAChildThatCannotBeReaped) {
  FakeWorker fake("traced");
  absl::StatusOr<std::unique_ptr<WorkerProcess>> w = WorkerProcess::Start(fake.opts.worker_path, 0);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->Send(kMsgHello, EncodeHello(), 5.0).ok());
  absl::StatusOr<Frame> f = (*w)->Recv(10.0);
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<HelloReply> hello = DecodeHelloReply(f->payload);
  ASSERT_TRUE(hello.ok()) << hello.status();
  if (!hello->status.ok()) GTEST_SKIP() << hello->status;
  const pid_t pid = (*w)->pid();
  const auto start = std::chrono::steady_clock::now();
  (*w)->Kill();
  EXPECT_LT(SecondsSince(start), 6.0);  // Its tracer holds it for 10 s.
  EXPECT_THAT((*w)->ExitDescription(), HasSubstr("not reapable yet"));
  w->reset();
  // The reaper thread reaps it once the tracer is gone: no zombie is left.
  bool reaped = false;
  for (int i = 0; i < 300 && !reaped; ++i) {
    reaped = kill(pid, 0) != 0 && errno == ESRCH;
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(reaped);
}

TEST(RunnerTest, WorkerStartedByHandPrintsUsage) {
  std::string cmd = DefaultWorkerPath() + " 2>/dev/null";
  int rc = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
}

}  // namespace
}  // namespace kfuse
