// Property test of the whole kernel path: random element-wise chains (every
// dtype, odd sizes, broadcasting, symbolic sizes, several outputs), each
// generated under the heuristic and a few other variants, compiled with
// NVRTC for this GPU, launched through the C++ Launcher on random inputs and
// compared with the CPU fp64 evaluator, with eager PyTorch's error (the CPU
// kEager evaluator) as the yardstick. Without a GPU the GPU tests skip; the
// CPU half (generate, compile, evaluate) runs everywhere.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/launcher.h"
#include "codegen/evaluate.h"
#include "codegen/numeric.h"
#include "codegen/generators.h"
#include "codegen/partition.h"
#include "codegen/pointwise.h"
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

using testing_chains::MakeRandomChain;
using testing_chains::RandomChain;
using testing_chains::RandomInputs;

// From 25 on, random chains carry layout views; from kFirstLong on, the
// chains are long ones (LongChain).
constexpr int kFirstLong = 45;
constexpr int kChains = 48;

// v = x, then 40 times v = tanh(sin(v) * y): 120 ops, 40 sins, in f32, f16
// or bf16. Past 64 ops the element function is called out of line, past 8
// sins the accurate sin too (ElementFnQualifier, kOutlinedMath).
RandomChain LongChain(int index) {
  const DType t = std::vector<DType>{DType::kF32, DType::kF16, DType::kBF16}[index % 3];
  Chain c;
  const int32_t x = c.AddInput(TensorType{t, {Dim::Static(100003)}});
  const int32_t y = c.AddInput(TensorType{t, {Dim::Static(100003)}});
  int32_t v = x;
  for (int k = 0; k < 40; ++k) {
    v = c.AddOp(OpKind::kTanh, {c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kSin, {v}), y})});
  }
  c.outputs = {v};
  c.output_names = {"out0"};
  absl::StatusOr<Chain> valid = Validate(c);
  KFUSE_CHECK(valid.ok());
  RandomChain rc;
  rc.chain = *std::move(valid);
  rc.name = absl::StrCat(index, ": long ", std::string(DTypeName(t)), "[100003] x2 -> 40 x tanh(sin(v) * y)");
  return rc;
}

RandomChain ChainAt(int index) { return index < kFirstLong ? MakeRandomChain(index) : LongChain(index); }
constexpr double kSlack = 2.0;

KernelGroup OnlyGroup(const Chain& c) {
  absl::StatusOr<Partition> p = PartitionChain(c);
  KFUSE_CHECK(p.ok() && p->kernels.size() == 1);
  return p->kernels[0];
}

using gpu_test::SpreadVariants;

