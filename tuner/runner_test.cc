#include "tuner/runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
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

TEST(RunnerTest, WorkerStartedByHandPrintsUsage) {
  std::string cmd = DefaultWorkerPath() + " 2>/dev/null";
  int rc = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
}

}  // namespace
}  // namespace kfuse
