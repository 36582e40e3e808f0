// i64 reductions and views: sums (exact, wrapping at 64 bits), max and min
// along rows, over outer axes and over every axis, of i64 inputs and of
// bools and i32 values cast to i64 (torch's mask.sum(-1) and counts.sum(0));
// an i64 iota inside a row kernel; i64 values through layout views; iotas in
// element-wise kernels; and totals of 1-D tensors, rows sliced over the grid
// (f32 and i64). Each chain's plan is launched with every kernel under a
// set of variants that covers each value of each of its family's
// parameters, and every integer output is compared with the CPU evaluator
// exactly, every float one within eager's error of fp64. Without a GPU the
// GPU test skips; the CPU half (partition, generate, compile, evaluate)
// runs everywhere.
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "clients/launcher.h"
#include "codegen/canonicalize.h"
#include "codegen/evaluate.h"
#include "codegen/generators.h"
#include "codegen/partition.h"
#include "codegen/validate.h"
#include "gtest/gtest.h"
#include "tests/gpu_test_util.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

using gpu_test::DeviceMemory;
using gpu_test::Gpu;
using gpu_test::OpenGpu;
using gpu_test::PlanOfKernels;
using gpu_test::PlanShape;
using gpu_test::SpreadVariants;

constexpr double k2to62 = 4611686018427387904.0;

struct I64Case {
  std::string name;
  Chain chain;
  std::vector<int64_t> syms;
  std::vector<std::vector<double>> inputs;
  // i64 inputs hold 2^62 in their first row and column, whose sums wrap.
  // Only where those values go straight into sums, max and min: the
  // evaluator's other values are doubles, exact within 2^53 only.
  bool wraps = false;
};

int32_t Reduce(Chain& c, OpKind k, int32_t x, std::vector<int64_t> axes, bool keepdim = false) {
  const int32_t r = c.AddOp(k, {x});
  c.nodes[r].axes = std::move(axes);
  c.nodes[r].keepdim = keepdim;
  return r;
}

I64Case Finish(std::string name, Chain c, std::vector<int64_t> syms, bool wraps = false) {
  for (size_t i = 0; i < c.outputs.size(); ++i) c.output_names.push_back(absl::StrCat("out", i));
  // As the service plans it: canonical (a reduction over every axis split
  // into rows, then the row results), validated again.
  absl::StatusOr<Chain> valid = Validate(c);
  KFUSE_CHECK(valid.ok());
  valid = Validate(Canonicalize(*valid));
  KFUSE_CHECK(valid.ok());
  I64Case k{std::move(name), *std::move(valid), std::move(syms), {}, wraps};
  k.inputs.resize(k.chain.num_inputs());
  return k;
}

// Values of the inputs of `k`: i64 ones of magnitude up to 2^40 (sums pass
// 2^32 from a few terms on), where the case wraps a first row and column of
// 2^62 (their sums wrap), and in [-10, 1014) for a column of one (lengths);
// bools about two thirds true, i32 ones over all of i32, f32 ones in
// [-50, 50).
void FillInputs(I64Case& k) {
  for (const Node& n : k.chain.nodes) {
    if (n.kind != OpKind::kInput) continue;
    const int64_t count = static_cast<int64_t>(Elements(n.type, k.syms));
    const int64_t width = n.type.rank() > 1 ? n.type.shape.back().size : count;
    std::vector<double>& v = k.inputs[n.input_index];
    for (int64_t i = 0; i < count; ++i) {
      const uint64_t h = (static_cast<uint64_t>(i) + 17 * n.input_index) * 0x9E3779B97F4A7C15ull;
      const bool wraps = k.wraps && (n.type.rank() > 1 ? i < width || i % width == 0 : i == 0);
      switch (n.type.dtype) {
        case DType::kI64:
          if (width == 1 && n.type.rank() > 1) {
            v.push_back(static_cast<double>(static_cast<int64_t>(h >> 54) - 10));
          } else {
            v.push_back(wraps ? k2to62 : static_cast<double>(static_cast<int64_t>(h >> 23) - (int64_t{1} << 40)));
          }
          break;
        case DType::kF32: v.push_back(RoundTo(DType::kF32, static_cast<double>(h >> 40) / 16777216.0 * 100 - 50)); break;
        case DType::kI32: v.push_back(static_cast<double>(static_cast<int32_t>(h >> 32))); break;
        case DType::kBool: v.push_back((h >> 60) < 11 ? 1 : 0); break;
        default: KFUSE_CHECK(false);
      }
    }
  }
}

