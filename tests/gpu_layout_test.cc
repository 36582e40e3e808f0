// Layout views in pointwise kernels, end to end: rotary embeddings (bf16 and
// f32, head_dim 64 and 128, odd and runtime row counts), chunked SwiGLU, a
// [B,S,H,D] input permuted to [B,H,S,D] and scaled, step-2 slices, split
// heads, concats of odd widths and along outer axes, and random chains with
// views (tests/random_chains.h from kFirstViewChain on). Each is generated
// under a sample of its variants (the heuristic, one per vector width, a
// grid-stride one) and the fp64 reference kernel, compiled with NVRTC,
// launched through the C++ Launcher on random inputs and compared with the
// CPU fp64 evaluator, with eager PyTorch's error (the CPU kEager evaluator)
// as the yardstick. Without a GPU the GPU tests skip; the CPU half
// (generate, compile for sm_90, run each kernel's index program on the CPU
// against the evaluator) runs everywhere.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/launcher.h"
#include "codegen/analysis.h"
#include "codegen/evaluate.h"
#include "codegen/partition.h"
#include "codegen/pointwise.h"
#include "codegen/pointwise_views_test_chains.h"
#include "codegen/pointwise_views_test_util.h"
#include "gtest/gtest.h"
#include "service/convert.h"
#include "tests/gpu_test_util.h"
#include "tests/random_chains.h"
#include "tuner/check.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

constexpr int64_t kRows = 33;      // The runtime row count of symbolic chains: odd.
constexpr int kRandomChains = 20;  // Random chains with views, from kFirstViewChain.
constexpr double kSlack = 2.0;

struct Case {
  std::string name;
  Chain chain;
  std::vector<int64_t> symbols;
  KernelGroup group;
};

KernelGroup OnlyGroup(const Chain& c) {
  absl::StatusOr<Partition> p = PartitionChain(c);
  KFUSE_CHECK(p.ok() && p->kernels.size() == 1);
  return p->kernels[0];
}

std::vector<Case> NamedCases() {
  std::vector<Case> out;
  for (views_test::Named& n : views_test::Chains()) {
    Case k{n.name, std::move(n.chain), {}, {}};
    k.symbols.assign(k.chain.symbols.size(), kRows);
    k.group = OnlyGroup(k.chain);
    out.push_back(std::move(k));
  }
  return out;
}

bool HasView(const Chain& c) {
  return std::any_of(c.nodes.begin(), c.nodes.end(),
                     [](const Node& n) { return IsLayout(n.kind); });
}

std::vector<Case> RandomCases() {
  std::vector<Case> out;
  for (int i = 0; i < kRandomChains; ++i) {
    testing_chains::RandomChain rc =
        testing_chains::MakeRandomChain(testing_chains::kFirstViewChain + i);
    Case k{rc.name, std::move(rc.chain), std::move(rc.symbol_values), {}};
    k.group = OnlyGroup(k.chain);
    out.push_back(std::move(k));
  }
  return out;
}

// The heuristic, the first variant of the space for each other vector
// width, and its last (grid-stride) one.
std::vector<Variant> VariantsToTry(const Chain& c, const KernelGroup& g) {
  std::vector<Variant> out = {PointwiseHeuristic(c, g)};
  std::vector<Variant> space = PointwiseSpace(c, g);
  auto add = [&](const Variant& v) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  };
  for (const Variant& v : space) {
    bool seen = false;
    for (const Variant& o : out) seen = seen || o.Get("vec") == v.Get("vec");
    if (!seen) add(v);
  }
  if (!space.empty()) add(space.back());
  return out;
}

std::vector<std::vector<double>> Inputs(const Case& k, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::vector<Domain> domains = InputDomains(k.chain);
  std::vector<std::vector<double>> in(k.chain.num_inputs());
  for (const Node& n : k.chain.nodes) {
    if (n.kind != OpKind::kInput) continue;
    const bool positive = domains[n.input_index] == Domain::kPositive;
    const int64_t count = static_cast<int64_t>(Elements(n.type, k.symbols));
    for (int64_t i = 0; i < count; ++i) {
      double x;
      if (n.type.dtype == DType::kBool) {
        x = std::uniform_int_distribution<int>(0, 1)(rng);
      } else if (n.type.dtype == DType::kI32) {
        x = std::uniform_int_distribution<int>(positive ? 1 : -100, 100)(rng);
      } else {
        x = RoundTo(n.type.dtype,
                    std::uniform_real_distribution<double>(positive ? 0.1 : -4, 4)(rng));
      }
      in[n.input_index].push_back(x);
    }
  }
  return in;
}

// gpu_test::ToBytes, and i32.
std::string ToBytes(DType t, const std::vector<double>& v) {
  if (t != DType::kI32) return gpu_test::ToBytes(t, v);
  std::string out(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    int32_t x = static_cast<int32_t>(v[i]);
    std::memcpy(out.data() + 4 * i, &x, 4);
  }
  return out;
}

