// Property test of plans for random chains that reduce (random element-wise
// work, reductions along rows, over outer axes or every axis, their results
// broadcast back, several outputs; f32, bf16 and f16; static and symbolic
// row counts; odd widths): every kernel of each plan generated under its
// heuristic and a few other variants, compiled with NVRTC, launched through
// the C++ Launcher on random inputs and compared with the CPU fp64
// evaluator, with eager PyTorch's error (the CPU kEager evaluator) as the
// yardstick. Without a GPU the GPU test skips; the CPU half (partition,
// generate, compile, evaluate) runs everywhere.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "clients/launcher.h"
#include "codegen/analysis.h"
#include "codegen/evaluate.h"
#include "codegen/generators.h"
#include "codegen/partition.h"
#include "codegen/validate.h"
#include "gtest/gtest.h"
#include "tests/gpu_test_util.h"
#include "tests/random_reduce_chains.h"
#include "tuner/check.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

using testing_chains::MakeRandomReduceChain;
using testing_chains::RandomChain;
using testing_chains::RandomInputs;

// How many chains: 40, or KFUSE_REDUCE_CHAINS for a wider sweep.
int Chains() {
  const char* n = std::getenv("KFUSE_REDUCE_CHAINS");
  return n != nullptr && std::atoi(n) > 0 ? std::atoi(n) : 40;
}
constexpr double kSlack = 2.0;


using gpu_test::PlanShape;
using gpu_test::SpreadVariants;


// The CPU half: every chain validates, partitions, every kernel's heuristic
// generates and compiles for sm_90 and its other variants tried generate,
// and the evaluator runs it both ways. The chains must cover plans of one
// row kernel and plans of several kernels (with reductions over outer
// axes), symbolic sizes and several outputs. Runs without a GPU.
TEST(RandomReduceChainsTest, PartitionGenerateCompileAndEvaluateOnCpu) {
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = "sm_90";
  std::map<std::string, int> shapes;
  int several = 0, one_row = 0, outer = 0, symbolic = 0, multi_output = 0;
  const int chains = Chains();
  for (int i = 0; i < chains; ++i) {
    RandomChain rc = MakeRandomReduceChain(i);
    SCOPED_TRACE(rc.name + "\n" + ToString(rc.chain));
    const Chain& c = rc.chain;
    EXPECT_TRUE(Validate(c).ok());
    absl::StatusOr<Partition> part = PartitionChain(c);
    ASSERT_TRUE(part.ok()) << part.status();
    ++shapes[PlanShape(*part)];
    several += part->kernels.size() > 1;
    one_row += part->kernels.size() == 1 && part->kernels[0].family == Family::kRowReduction;
    outer += std::any_of(part->kernels.begin(), part->kernels.end(),
                         [](const KernelGroup& g) { return g.family == Family::kReduction; });
    symbolic += !c.symbols.empty();
    multi_output += c.outputs.size() > 1;
    for (size_t k = 0; k < part->kernels.size(); ++k) {
      const KernelGroup& g = part->kernels[k];
      std::vector<KernelSpec> specs;
      for (const Variant& v : SpreadVariants(c, g)) {
        absl::StatusOr<KernelSpec> spec = EmitFamily(c, g, v);
        ASSERT_TRUE(spec.ok()) << "kernel " << k << " " << v.ToString() << ": " << spec.status();
        specs.push_back(*std::move(spec));
      }
      absl::StatusOr<CompiledKernel> compiled = nvrtc.Compile(specs[0], opts);
      EXPECT_TRUE(compiled.ok()) << "kernel " << k << ": " << compiled.status();
    }
    auto in = RandomInputs(rc, 1000 + i);
    for (EvalMode mode : {EvalMode::kExact64, EvalMode::kEager}) {
      auto out = Evaluate(c, in, rc.symbol_values, mode);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->size(), c.outputs.size());
    }
  }
  for (const auto& [shape, count] : shapes) std::printf("%3d x %s\n", count, shape.c_str());
  // The generator must reach both kinds of plan, and the rest it promises.
  EXPECT_GE(several, chains / 5);
  EXPECT_GE(one_row, chains / 5);
  EXPECT_GE(outer, chains / 5);
  EXPECT_GE(symbolic, chains / 5);
  EXPECT_GE(multi_output, chains / 5);
  EXPECT_GE(shapes.size(), 4u);
}