std::vector<I64Case> Cases() {
  std::vector<I64Case> out;
  {  // Rows of 4096 (a symbolic count): sum, max, min, a sum of an i64
     // expression of i32 values (terms up to 2^47).
    Chain c;
    c.symbols.push_back(SymbolInfo{"R", 37, 0});
    const int32_t x = c.AddInput(TensorType{DType::kI64, {Dim::Sym(0), Dim::Static(4096)}});
    const int32_t y = c.AddInput(TensorType{DType::kI32, {Dim::Sym(0), Dim::Static(4096)}});
    c.outputs = {Reduce(c, OpKind::kReduceSum, x, {-1}), Reduce(c, OpKind::kReduceMax, x, {-1}),
                 Reduce(c, OpKind::kReduceMin, x, {-1}),
                 Reduce(c, OpKind::kReduceSum,
                        c.AddOp(OpKind::kSub, {c.AddOp(OpKind::kMul, {c.AddCast(y, DType::kI64), c.AddConstant(65536)}), y}),
                        {-1})};
    out.push_back(Finish("rows of 4096", std::move(c), {37}, /*wraps=*/true));
  }
  {  // An odd width: a mask's length in i64 and in i32, its last set index
     // (an i64 iota), the row's span of positions broadcast back.
    Chain c;
    c.symbols.push_back(SymbolInfo{"R", 29, 0});
    const std::vector<Dim> shape = {Dim::Sym(0), Dim::Static(1001)};
    const int32_t m = c.AddInput(TensorType{DType::kBool, shape});
    const int32_t p = c.AddInput(TensorType{DType::kI64, shape});
    const int32_t iota = c.AddOp(OpKind::kIota, {});
    c.nodes[iota].shape = shape;
    c.nodes[iota].axis = 1;
    c.nodes[iota].dtype = DType::kI64;
    const int32_t span = c.AddOp(OpKind::kSub, {Reduce(c, OpKind::kReduceMax, p, {-1}, true),
                                                Reduce(c, OpKind::kReduceMin, p, {-1}, true)});
    c.outputs = {Reduce(c, OpKind::kReduceSum, c.AddCast(m, DType::kI64), {-1}), Reduce(c, OpKind::kReduceSum, m, {-1}),
                 Reduce(c, OpKind::kReduceMax, c.AddOp(OpKind::kWhere, {m, iota, c.AddConstant(-1)}), {-1}),
                 c.AddOp(OpKind::kSub, {p, span})};
    out.push_back(Finish("width 1001 masks and an iota", std::move(c), {29}));
  }
  {  // Over an outer axis: i64 column sums and maxima, i32 counts summed in i64.
    Chain c;
    c.symbols.push_back(SymbolInfo{"N", 5003, 0});
    const int32_t x = c.AddInput(TensorType{DType::kI64, {Dim::Sym(0), Dim::Static(96)}});
    const int32_t n = c.AddInput(TensorType{DType::kI32, {Dim::Sym(0), Dim::Static(96)}});
    c.outputs = {Reduce(c, OpKind::kReduceSum, x, {0}), Reduce(c, OpKind::kReduceMax, x, {0}),
                 Reduce(c, OpKind::kReduceSum, c.AddCast(n, DType::kI64), {0})};
    out.push_back(Finish("columns", std::move(c), {5003}, /*wraps=*/true));
  }
  {  // Over every axis: a row kernel, then one row of the per-row values.
    Chain c;
    const int32_t x = c.AddInput(TensorType{DType::kI64, {Dim::Static(300), Dim::Static(1027)}});
    c.outputs = {Reduce(c, OpKind::kReduceSum, x, {}), Reduce(c, OpKind::kReduceMin, x, {})};
    out.push_back(Finish("every axis", std::move(c), {}));
  }
  {  // Views: positions expanded over a batch, offset, transposed; a column of them.
    Chain c;
    c.symbols.push_back(SymbolInfo{"B", 6, 0});
    const int32_t p = c.AddInput(TensorType{DType::kI64, {Dim::Static(1000)}});
    const int32_t o = c.AddInput(TensorType{DType::kI32, {Dim::Sym(0), Dim::Static(1000)}});
    const int32_t e = c.AddOp(OpKind::kExpand, {p});
    c.nodes[e].shape = {Dim::Sym(0), Dim::Static(1000)};
    const int32_t t = c.AddOp(OpKind::kPermute, {c.AddOp(OpKind::kAdd, {e, o})});
    c.nodes[t].axes = {1, 0};
    const int32_t r = c.AddOp(OpKind::kReshape, {p});
    c.nodes[r].shape = {Dim::Static(1000), Dim::Static(1)};
    c.outputs = {t, c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kAdd, {t, r}), c.AddConstant(5)})};
    out.push_back(Finish("views", std::move(c), {6}));
  }
  {  // Slices and a concat: halves of each row swapped, one negated.
    Chain c;
    c.symbols.push_back(SymbolInfo{"B", 7, 0});
    const int32_t p = c.AddInput(TensorType{DType::kI64, {Dim::Sym(0), Dim::Static(2048)}});
    auto slice = [&](int64_t start) {
      const int32_t s = c.AddOp(OpKind::kSlice, {p});
      c.nodes[s].axis = 1;
      c.nodes[s].start = start;
      c.nodes[s].stop = start + 1024;
      c.nodes[s].step = 1;
      return s;
    };
    const int32_t cat = c.AddOp(OpKind::kConcat, {c.AddOp(OpKind::kNeg, {slice(1024)}), slice(0)});
    c.nodes[cat].axis = 1;
    c.outputs = {cat};
    out.push_back(Finish("slices and a concat", std::move(c), {7}));
  }
  {  // Iotas in an element-wise kernel: a mask by lengths, an iota through a
     // permute and one through a strided slice, a float iota.
    Chain c;
    c.symbols.push_back(SymbolInfo{"B", 6, 0});
    const Dim b = Dim::Sym(0), w = Dim::Static(1000);
    const int32_t lengths = c.AddInput(TensorType{DType::kI64, {b, Dim::Static(1)}});
    const int32_t x = c.AddInput(TensorType{DType::kF32, {b, w}});
    auto iota = [&](std::vector<Dim> shape, int64_t axis, DType t) {
      const int32_t i = c.AddOp(OpKind::kIota, {});
      c.nodes[i].shape = std::move(shape);
      c.nodes[i].axis = axis;
      c.nodes[i].dtype = t;
      return i;
    };
    const int32_t mask = c.AddOp(OpKind::kLt, {iota({Dim::Static(1), w}, 1, DType::kI64), lengths});
    const int32_t t = c.AddOp(OpKind::kPermute, {iota({w, b}, 0, DType::kI64)});
    c.nodes[t].axes = {1, 0};
    const int32_t odd = c.AddOp(OpKind::kSlice, {iota({Dim::Static(2001)}, 0, DType::kI64)});
    c.nodes[odd].axis = 0;
    c.nodes[odd].start = 1;
    c.nodes[odd].stop = 2001;
    c.nodes[odd].step = 2;
    c.outputs = {c.AddOp(OpKind::kWhere, {mask, x, c.AddConstant(0)}), mask,
                 c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kMul, {t, c.AddConstant(7)}), odd}),
                 c.AddOp(OpKind::kAdd, {iota({b, w}, 0, DType::kF32), c.AddOp(OpKind::kMul, {x, c.AddConstant(0.5)})})};
    out.push_back(Finish("iotas element-wise", std::move(c), {6}));
  }
  for (int64_t n : {int64_t{4194304}, int64_t{1000003}}) {
    // 1-D totals: one row, sliced over the grid (in scalars at an odd size).
    Chain c;
    const int32_t x = c.AddInput(TensorType{DType::kF32, {Dim::Static(n)}});
    const int32_t p = c.AddInput(TensorType{DType::kI64, {Dim::Static(n)}});
    c.outputs = {Reduce(c, OpKind::kReduceSum, x, {0}), Reduce(c, OpKind::kReduceMax, x, {0}),
                 Reduce(c, OpKind::kReduceMean, c.AddOp(OpKind::kMul, {x, x}), {0}),
                 Reduce(c, OpKind::kReduceSum, p, {0})};
    out.push_back(Finish(absl::StrCat("1-D totals of ", n), std::move(c), {}));
  }
  for (I64Case& k : out) FillInputs(k);
  return out;
}