// The CPU half: every chain partitions into one pointwise kernel, generates
// under every variant tried and in every numerics, compiles for sm_90, and
// evaluates.
void GenerateAndCompile(const std::vector<Case>& cases) {
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = "sm_90";
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name + "\n" + ToString(k.chain));
    std::vector<std::pair<Variant, Numerics>> runs;
    for (const Variant& v : VariantsToTry(k.chain, k.group)) runs.push_back({v, Numerics::kFast});
    runs.push_back({PointwiseHeuristic(k.chain, k.group), Numerics::kReference64});
    runs.push_back({PointwiseHeuristic(k.chain, k.group), Numerics::kEager});
    for (const auto& [v, numerics] : runs) {
      absl::StatusOr<KernelSpec> spec = EmitPointwise(k.chain, k.group, v, numerics);
      ASSERT_TRUE(spec.ok()) << v.ToString() << ": " << spec.status();
      absl::StatusOr<CompiledKernel> c = nvrtc.Compile(*spec, opts);
      ASSERT_TRUE(c.ok()) << v.ToString() << ": " << c.status() << "\n" << spec->source;
      EXPECT_EQ(c->resources.spill_bytes, 0u) << v.ToString();
    }
    // The kernel's index program, run on the CPU, computes what the
    // evaluator does, bit for bit, and reads only inside its buffers.
    const auto in = Inputs(k, 1);
    auto exact = Evaluate(k.chain, in, k.symbols, EvalMode::kExact64);
    ASSERT_TRUE(exact.ok()) << exact.status();
    auto program = views_test::RunOnCpu(k.chain, k.group, in, k.symbols);
    ASSERT_TRUE(program.ok()) << program.status();
    ASSERT_EQ(program->size(), exact->size());
    for (size_t j = 0; j < exact->size(); ++j) {
      const std::vector<double>&a = (*program)[j], &b = (*exact)[j];
      ASSERT_EQ(a.size(), b.size());
      size_t i = 0;
      while (i < a.size() && (a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) ++i;
      EXPECT_EQ(i, a.size()) << "output " << j << " differs at element " << i;
    }
  }
}

TEST(LayoutCompileTest, NamedChainsGenerateAndCompile) { GenerateAndCompile(NamedCases()); }

TEST(LayoutCompileTest, RandomChainsWithViewsGenerateAndCompile) {
  std::vector<Case> cases = RandomCases();
  int with_views = 0;
  for (const Case& k : cases) with_views += HasView(k.chain);
  EXPECT_GE(with_views, kRandomChains / 2) << "the generator should make views";
  GenerateAndCompile(cases);
}

// Every run of `cases` on the GPU against the CPU evaluator.
void MatchReference(const std::vector<Case>& cases) {
  absl::StatusOr<gpu_test::Gpu> gpu = gpu_test::OpenGpu();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status();
  NvrtcCompiler nvrtc;
  Launcher launcher(*gpu->cu);
  CompileOptions opts;
  opts.arch = gpu->arch;
  std::printf("%-44s %-44s %-4s %-10s %-10s %s\n", "chain", "variant", "out", "max err",
              "eager err", "verdict");
  unsigned seed = 0;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name + "\n" + ToString(k.chain));
    const Chain& c = k.chain;
    auto in = Inputs(k, 2000 + seed++);
    auto exact = Evaluate(c, in, k.symbols, EvalMode::kExact64);
    auto eager = Evaluate(c, in, k.symbols, EvalMode::kEager);
    ASSERT_TRUE(exact.ok() && eager.ok());
    gpu_test::DeviceMemory mem(gpu->cu);
    std::vector<DeviceBuffer> inputs;
    for (const Node& n : c.nodes) {
      if (n.kind != OpKind::kInput) continue;
      inputs.push_back(DeviceBuffer{mem.Upload(ToBytes(n.type.dtype, in[n.input_index])),
                                    gpu_test::ShapeOf(n.type, k.symbols),
                                    {},
                                    n.type.dtype});
    }
    v1::KernelPlan plan = gpu_test::PlanFor(c);
    std::vector<std::pair<Variant, Numerics>> runs;
    for (const Variant& v : VariantsToTry(c, k.group)) runs.push_back({v, Numerics::kFast});
    runs.push_back({PointwiseHeuristic(c, k.group), Numerics::kReference64});
    for (const auto& [v, numerics] : runs) {
      const bool yardstick = numerics == Numerics::kReference64;
      absl::StatusOr<KernelSpec> spec = EmitPointwise(c, k.group, v, numerics);
      ASSERT_TRUE(spec.ok()) << spec.status();
      absl::StatusOr<CompiledKernel> compiled = nvrtc.Compile(*spec, opts);
      ASSERT_TRUE(compiled.ok()) << compiled.status();
      plan.clear_kernels();
      *plan.add_kernels() = ToProto(*compiled, /*include_source=*/false);
      std::vector<DeviceBuffer> outputs = gpu_test::PoisonedOutputs(*gpu, mem, c, k.symbols, yardstick);
      absl::Status s = launcher.Launch(plan, inputs, outputs, nullptr);
      ASSERT_TRUE(s.ok()) << v.ToString() << ": " << s;
      ASSERT_EQ(gpu->cu->cuCtxSynchronize(), CUDA_SUCCESS) << v.ToString();
      std::vector<gpu_test::CheckedOutput> checked =
          gpu_test::CheckOutputs(mem, outputs, *exact, *eager, kSlack, yardstick);
      for (size_t j = 0; j < checked.size(); ++j) {
        const OutputCheck& check = checked[j].check;
        std::printf("%-44s %-44s %-4zu %-10.3g %-10.3g %s\n", k.name.substr(0, 44).c_str(),
                    (yardstick ? std::string("reference64") : v.ToString()).c_str(), j,
                    check.max_abs_err, checked[j].eager_err, check.ok ? "ok" : check.message.c_str());
        EXPECT_TRUE(check.ok) << v.ToString() << ": " << check.message;
      }
    }
  }
}

TEST(GpuLayoutTest, NamedChainsMatchReference) { MatchReference(NamedCases()); }

TEST(GpuLayoutTest, RandomChainsWithViewsMatchReference) { MatchReference(RandomCases()); }

}  // namespace
}  // namespace kfuse
