// GPU property test of the matmul family: linear layers (bias + activation,
// the weight row-major or as nn.Linear keeps it), few rows with split K, a
// symbolic row count, a batched product with a residual, and softmax or
// LayerNorm of narrow products in the epilogue, at sizes that leave partial
// tiles on every edge. Every variant of the space is compiled
// with NVRTC for this GPU, launched through the C++ Launcher (workspaces
// included) and compared with the CPU fp64 evaluator, with eager PyTorch's
// error (the CPU kEager evaluator) as the yardstick; so are both yardstick
// kernels the tuner checks against. Skips without a GPU.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/launcher.h"
#include "codegen/analysis.h"
#include "codegen/evaluate.h"
#include "codegen/generators.h"
#include "codegen/matmul.h"
#include "codegen/attention_test_chains.h"
#include "codegen/matmul_test_chains.h"
#include "codegen/numeric.h"
#include "codegen/partition.h"
#include "gtest/gtest.h"
#include "service/convert.h"
#include "tests/gpu_test_util.h"
#include "tuner/check.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

constexpr double kSlack = 2.0;

using gpu_test::DeviceMemory;
using gpu_test::Gpu;
using gpu_test::EagerError;
using gpu_test::OpenGpu;
using gpu_test::ShapeOf;
using matmul_test::Weight;

// Fresh inputs in [-2, 2], rounded to their dtype.
std::vector<std::vector<double>> Inputs(const Chain& c, const std::vector<int64_t>& syms,
                                        unsigned seed) {
  return gpu_test::UniformInputs(c, syms, seed, -2, 2);
}

TEST(GpuMatmulTest, EveryVariantMatchesReference) {
  absl::StatusOr<Gpu> gpu = OpenGpu();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status();
  NvrtcCompiler nvrtc;
  Launcher launcher(*gpu->cu);
  CompileOptions opts;
  opts.arch = gpu->arch;
  struct Case {
    std::string name;
    Chain chain;
    int64_t rows;  // The symbol's value, when the chain has one.
  };
  const std::vector<Case> cases = {
      {"gemm_bf16_edges", matmul_test::Linear(DType::kBF16, 200, 264, 520), 0},
      {"gemm_f16_linear_relu", matmul_test::Linear(DType::kF16, 384, 520, 256, Weight::kLinear,
                                                   OpKind::kRelu), 0},
      {"odd_n_bf16_linear", matmul_test::Linear(DType::kBF16, 100, 263, 256, Weight::kLinear), 0},
      {"few_rows_bf16_splitk", matmul_test::Linear(DType::kBF16, 16, 1024, 4096), 0},
      {"tens_of_rows_bf16", matmul_test::Linear(DType::kBF16, 48, 520, 1024), 0},
      {"one_row_bf16_linear", matmul_test::Linear(DType::kBF16, 1, 520, 2048, Weight::kLinear), 0},
      {"sym_rows_bf16_silu", matmul_test::Linear(DType::kBF16, -256, 136, 264, Weight::kLinear,
                                                 OpKind::kSilu), 37},
      {"batched_residual_bf16", matmul_test::BatchedResidual(DType::kBF16, 3, 72, 136, 96), 0},
      // Streamed: rows, columns and K short of a tile or a step.
      {"batched_few_rows_bf16", matmul_test::BatchedResidual(DType::kBF16, 3, 5, 136, 104), 0},
      {"few_rows_f16_linear", matmul_test::Linear(DType::kF16, 40, 200, 1000, Weight::kLinear), 0},
      // More than 65535 column tiles of 16 (the yardsticks' old grid.y).
      {"wide_n_bf16", matmul_test::Linear(DType::kBF16, 3, 1048600, 40), 0},
      // Row reductions in the epilogue: softmax and LayerNorm of narrow
      // products (a per-row output, odd N, few rows with split K).
      {"softmax_in_epilogue_bf16", matmul_test::SoftmaxOfProduct(DType::kBF16, 200, 136, 264), 0},
      {"softmax_whole_row_warps_bf16", matmul_test::SoftmaxOfProduct(DType::kBF16, 300, 120, 256),
       0},
      {"few_rows_softmax_bf16", matmul_test::SoftmaxOfProduct(DType::kBF16, 16, 256, 2048), 0},
      {"layer_norm_in_epilogue_f16",
       matmul_test::ProductLayerNorm(DType::kF16, 300, 40, 512, Weight::kLinear), 0},
      {"layer_norm_odd_n_bf16",
       matmul_test::ProductLayerNorm(DType::kBF16, 100, 63, 256, Weight::kLinear), 0},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    const Chain& c = tc.chain;
    const std::vector<int64_t> syms(c.symbols.size(), tc.rows);
    const KernelGroup g = matmul_test::WholeGroup(c);
    auto in = Inputs(c, syms, static_cast<unsigned>(tc.name.size() * 7919));
    auto exact = Evaluate(c, in, syms, EvalMode::kExact64);
    auto eager = Evaluate(c, in, syms, EvalMode::kEager);
    ASSERT_TRUE(exact.ok() && eager.ok());
    DeviceMemory mem(gpu->cu);
    std::vector<DeviceBuffer> inputs = gpu_test::UploadInputs(mem, c, in, syms);
    gpu_test::KernelCheck check{&nvrtc, &launcher, opts, &c, syms, &inputs, &*exact, &*eager, kSlack};
    // Twice: split-K counters must be left ready for the next launch.
    check.launches = 2;
    const std::vector<Variant> space = MatmulSpace(c, g);
    ASSERT_FALSE(space.empty());
    std::vector<std::pair<Variant, Numerics>> runs;
    for (const Variant& v : space) runs.push_back({v, Numerics::kFast});
    runs.push_back({space[0], Numerics::kReference64});
    runs.push_back({space[0], Numerics::kEager});
    for (const auto& [v, numerics] : runs) {
      const std::string what = absl::StrCat(v.ToString(), " ", NumericsName(numerics));
      absl::StatusOr<KernelSpec> spec = EmitMatmul(c, g, v, numerics);
      ASSERT_TRUE(spec.ok()) << what << ": " << spec.status();
      gpu_test::CheckKernel(*gpu, mem, *spec, numerics, check, what);
    }
  }
}

