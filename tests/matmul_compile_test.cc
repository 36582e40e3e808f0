// NVRTC compiles every variant of the matmul family's space (sm_90a), and
// both yardsticks, for the products that matter: a linear layer at 4096^3
// and with few rows (its weight row-major, or as nn.Linear keeps it),
// symbolic rows, an odd N (single stores), a batched product with a
// residual, and softmax or LayerNorm of narrow products in the epilogue.
// No GPU needed.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/matmul.h"
#include "codegen/matmul_test_chains.h"
#include "gtest/gtest.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

using matmul_test::Weight;

struct Case {
  std::string name;
  Chain chain;
};

std::vector<Case> Cases() {
  return {
      {"gemm_bf16_4096", matmul_test::Linear(DType::kBF16, 4096, 4096, 4096)},
      {"gemv_bf16_16_linear", matmul_test::Linear(DType::kBF16, 16, 8192, 8192, Weight::kLinear)},
      {"tens_of_rows_bf16", matmul_test::Linear(DType::kBF16, 48, 8192, 8192)},
      {"gemm_f16_sym_rows", matmul_test::Linear(DType::kF16, -2048, 1024, 512, Weight::kLinear,
                                                OpKind::kSilu)},
      {"odd_n_bf16_linear", matmul_test::Linear(DType::kBF16, 100, 263, 256, Weight::kLinear)},
      {"batched_residual_bf16", matmul_test::BatchedResidual(DType::kBF16, 4, 256, 512, 384)},
      {"batched_few_rows_bf16", matmul_test::BatchedResidual(DType::kBF16, 3, 5, 136, 104)},
      {"few_rows_f16_linear", matmul_test::Linear(DType::kF16, 40, 200, 1000, Weight::kLinear)},
      // Row reductions in the epilogue: tiles as wide as the rows, few rows
      // with split K, per-row results, odd N (single stores).
      {"router_softmax_bf16", matmul_test::SoftmaxOfProduct(DType::kBF16, 4096, 128, 4096)},
      {"few_rows_softmax_bf16", matmul_test::SoftmaxOfProduct(DType::kBF16, 16, 256, 4096)},
      {"product_layer_norm_f16",
       matmul_test::ProductLayerNorm(DType::kF16, 1000, 40, 512, Weight::kLinear)},
      {"product_layer_norm_odd_n",
       matmul_test::ProductLayerNorm(DType::kBF16, 100, 63, 256, Weight::kLinear)},
  };
}

TEST(MatmulCompileTest, EverySpaceVariantAndBothYardsticksCompile) {
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = "sm_90a";
  for (const Case& c : Cases()) {
    const KernelGroup g = matmul_test::WholeGroup(c.chain);
    const std::vector<Variant> space = MatmulSpace(c.chain, g);
    ASSERT_FALSE(space.empty()) << c.name;
    for (const Variant& v : space) {
      SCOPED_TRACE(absl::StrCat(c.name, " ", v.ToString()));
      absl::StatusOr<KernelSpec> spec = EmitMatmul(c.chain, g, v);
      ASSERT_TRUE(spec.ok()) << spec.status();
      absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
      ASSERT_TRUE(k.ok()) << k.status() << "\n" << spec->source;
      // 64 x 64 warp tiles at bk 64 sit at the register limit: a few bytes
      // may spill; the tuner times those variants like any other.
      EXPECT_LE(k->resources.spill_bytes, 32u) << k->resources.registers << " registers";
    }
    for (Numerics n : {Numerics::kReference64, Numerics::kEager}) {
      absl::StatusOr<KernelSpec> spec = EmitMatmul(c.chain, g, space[0], n);
      ASSERT_TRUE(spec.ok()) << spec.status();
      absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
      ASSERT_TRUE(k.ok()) << c.name << " " << NumericsName(n) << ": " << k.status() << "\n"
                          << spec->source;
    }
  }
}

}  // namespace
}  // namespace kfuse