// The heuristic, then each variant of the space that gives some parameter
// a value none before it had.
std::vector<Variant> CoveringVariants(const Chain& c, const KernelGroup& g) {
  std::vector<Variant> out = {FamilyHeuristic(c, g)};
  std::set<std::pair<std::string, int64_t>> seen(out[0].params.begin(), out[0].params.end());
  for (const Variant& v : FamilySpace(c, g)) {
    bool fresh = false;
    for (const auto& kv : v.params) fresh = seen.insert(kv).second || fresh;
    if (fresh) out.push_back(v);
  }
  return out;
}


TEST(I64ReduceTest, PartitionGenerateCompileAndEvaluateOnCpu) {
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = "sm_90";
  std::set<Family> families;
  for (const I64Case& k : Cases()) {
    SCOPED_TRACE(k.name);
    absl::StatusOr<Partition> part = PartitionChain(k.chain);
    ASSERT_TRUE(part.ok()) << part.status();
    std::printf("%-32s %s\n", k.name.c_str(), PlanShape(*part).c_str());
    for (const KernelGroup& g : part->kernels) {
      families.insert(g.family);
      std::printf("  %s: %zu covering variants of %zu\n", std::string(FamilyName(g.family)).c_str(),
                  CoveringVariants(k.chain, g).size(), FamilySpace(k.chain, g).size());
      for (const Variant& v : SpreadVariants(k.chain, g)) {
        absl::StatusOr<KernelSpec> spec = EmitFamily(k.chain, g, v);
        ASSERT_TRUE(spec.ok()) << v.ToString() << ": " << spec.status();
        EXPECT_TRUE(nvrtc.Compile(*spec, opts).ok()) << v.ToString();
      }
      absl::StatusOr<KernelSpec> ref = EmitFamily(k.chain, g, FamilyHeuristic(k.chain, g), Numerics::kReference64);
      ASSERT_TRUE(ref.ok()) << ref.status();
      EXPECT_TRUE(nvrtc.Compile(*ref, opts).ok());
    }
    EXPECT_TRUE(Evaluate(k.chain, k.inputs, k.syms, EvalMode::kExact64).ok());
  }
  // Rows, outer axes and views each reach their own family.
  EXPECT_TRUE(families.count(Family::kRowReduction) && families.count(Family::kReduction) &&
              families.count(Family::kPointwise));
}