using gpu_test::DeviceMemory;
using gpu_test::Gpu;
using gpu_test::OpenGpu;
using gpu_test::PlanOfKernels;
using gpu_test::PlanRun;
using gpu_test::RunsOf;
using gpu_test::ShapeOf;

// What every chain's check shares.
struct GpuCheck {
  Gpu* gpu = nullptr;
  NvrtcCompiler* nvrtc = nullptr;
  Launcher* launcher = nullptr;
  CompileOptions opts;
};

// Launches chain `index`'s plan under every run of RunsOf into poisoned
// outputs and checks each output against the fp64 reference.
void CheckChainOnGpu(const GpuCheck& g, int index) {
  RandomChain rc = MakeRandomReduceChain(index);
  SCOPED_TRACE(rc.name + "\n" + ToString(rc.chain));
  const Chain& c = rc.chain;
  const std::vector<int64_t>& syms = rc.symbol_values;
  absl::StatusOr<Partition> part = PartitionChain(c);
  ASSERT_TRUE(part.ok()) << part.status();
  const std::string shape = PlanShape(*part);
  auto in = RandomInputs(rc, 2000 + index);
  auto exact = Evaluate(c, in, syms, EvalMode::kExact64);
  auto eager = Evaluate(c, in, syms, EvalMode::kEager);
  ASSERT_TRUE(exact.ok() && eager.ok());
  DeviceMemory mem(g.gpu->cu);
  std::vector<DeviceBuffer> inputs = gpu_test::UploadInputs(mem, c, in, syms);
  std::map<std::pair<size_t, Variant>, CompiledKernel> compiled;
  for (const PlanRun& run : RunsOf(c, *part)) {
    SCOPED_TRACE(run.label);
    std::vector<CompiledKernel> kernels;
    for (size_t k = 0; k < part->kernels.size(); ++k) {
      const auto key = std::make_pair(k, run.variants[k]);
      auto it = compiled.find(key);
      if (it == compiled.end()) {
        absl::StatusOr<KernelSpec> spec = EmitFamily(c, part->kernels[k], run.variants[k]);
        ASSERT_TRUE(spec.ok()) << spec.status();
        absl::StatusOr<CompiledKernel> kernel = g.nvrtc->Compile(*spec, g.opts);
        ASSERT_TRUE(kernel.ok()) << kernel.status();
        it = compiled.emplace(key, *std::move(kernel)).first;
      }
      kernels.push_back(it->second);
    }
    absl::StatusOr<v1::KernelPlan> plan = PlanOfKernels(c, *part, kernels, /*f64=*/false);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_EQ(plan->intermediates_size(), static_cast<int>(part->intermediates.size()));
    std::vector<DeviceBuffer> outputs = gpu_test::PoisonedOutputs(*g.gpu, mem, c, syms);
    absl::Status s = g.launcher->Launch(*plan, inputs, outputs, nullptr);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(g.gpu->cu->cuCtxSynchronize(), CUDA_SUCCESS);
    std::vector<gpu_test::CheckedOutput> checked = gpu_test::CheckOutputs(mem, outputs, *exact, *eager, kSlack);
    for (size_t j = 0; j < checked.size(); ++j) {
      const OutputCheck& check = checked[j].check;
      std::printf("%-44s %-28s %-44s %-3zu %-10.3g %-10.3g %s\n", rc.name.substr(0, 44).c_str(),
                  shape.c_str(), run.label.c_str(), j, check.max_abs_err, checked[j].eager_err,
                  check.ok ? "ok" : check.message.c_str());
      EXPECT_TRUE(check.ok) << check.message;
    }
  }
}

TEST(GpuReduceChainsTest, RandomReduceChainsMatchReference) {
  absl::StatusOr<Gpu> gpu = OpenGpu();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status();
  NvrtcCompiler nvrtc;
  Launcher launcher(*gpu->cu);
  GpuCheck check{&*gpu, &nvrtc, &launcher, {}};
  check.opts.arch = gpu->arch;
  std::printf("%-44s %-28s %-44s %-3s %-10s %-10s %s\n", "chain", "plan", "variant", "out",
              "max err", "eager err", "verdict");
  for (int i = 0; i < Chains(); ++i) CheckChainOnGpu(check, i);
}

}  // namespace
}  // namespace kfuse