std::string ToBytes(DType t, const std::vector<double>& v) {
  std::string out(v.size() * DTypeBytes(t), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    char* p = out.data() + i * DTypeBytes(t);
    switch (t) {
      case DType::kF32: {
        float f = static_cast<float>(v[i]);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::kF16: {
        uint16_t h = FloatToHalf(static_cast<float>(v[i]));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kBF16: {
        uint16_t h = FloatToBF16(static_cast<float>(v[i]));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kI32: {
        int32_t x = static_cast<int32_t>(v[i]);
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::kBool:
        *p = v[i] != 0;
        break;
      default:
        KFUSE_CHECK(false);
    }
  }
  return out;
}

// A random chain's pointwise kernels: one, or one for each group of outputs
// whose shapes nest (PartitionChain).
std::vector<KernelGroup> PointwiseGroups(const Chain& c) {
  absl::StatusOr<Partition> p = PartitionChain(c);
  KFUSE_CHECK(p.ok() && !p->kernels.empty() && p->intermediates.empty());
  for (const KernelGroup& g : p->kernels) KFUSE_CHECK(g.family == Family::kPointwise);
  return p->kernels;
}

// The i-th variant tried for `g` (its last one past the end of its list).
const Variant& VariantAt(const std::vector<Variant>& variants, size_t i) {
  return variants[std::min(i, variants.size() - 1)];
}

// The CPU half: every random chain validates, partitions into pointwise
// kernels (one, or one per group of outputs whose shapes nest), each of
// which generates under every variant tried and compiles (heuristic); the
// chain evaluates. Runs without a GPU.
TEST(RandomChainsTest, GenerateCompileAndEvaluateOnCpu) {
  NvrtcCompiler nvrtc;
  int split = 0;
  for (int i = 0; i < kChains; ++i) {
    RandomChain rc = ChainAt(i);
    SCOPED_TRACE(rc.name + "\n" + ToString(rc.chain));
    const std::vector<KernelGroup> groups = PointwiseGroups(rc.chain);
    split += groups.size() > 1;
    for (const KernelGroup& g : groups) {
      std::vector<Variant> variants = SpreadVariants(rc.chain, g);
      EXPECT_GE(variants.size(), 1u);
      for (const Variant& v : variants) {
        absl::StatusOr<KernelSpec> spec = EmitFamily(rc.chain, g, v, Numerics::kFast);
        ASSERT_TRUE(spec.ok()) << v.ToString() << ": " << spec.status();
        // A long chain's element function is called, not inlined nine times.
        EXPECT_EQ(spec->source.find("__noinline__ void kf_elem") != std::string::npos, i >= kFirstLong);
        // f32 sins are the accurate ones (16-bit ones keep kf_sin's MUFU path).
        EXPECT_EQ(spec->source.find("kf_sinf_ol(") != std::string::npos, i >= kFirstLong && i % 3 == 0);
      }
      CompileOptions opts;
      opts.arch = "sm_90";
      absl::StatusOr<CompiledKernel> k =
          nvrtc.Compile(*EmitFamily(rc.chain, g, variants[0], Numerics::kFast), opts);
      EXPECT_TRUE(k.ok()) << k.status();
    }
    auto in = RandomInputs(rc, 1000 + i);
    auto exact = Evaluate(rc.chain, in, rc.symbol_values, EvalMode::kExact64);
    ASSERT_TRUE(exact.ok()) << exact.status();
    EXPECT_EQ(exact->size(), rc.chain.outputs.size());
  }
  std::printf("%d of %d random chains are several kernels (outputs whose shapes do not nest)\n",
              split, kChains);
}

using gpu_test::DeviceMemory;
using gpu_test::PlanFor;
using gpu_test::ShapeOf;
using gpu_test::Gpu;
using gpu_test::OpenGpu;

TEST(GpuChainsTest, RandomChainsMatchReference) {
  absl::StatusOr<Gpu> gpu = OpenGpu();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status();
  NvrtcCompiler nvrtc;
  Launcher launcher(*gpu->cu);
  CompileOptions opts;
  opts.arch = gpu->arch;
  std::printf("%-60s %-44s %-4s %-10s %-10s %s\n", "chain", "variant", "out", "max err",
              "eager err", "verdict");
  for (int i = 0; i < kChains; ++i) {
    RandomChain rc = ChainAt(i);
    SCOPED_TRACE(rc.name + "\n" + ToString(rc.chain));
    const Chain& c = rc.chain;
    const std::vector<KernelGroup> groups = PointwiseGroups(c);
    auto in = RandomInputs(rc, 2000 + i);
    auto exact = Evaluate(c, in, rc.symbol_values, EvalMode::kExact64);
    auto eager = Evaluate(c, in, rc.symbol_values, EvalMode::kEager);
    ASSERT_TRUE(exact.ok() && eager.ok());
    DeviceMemory mem(gpu->cu);
    std::vector<DeviceBuffer> inputs;
    for (const Node& n : c.nodes) {
      if (n.kind != OpKind::kInput) continue;
      inputs.push_back(DeviceBuffer{mem.Upload(ToBytes(n.type.dtype, in[n.input_index])),
                                    ShapeOf(n.type, rc.symbol_values),
                                    {},
                                    n.type.dtype});
    }
    v1::KernelPlan plan = PlanFor(c);
    // Every kernel of the plan at its i-th variant, for as many rounds as
    // the longest list.
    std::vector<std::vector<Variant>> spread;
    size_t rounds = 0;
    for (const KernelGroup& g : groups) {
      spread.push_back(SpreadVariants(c, g));
      rounds = std::max(rounds, spread.back().size());
    }
    for (size_t round = 0; round < rounds; ++round) {
      plan.clear_kernels();
      std::string variant_names;
      for (size_t gi = 0; gi < groups.size(); ++gi) {
        const Variant& v = VariantAt(spread[gi], round);
        absl::StrAppend(&variant_names, gi == 0 ? "" : " + ", v.ToString());
        absl::StatusOr<KernelSpec> spec = EmitFamily(c, groups[gi], v, Numerics::kFast);
        ASSERT_TRUE(spec.ok()) << spec.status();
        absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
        ASSERT_TRUE(k.ok()) << k.status();
        *plan.add_kernels() = ToProto(*k, /*include_source=*/false);
      }
      std::vector<DeviceBuffer> outputs = gpu_test::PoisonedOutputs(*gpu, mem, c, rc.symbol_values);
      absl::Status s = launcher.Launch(plan, inputs, outputs, nullptr);
      ASSERT_TRUE(s.ok()) << variant_names << ": " << s;
      ASSERT_EQ(gpu->cu->cuCtxSynchronize(), CUDA_SUCCESS) << variant_names;
      std::vector<gpu_test::CheckedOutput> checked = gpu_test::CheckOutputs(mem, outputs, *exact, *eager, kSlack);
      for (size_t j = 0; j < checked.size(); ++j) {
        const OutputCheck& check = checked[j].check;
        std::printf("%-60s %-44s %-4zu %-10.3g %-10.3g %s\n", rc.name.substr(0, 60).c_str(),
                    variant_names.c_str(), j, check.max_abs_err, checked[j].eager_err,
                    check.ok ? "ok" : check.message.c_str());
        EXPECT_TRUE(check.ok) << variant_names << ": " << check.message;
      }
    }
  }
}

// i64 arithmetic beside i32, bool and f32 values: positions far past i32,
// a product that wraps at 64 bits, a power past 2^53, the low bits of an
// i64 cast to i32, a Python int that f32 cannot hold. Inputs keep every intermediate within 2^53, where the
// CPU evaluator's doubles are exact; outputs past it round as the
// kernel's i64 read back as doubles does.
struct I64Case {
  Chain chain;
  std::vector<int64_t> syms = {4099};
  std::vector<std::vector<double>> inputs;
};

I64Case MakeI64Case() {
  Chain c;
  c.symbols.push_back(SymbolInfo{"n", 4099, 0});
  const std::vector<Dim> n = {Dim::Sym(0)};
  const int32_t x = c.AddInput(TensorType{DType::kI64, n});
  const int32_t y = c.AddInput(TensorType{DType::kI32, n});
  const int32_t b = c.AddInput(TensorType{DType::kBool, n});
  const int32_t f = c.AddInput(TensorType{DType::kF32, n});
  const int32_t pos = c.AddOp(OpKind::kSub, {c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kMul, {x, c.AddConstant(3)}), y}),
                                             c.AddConstant(7)});
  const int32_t big = c.AddOp(OpKind::kAdd, {c.AddCast(y, DType::kI64), c.AddConstant(2000000)});
  c.outputs = {
      pos,
      c.AddOp(OpKind::kMul, {x, x}),
      c.AddOp(OpKind::kMaximum, {c.AddOp(OpKind::kWhere, {b, pos, c.AddConstant(-5, DType::kI64)}),
                                 c.AddOp(OpKind::kNeg, {x})}),
      c.AddOp(OpKind::kPow, {big, c.AddConstant(3)}),
      c.AddOp(OpKind::kLt, {pos, x}),
      c.AddOp(OpKind::kAdd, {c.AddCast(pos, DType::kF32), f}),
      c.AddCast(c.AddOp(OpKind::kAdd, {pos, c.AddConstant(34359738368.0, DType::kI64)}), DType::kI32),
      c.AddOp(OpKind::kAbs, {c.AddOp(OpKind::kSub, {y, x})}),
      c.AddOp(OpKind::kAdd, {x, c.AddConstant(1099511627777.0)}),  // A Python int past f32's: 2^40 + 1.
  };
  for (size_t i = 0; i < c.outputs.size(); ++i) c.output_names.push_back(absl::StrCat("out", i));
  absl::StatusOr<Chain> valid = Validate(c);
  KFUSE_CHECK(valid.ok());
  I64Case k;
  k.chain = *std::move(valid);
  k.inputs.resize(4);
  for (int64_t i = 0; i < k.syms[0]; ++i) {
    const int64_t h = (i * 2654435761) % 17179869184;  // Up to 2^34.
    k.inputs[0].push_back(static_cast<double>(h - 8589934592 + i % 3));
    k.inputs[1].push_back(static_cast<double>((i * 7919) % 2001 - 1000));
    k.inputs[2].push_back(static_cast<double>((i * 31) % 5 < 2));
    k.inputs[3].push_back(RoundTo(DType::kF32, 0.25 * static_cast<double>(i % 97) - 12.0));
  }
  return k;
}

TEST(I64ChainsTest, GenerateCompileAndEvaluateOnCpu) {
  const I64Case k = MakeI64Case();
  const KernelGroup g = OnlyGroup(k.chain);
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = "sm_90";
  for (Numerics numerics : {Numerics::kFast, Numerics::kReference64}) {
    for (const Variant& v : SpreadVariants(k.chain, g)) {
      absl::StatusOr<KernelSpec> spec = EmitFamily(k.chain, g, v, numerics);
      ASSERT_TRUE(spec.ok()) << v.ToString() << ": " << spec.status();
      EXPECT_TRUE(nvrtc.Compile(*spec, opts).ok()) << v.ToString();
    }
  }
  auto exact = Evaluate(k.chain, k.inputs, k.syms, EvalMode::kExact64);
  ASSERT_TRUE(exact.ok()) << exact.status();
  // x * x wraps at 64 bits: element 1's x is -2^33 + 2654435762 % 2^34...,
  // checked against the product taken modulo 2^64 here.
  for (int64_t i = 0; i < 64; ++i) {
    const uint64_t xi = static_cast<uint64_t>(static_cast<int64_t>(k.inputs[0][i]));
    EXPECT_EQ((*exact)[1][i], static_cast<double>(static_cast<int64_t>(xi * xi))) << i;
  }
}

TEST(GpuChainsTest, I64ChainsMatchTheEvaluatorExactly) {
  absl::StatusOr<Gpu> gpu = OpenGpu();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status();
  const I64Case k = MakeI64Case();
  const Chain& c = k.chain;
  const KernelGroup g = OnlyGroup(c);
  auto exact = Evaluate(c, k.inputs, k.syms, EvalMode::kExact64);
  ASSERT_TRUE(exact.ok()) << exact.status();
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = gpu->arch;
  Launcher launcher(*gpu->cu);
  DeviceMemory mem(gpu->cu);
  const std::vector<DeviceBuffer> inputs = gpu_test::UploadInputs(mem, c, k.inputs, k.syms);
  for (const Variant& v : SpreadVariants(c, g)) {
    absl::StatusOr<KernelSpec> spec = EmitFamily(c, g, v, Numerics::kFast);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<CompiledKernel> compiled = nvrtc.Compile(*spec, opts);
    ASSERT_TRUE(compiled.ok()) << compiled.status();
    v1::KernelPlan plan = PlanFor(c);
    *plan.add_kernels() = ToProto(*compiled, /*include_source=*/false);
    std::vector<DeviceBuffer> outputs = gpu_test::PoisonedOutputs(*gpu, mem, c, k.syms);
    ASSERT_TRUE(launcher.Launch(plan, inputs, outputs, nullptr).ok()) << v.ToString();
    ASSERT_EQ(gpu->cu->cuCtxSynchronize(), CUDA_SUCCESS) << v.ToString();
    for (size_t j = 0; j < outputs.size(); ++j) {
      const DType t = c.nodes[c.outputs[j]].type.dtype;
      const int64_t count = k.syms[0];
      const std::vector<double> got = ToDouble(t, mem.Download(outputs[j].ptr, count * DTypeBytes(t)).data(), count);
      // A float output is the exact value rounded once to its dtype (the
      // kernel's one f32 add of an exact cast); integers are exact.
      std::vector<double> want = (*exact)[j];
      for (double& w : want) w = RoundTo(t, w);
      int64_t wrong = 0, first = -1;
      for (int64_t i = 0; i < count; ++i) {
        if (got[i] != want[i] && wrong++ == 0) first = i;
      }
      std::printf("i64 chain %-40s out%zu (%s): %lld of %lld differ\n", v.ToString().c_str(), j,
                  std::string(DTypeName(t)).c_str(), static_cast<long long>(wrong), static_cast<long long>(count));
      EXPECT_EQ(wrong, 0) << v.ToString() << " out" << j << ": first at " << first << " got "
                          << (first >= 0 ? got[first] : 0) << " want " << (first >= 0 ? want[first] : 0);
    }
  }
}

// y = x * 2 over f32[n]: one plan serves every n; the module loads once.
TEST(GpuChainsTest, SymbolicPlanServesManySizesAndLoadsOnce) {
  absl::StatusOr<Gpu> gpu = OpenGpu();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status();
  Chain raw;
  raw.symbols.push_back(SymbolInfo{"n", 1 << 20, 0});
  int32_t x = raw.AddInput(TensorType{DType::kF32, {Dim::Sym(0)}});
  raw.outputs.push_back(raw.AddOp(OpKind::kMul, {x, raw.AddConstant(2)}));
  absl::StatusOr<Chain> c = Validate(raw);
  ASSERT_TRUE(c.ok()) << c.status();
  KernelGroup g = OnlyGroup(*c);
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = gpu->arch;
  absl::StatusOr<CompiledKernel> k =
      nvrtc.Compile(*EmitPointwise(*c, g, PointwiseHeuristic(*c, g)), opts);
  ASSERT_TRUE(k.ok()) << k.status();
  v1::KernelPlan plan = PlanFor(*c);
  *plan.add_kernels() = ToProto(*k, false);
  Launcher launcher(*gpu->cu);
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000003}}) {
    DeviceMemory mem(gpu->cu);
    std::vector<double> xs(n);
    for (int64_t i = 0; i < n; ++i) xs[i] = static_cast<double>(i % 1000) - 500.25;
    std::vector<DeviceBuffer> in = {{mem.Upload(ToBytes(DType::kF32, xs)), {n}, {}, DType::kF32}};
    std::vector<DeviceBuffer> out = {{mem.Alloc(n * 4), {n}, {}, DType::kF32}};
    ASSERT_TRUE(launcher.Launch(plan, in, out, nullptr).ok());
    ASSERT_EQ(gpu->cu->cuCtxSynchronize(), CUDA_SUCCESS);
    std::vector<double> got = ToDouble(DType::kF32, mem.Download(out[0].ptr, n * 4).data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 2 * xs[i]) << "n=" << n << " i=" << i;
  }
  EXPECT_EQ(launcher.cached_modules(), 1);
}

