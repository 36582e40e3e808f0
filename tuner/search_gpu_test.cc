// TuneKernel and CheckKernel on a real GPU: NVRTC and the worker. A kernel serves every size
// of its symbols, so what passed at the tuning bucket is checked at other
// sizes before it can win; here a planted tail bug (right at the bucket,
// wrong elsewhere) loses, and the real candidates pass there. Skips without
// a GPU.
#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "codegen/generators.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tuner/cuda/device.h"
#include "tuner/nvrtc_compiler.h"
#include "tuner/runner.h"
#include "tuner/search.h"
#include "tuner/search_test_chains.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

// Compiles with NVRTC; every variant but `keep` (the seed, whose variant the
// references share) has its element count rounded down to a multiple of 256,
// so it drops the tail of any other size.
class TailDroppingCompiler : public Compiler {
 public:
  explicit TailDroppingCompiler(Variant keep) : keep_(std::move(keep)) {}
  absl::StatusOr<CompiledKernel> Compile(const KernelSpec& spec, const CompileOptions& opts,
                                         const std::atomic<bool>* cancel) override {
    KernelSpec s = spec;
    if (s.variant != keep_) {
      const std::string from = "const kf_idx n = ";
      const size_t at = s.source.find(from);
      if (at == std::string::npos) return absl::InternalError("no element count to plant a bug in");
      const size_t end = s.source.find(';', at);
      const std::string count = s.source.substr(at + from.size(), end - at - from.size());
      s.source.replace(at, end - at, from + "(" + count + ") & ~(kf_idx)255");
      ++planted_;
    }
    return nvrtc_.Compile(s, opts, cancel);
  }
  std::string Version() const override { return nvrtc_.Version(); }

  std::atomic<int> planted_{0};

 private:
  Variant keep_;
  NvrtcCompiler nvrtc_;
};

struct Gpu {
  std::string arch;
  std::unique_ptr<WorkerRunner> runner;
};
std::optional<Gpu> MakeGpu() {
  if (DeviceCount() == 0) return std::nullopt;
  absl::StatusOr<DeviceFingerprint> fp = QueryDevice(0);
  absl::StatusOr<std::unique_ptr<WorkerRunner>> r = WorkerRunner::Create(WorkerOptions{});
  if (!fp.ok() || !r.ok()) return std::nullopt;
  return Gpu{ArchForDevice(*fp), *std::move(r)};
}

TuneOptions Opts(const std::string& arch) {
  TuneOptions o;
  o.mode = TuneMode::kFull;
  o.budget_seconds = 30;
  o.arch = arch;
  return o;
}

TEST(TuneKernelGpuTest, AKernelWrongAtAnotherSizeLosesToOneRightEverywhere) {
  std::optional<Gpu> gpu = MakeGpu();
  if (!gpu) GTEST_SKIP() << "no CUDA device, or no worker";
  const Fixture f = ReluChain(-1000);  // Tuned at n = 1024.
  absl::StatusOr<Variant> seed = SeedVariant(f.chain, f.group, ComputeCapabilityOf(gpu->arch));
  ASSERT_TRUE(seed.ok()) << seed.status();
  TailDroppingCompiler compiler(*seed);
  absl::StatusOr<TuneResult> r =
      TuneKernel(f.chain, f.group, Opts(gpu->arch), compiler, gpu->runner.get());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GT(compiler.planted_.load(), 0);
  EXPECT_TRUE(r->tuned) << r->untuned_reason;
  EXPECT_EQ(r->best, *seed);
  EXPECT_TRUE(r->seed_failure.empty()) << r->seed_failure;
  auto seed_trial = std::find_if(r->trials.begin(), r->trials.end(),
                                 [&](const Trial& t) { return t.variant == *seed; });
  ASSERT_NE(seed_trial, r->trials.end());
  EXPECT_EQ(seed_trial->outcome, Outcome::kOk) << seed_trial->message;
  // Every candidate timed faster than the seed was checked at 769 before the
  // seed could win, and failed there; slower ones need not be checked.
  for (const Trial& t : r->trials) {
    if (t.variant == *seed || t.median_seconds >= seed_trial->median_seconds) continue;
    if (t.outcome == Outcome::kSkipped || t.outcome == Outcome::kCompileError) continue;
    EXPECT_EQ(t.outcome, Outcome::kWrongResult) << t.variant.ToString() << ": " << t.message;
    EXPECT_THAT(t.message, HasSubstr("at \"n\"=769 (passed at \"n\"=1024)"));
  }
}

// The same tuning with the kernels as generated: every candidate that passed
// at the bucket passes at the other sizes too.
TEST(TuneKernelGpuTest, GeneratedKernelsPassAtEverySize) {
  std::optional<Gpu> gpu = MakeGpu();
  if (!gpu) GTEST_SKIP() << "no CUDA device, or no worker";
  const Fixture f = ReluChain(-1000);  // Tuned at n = 1024.
  NvrtcCompiler compiler;
  absl::StatusOr<TuneResult> r =
      TuneKernel(f.chain, f.group, Opts(gpu->arch), compiler, gpu->runner.get());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tuned) << r->untuned_reason;
  for (const Trial& t : r->trials) {
    EXPECT_TRUE(t.outcome == Outcome::kOk || t.outcome == Outcome::kSkipped)
        << t.variant.ToString() << ": " << OutcomeName(t.outcome) << ": " << t.message;
  }
}

// A stored decision's winner, recompiled: CheckKernel passes it as
// generated and catches it with the tail bug planted.
TEST(CheckKernelGpuTest, APlantedTailBugIsCaughtAndTheKernelAsGeneratedPasses) {
  std::optional<Gpu> gpu = MakeGpu();
  if (!gpu) GTEST_SKIP() << "no CUDA device, or no worker";
  const Fixture f = ReluChain(-1000);  // Checked at n = 1024, 769 and 3.
  absl::StatusOr<std::vector<Variant>> cands = CandidateVariants(
      f.chain, f.group, TuneMode::kQuick, Bound::kMemory, 48, ComputeCapabilityOf(gpu->arch));
  ASSERT_TRUE(cands.ok()) << cands.status();
  ASSERT_GE(cands->size(), 2u);
  const Variant v = (*cands)[1];
  absl::StatusOr<KernelSpec> spec = EmitFamily(f.chain, f.group, v);
  ASSERT_TRUE(spec.ok()) << spec.status();
  CompileOptions copts;
  copts.arch = gpu->arch;
  NvrtcCompiler nvrtc;
  TailDroppingCompiler planting((*cands)[0]);
  absl::StatusOr<CompiledKernel> right = nvrtc.Compile(*spec, copts);
  absl::StatusOr<CompiledKernel> planted = planting.Compile(*spec, copts, nullptr);
  ASSERT_TRUE(right.ok()) << right.status();
  ASSERT_TRUE(planted.ok()) << planted.status();
  ASSERT_EQ(planting.planted_.load(), 1);

  absl::StatusOr<Trial> ok = CheckKernel(f.chain, f.group, *right, Opts(gpu->arch), nvrtc, *gpu->runner);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->outcome, Outcome::kOk) << ok->message;
  absl::StatusOr<Trial> caught =
      CheckKernel(f.chain, f.group, *planted, Opts(gpu->arch), nvrtc, *gpu->runner);
  ASSERT_TRUE(caught.ok()) << caught.status();
  EXPECT_EQ(caught->outcome, Outcome::kWrongResult) << caught->message;
  EXPECT_THAT(caught->message, HasSubstr("at \"n\"=769 (passed at \"n\"=1024)"));
}

}  // namespace
}  // namespace kfuse