TEST(GpuI64ReduceTest, CoveringVariantsMatchTheEvaluator) {
  absl::StatusOr<Gpu> gpu = OpenGpu();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status();
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = gpu->arch;
  Launcher launcher(*gpu->cu);
  for (const I64Case& k : Cases()) {
    SCOPED_TRACE(k.name);
    const Chain& c = k.chain;
    absl::StatusOr<Partition> part = PartitionChain(c);
    ASSERT_TRUE(part.ok()) << part.status();
    auto exact = Evaluate(c, k.inputs, k.syms, EvalMode::kExact64);
    auto eager = Evaluate(c, k.inputs, k.syms, EvalMode::kEager);
    ASSERT_TRUE(exact.ok() && eager.ok()) << exact.status() << eager.status();
    DeviceMemory mem(gpu->cu);
    const std::vector<DeviceBuffer> inputs = gpu_test::UploadInputs(mem, c, k.inputs, k.syms);
    // Runs: every kernel at its heuristic, then each kernel through its
    // covering variants (the others at their heuristic), then the fp64
    // yardstick's plan, whose integers are written as doubles.
    std::vector<Variant> seeds;
    for (const KernelGroup& g : part->kernels) seeds.push_back(FamilyHeuristic(c, g));
    std::vector<std::pair<std::vector<Variant>, std::string>> runs = {{seeds, "heuristic"}};
    for (size_t g = 0; g < part->kernels.size(); ++g) {
      std::vector<Variant> covering = CoveringVariants(c, part->kernels[g]);
      for (size_t j = 1; j < covering.size(); ++j) {
        runs.push_back({seeds, absl::StrCat("k", g, " ", covering[j].ToString())});
        runs.back().first[g] = covering[j];
      }
    }
    runs.push_back({seeds, "fp64 yardstick"});
    for (const auto& [variants, label] : runs) {
      const bool f64 = label == "fp64 yardstick";
      std::vector<CompiledKernel> kernels;
      for (size_t g = 0; g < part->kernels.size(); ++g) {
        absl::StatusOr<KernelSpec> spec =
            EmitFamily(c, part->kernels[g], variants[g], f64 ? Numerics::kReference64 : Numerics::kFast);
        ASSERT_TRUE(spec.ok()) << label << ": " << spec.status();
        absl::StatusOr<CompiledKernel> kernel = nvrtc.Compile(*spec, opts);
        ASSERT_TRUE(kernel.ok()) << label << ": " << kernel.status();
        kernels.push_back(*std::move(kernel));
      }
      absl::StatusOr<v1::KernelPlan> plan = PlanOfKernels(c, *part, kernels, f64);
      ASSERT_TRUE(plan.ok()) << plan.status();
      std::vector<DeviceBuffer> outputs = gpu_test::PoisonedOutputs(*gpu, mem, c, k.syms, f64);
      ASSERT_TRUE(launcher.Launch(*plan, inputs, outputs, nullptr).ok()) << label;
      ASSERT_EQ(gpu->cu->cuCtxSynchronize(), CUDA_SUCCESS) << label;
      const std::vector<gpu_test::CheckedOutput> checked =
          gpu_test::CheckOutputs(mem, outputs, *exact, *eager, /*slack=*/2.0, f64);
      for (size_t j = 0; j < outputs.size(); ++j) {
        if (IsFloat(c.nodes[c.outputs[j]].type.dtype)) {
          const OutputCheck& check = checked[j].check;
          std::printf("%-32s %-56s out%zu: %.3g from fp64 (eager %.3g) %s\n", k.name.c_str(), label.c_str(), j,
                      check.max_abs_err, checked[j].eager_err, check.ok ? "ok" : check.message.c_str());
          EXPECT_TRUE(check.ok) << label << " out" << j << ": " << check.message;
          continue;
        }
        const DType t = f64 ? DType::kF64 : c.nodes[c.outputs[j]].type.dtype;
        const std::vector<double>& want = (*exact)[j];
        const int64_t count = static_cast<int64_t>(want.size());
        const std::vector<double> got = ToDouble(t, mem.Download(outputs[j].ptr, count * DTypeBytes(t)).data(), count);
        int64_t wrong = 0, first = -1;
        for (int64_t i = 0; i < count; ++i) {
          if (got[i] != want[i] && wrong++ == 0) first = i;
        }
        std::printf("%-32s %-56s out%zu: %lld of %lld differ\n", k.name.c_str(), label.c_str(), j,
                    static_cast<long long>(wrong), static_cast<long long>(count));
        EXPECT_EQ(wrong, 0) << label << " out" << j << ": first at " << first << " got "
                            << (first >= 0 ? got[first] : 0) << " want " << (first >= 0 ? want[first] : 0);
      }
    }
  }
}

}  // namespace
}  // namespace kfuse