// A vectorised kernel's alignment precondition refuses a misaligned input.
TEST(GpuChainsTest, LauncherRefusesMisalignedInput) {
  absl::StatusOr<Gpu> gpu = OpenGpu();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status();
  Chain raw;
  int32_t x = raw.AddInput(TensorType{DType::kF32, {Dim::Static(4096)}});
  raw.outputs.push_back(raw.AddOp(OpKind::kRelu, {x}));
  absl::StatusOr<Chain> c = Validate(raw);
  ASSERT_TRUE(c.ok());
  KernelGroup g = OnlyGroup(*c);
  absl::StatusOr<KernelSpec> spec = EmitPointwise(*c, g, PointwiseHeuristic(*c, g));
  ASSERT_TRUE(spec.ok());
  bool has_aligned = false;
  for (const Precondition& p : spec->preconditions)
    has_aligned |= p.kind == Precondition::Kind::kAligned;
  ASSERT_TRUE(has_aligned) << "the heuristic f32 kernel should use vector loads";
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = gpu->arch;
  absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
  ASSERT_TRUE(k.ok());
  v1::KernelPlan plan = PlanFor(*c);
  *plan.add_kernels() = ToProto(*k, false);
  DeviceMemory mem(gpu->cu);
  CUdeviceptr base = mem.Alloc(4097 * 4);
  std::vector<DeviceBuffer> in = {{base + 4, {4096}, {}, DType::kF32}};
  std::vector<DeviceBuffer> out = {{mem.Alloc(4096 * 4), {4096}, {}, DType::kF32}};
  Launcher launcher(*gpu->cu);
  absl::Status s = launcher.Launch(plan, in, out, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("launch refused"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace kfuse