// Plans of several kernels: an MLP (two matmul kernels, the first writing
// gelu(x @ w1 + b1) for the second), SwiGLU (silu of one product read by the
// next product's epilogue), a softmax of a product (a row kernel reading it),
// LayerNorm before a linear layer (a row kernel storing the operand) and,
// batched, a softmax in one product's epilogue whose probabilities the next
// product streams, and a softmax of rows too wide for an epilogue whose
// probabilities are outputs beside the next product's operand (one row kernel
// writes both) or read beside that product by a trailing pointwise kernel,
// and outputs [M, 1] and [1, N] beside a product (a trailing kernel each),
// views no matmul reads as strides (stored first) and an attention between
// projections (a kernel of its own), every kernel at its
// heuristic variant, each output against the CPU fp64 evaluator.
TensorType BF16(std::vector<int64_t> shape) {
  TensorType t{DType::kBF16, {}};
  for (int64_t d : shape) t.shape.push_back(Dim::Static(d));
  return t;
}

int32_t Slice(Chain* c, int32_t of, int64_t axis, int64_t start, int64_t stop) {
  const int32_t id = c->AddOp(OpKind::kSlice, {of});
  c->nodes[id].axis = axis;
  c->nodes[id].start = start;
  c->nodes[id].stop = stop;
  return id;
}

int32_t Transpose(Chain* c, int32_t of) {
  const int32_t id = c->AddOp(OpKind::kPermute, {of});
  c->nodes[id].axes = {1, 0};
  return id;
}

TEST(GpuMatmulTest, PlansOfSeveralKernelsMatchReference) {
  absl::StatusOr<Gpu> gpu = OpenGpu();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status();
  NvrtcCompiler nvrtc;
  Launcher launcher(*gpu->cu);
  CompileOptions opts;
  opts.arch = gpu->arch;
  const std::vector<std::pair<std::string, Chain>> cases = {
      {"mlp_bf16", matmul_test::Mlp(DType::kBF16, 200, 136, 520)},
      {"swiglu_bf16", matmul_test::Mlp(DType::kBF16, 72, 264, 392, /*gated=*/true)},
      {"softmax_of_product_bf16", matmul_test::SoftmaxOfProduct(DType::kBF16, 72, 520, 264)},
      {"layer_norm_linear_bf16", matmul_test::LayerNormLinear(DType::kBF16, 100, 392, 256)},
      {"batched_softmax_in_epilogue_then_product_bf16",
       matmul_test::SoftmaxThenProduct(DType::kBF16, 3, 72, 136, 264, 96)},
      {"softmax_probs_out_and_into_a_product_bf16",
       matmul_test::SoftmaxThenProduct(DType::kBF16, 3, 72, 520, 264, 96, /*probs_out=*/true)},
      {"softmax_probs_beside_their_product_bf16",
       matmul_test::ProbsBesideTheirProduct(DType::kBF16, 72, 520, 264, /*probs_first=*/false)},
      // Views no matmul reads as strides, stored first by pointwise kernels:
      // a fused projection's parts (slices of a product, one transposed), a
      // weight sliced one column in (read through windows), a transposed
      // activation, and a product transposed for its output.
      {"fused_projection_parts_bf16", [] {
         Chain c;
         const int32_t x = c.AddInput(BF16({72, 264})), w = c.AddInput(BF16({264, 3 * 136}));
         const int32_t p = c.AddOp(OpKind::kMatmul, {x, w});
         const int32_t q = Slice(&c, p, 1, 0, 136), k = Slice(&c, p, 1, 136, 272);
         c.outputs = {c.AddOp(OpKind::kMatmul, {q, Transpose(&c, k)})};
         return row_test::Finish(std::move(c));
       }()},
      {"weight_sliced_one_column_in_f16", [] {
         Chain c;
         const int32_t x = c.AddInput(TensorType{DType::kF16, {Dim::Static(72), Dim::Static(264)}});
         const int32_t w = c.AddInput(TensorType{DType::kF16, {Dim::Static(264), Dim::Static(144)}});
         c.outputs = {c.AddOp(OpKind::kRelu, {c.AddOp(OpKind::kMatmul, {x, Slice(&c, w, 1, 1, 137)})})};
         return row_test::Finish(std::move(c));
       }()},
      {"transposed_activation_bf16", [] {
         Chain c;
         const int32_t x = c.AddInput(BF16({72, 264})), y = c.AddInput(BF16({72, 136}));
         c.outputs = {c.AddOp(OpKind::kMatmul, {Transpose(&c, c.AddOp(OpKind::kRelu, {x})), y})};
         return row_test::Finish(std::move(c));
       }()},
      {"product_transposed_bf16", [] {
         Chain c;
         const int32_t x = c.AddInput(BF16({72, 264})), w = c.AddInput(BF16({264, 136}));
         c.outputs = {c.AddOp(OpKind::kAdd, {Transpose(&c, c.AddOp(OpKind::kMatmul, {x, w})),
                                             c.AddConstant(1.0)})};
         return row_test::Finish(std::move(c));
       }()},
      // A causal attention between projections: the attention one kernel.
      {"attention_block_bf16", [] {
         attention_test::Options o;
         o.sq = 136;
         o.heads = 2;
         return attention_test::AttentionBlock(o);
       }()},
      {"outputs_of_shapes_that_do_not_nest_beside_a_product_bf16", [] {
         Chain c;
         auto bf16 = [](int64_t r, int64_t k) { return TensorType{DType::kBF16, {Dim::Static(r), Dim::Static(k)}}; };
         const int32_t x = c.AddInput(bf16(72, 264)), w = c.AddInput(bf16(264, 136));
         const int32_t a = c.AddInput(bf16(72, 1)), b = c.AddInput(bf16(1, 136));
         c.outputs = {c.AddOp(OpKind::kMatmul, {x, w}), c.AddOp(OpKind::kExp, {a}), c.AddOp(OpKind::kSilu, {b})};
         return row_test::Finish(std::move(c));
       }()},
  };
  for (const auto& [name, c] : cases) {
    SCOPED_TRACE(name);
    absl::StatusOr<Partition> p = PartitionChain(c);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_GE(p->kernels.size(), 2u);
    auto in = Inputs(c, {}, 17);
    auto exact = Evaluate(c, in, {}, EvalMode::kExact64);
    auto eager = Evaluate(c, in, {}, EvalMode::kEager);
    ASSERT_TRUE(exact.ok() && eager.ok());
    std::vector<CompiledKernel> kernels;
    for (const KernelGroup& g : p->kernels) {
      absl::StatusOr<KernelSpec> spec = EmitFamily(c, g, FamilyHeuristic(c, g));
      ASSERT_TRUE(spec.ok()) << spec.status();
      absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
      ASSERT_TRUE(k.ok()) << k.status();
      kernels.push_back(*std::move(k));
    }
    absl::StatusOr<v1::KernelPlan> plan = gpu_test::PlanOfKernels(c, *p, kernels, /*f64=*/false);
    ASSERT_TRUE(plan.ok()) << plan.status();
    DeviceMemory mem(gpu->cu);
    std::vector<DeviceBuffer> inputs = gpu_test::UploadInputs(mem, c, in, {}), outputs;
    for (int32_t o : c.outputs) {
      const TensorType& t = c.nodes[o].type;
      const size_t bytes = static_cast<size_t>(Elements(t, {})) * DTypeBytes(t.dtype);
      CUdeviceptr out = mem.Alloc(bytes);
      ASSERT_EQ(gpu->cu->cuMemsetD8(out, kPoisonByte, bytes), CUDA_SUCCESS);
      outputs.push_back(DeviceBuffer{out, ShapeOf(t, {}), {}, t.dtype});
    }
    absl::Status s = launcher.Launch(*plan, inputs, outputs, nullptr);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(gpu->cu->cuCtxSynchronize(), CUDA_SUCCESS);
    for (size_t j = 0; j < c.outputs.size(); ++j) {
      const DType dtype = c.nodes[c.outputs[j]].type.dtype;
      const size_t bytes = static_cast<size_t>(Elements(c.nodes[c.outputs[j]].type, {})) * DTypeBytes(dtype);
      std::string got = mem.Download(outputs[j].ptr, bytes);
      OutputCheck check = CheckOutput(dtype, got.data(), (*exact)[j], EagerError(dtype, (*eager)[j], (*exact)[j]),
                                      kSlack, absl::StrCat("output ", j));
      EXPECT_TRUE(check.ok) << check.message;
    }
  }
}

}  // namespace
}  // namespace kfuse
