// NVRTC compiles (sm_90) every variant of every kernel of the plans that
// chains reducing over outer axes become: a column sum (symbolic N), centring
// by the column mean (f32, bf16), softmax over axis 0 (bf16, f16, f32), a
// [B, S, H] reduction over the sequence axis and over two outer axes, an
// integer count per column, row kernels after and beside reductions over
// axis 0, and reductions of stored per-row results (a mean over the sequence
// of token norms, a loss's mean over the batch, a mean squared error over
// every axis), and layout views beside reductions (their pointwise kernels
// and the row and reduction kernels beside them); and the fp64 and eager
// yardsticks of each
// kernel's heuristic; none of the fast and eager ones spills. No GPU needed.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/generators.h"
#include "codegen/partition.h"
#include "codegen/reduce_test_chains.h"
#include "gtest/gtest.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

TEST(ReduceCompileTest, EveryKernelAndVariantCompiles) {
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = "sm_90";
  const std::vector<std::pair<std::string, Chain>> chains = {
      {"column_sum_f32", reduce_test::ColumnSum(DType::kF32, -4096, 1000)},
      {"long_chain_sum_f32", reduce_test::LongChainColumnSum(DType::kF32, -4096, 1000)},
      {"center_f32", reduce_test::CenterColumns(DType::kF32, 4096, 1024)},
      {"center_bf16", reduce_test::CenterColumns(DType::kBF16, -4096, 1000)},
      {"softmax0_bf16", reduce_test::ColumnSoftmax(DType::kBF16, -4096, 1024)},
      {"softmax0_f16", reduce_test::ColumnSoftmax(DType::kF16, 4096, 1000)},
      {"softmax0_f32", reduce_test::ColumnSoftmax(DType::kF32, -4096, 1000)},
      {"sequence_f32", reduce_test::SequenceStats(DType::kF32, 4, -512, 768)},
      {"sequence_bf16", reduce_test::SequenceStats(DType::kBF16, 4, 512, 768)},
      {"count_f32", reduce_test::CountPositive(DType::kF32, -4096, 1000)},
      {"standardize_bf16", reduce_test::StandardizeThenRowSoftmax(DType::kBF16, -4096, 1000)},
      {"standardize_f32", reduce_test::StandardizeThenRowSoftmax(DType::kF32, 4096, 1024)},
      {"beside_f32", reduce_test::ColumnSumBesideRowSoftmax(DType::kF32, -4096, 1000)},
      {"token_rms_bf16", reduce_test::SequenceMeanOfTokenRms(DType::kBF16, 4, -512, 768)},
      {"loss_f32", reduce_test::RowLossMean(DType::kF32, -4096, 1000)},
      {"loss_probs_bf16", reduce_test::RowLossMean(DType::kBF16, 4096, 1024, true)},
      {"mse_bf16", reduce_test::MeanSquaredError(DType::kBF16, -4096, 1000)},
      {"mse_keep_f32", reduce_test::MeanSquaredError(DType::kF32, 4096, 1024, true)},
      {"ce_labels_bf16", reduce_test::CrossEntropyWithLabels(DType::kBF16, -4096, 1003)},
      {"ce_labels_mean_f32", reduce_test::CrossEntropyWithLabels(DType::kF32, -4096, 1003, true)},
      {"ce_labels_vocab_bf16", reduce_test::CrossEntropyWithLabels(DType::kBF16, -4096, 50257)},
      {"nll_f32", reduce_test::NllLoss(DType::kF32, -4096, 1003)},
      {"nll_vocab_bf16", reduce_test::NllLoss(DType::kBF16, -4096, 50257)},
      {"nll_log_softmax_vocab_bf16", reduce_test::NllLoss(DType::kBF16, -4096, 50257, true)},
      {"views_slice_softmax_bf16", reduce_test::ViewsBesideReductions(DType::kBF16, -4096, 1000, 0)},
      {"views_transpose_softmax_f32", reduce_test::ViewsBesideReductions(DType::kF32, 512, 1000, 1)},
      {"views_transpose_plus_sums_f32", reduce_test::ViewsBesideReductions(DType::kF32, 512, 512, 2)},
      {"views_softmax_transposed_bf16", reduce_test::ViewsBesideReductions(DType::kBF16, -4096, 1000, 3)},
      {"views_weighted_column_sum_f32", reduce_test::ViewsBesideReductions(DType::kF32, -4096, 1000, 4)},
      {"views_row_index_weighted_sum_f32", reduce_test::ViewsBesideReductions(DType::kF32, -4096, 1000, 5)},
      {"views_between_reductions_f32", reduce_test::ViewsBesideReductions(DType::kF32, 512, 1000, 6)},
      {"views_before_column_sums_bf16", reduce_test::ViewsBesideReductions(DType::kBF16, -4096, 1000, 7)},
      {"two_row_shapes_f32", reduce_test::TwoRowShapes(DType::kF32, -4096, 1000, 64, false)},
      {"two_row_shapes_summed_bf16", reduce_test::TwoRowShapes(DType::kBF16, -4096, 4096, 1003, true)},
      {"views_s_minus_its_column_masked_f32", reduce_test::ViewsBesideReductions(DType::kF32, -4096, 1000, 8)},
      {"views_output_stored_for_column_sums_f32", reduce_test::ViewsBesideReductions(DType::kF32, -4096, 1000, 9)},
      {"views_row_max_stored_for_a_view_bf16", reduce_test::ViewsBesideReductions(DType::kBF16, -4096, 1000, 10)},
      {"views_row_output_for_column_sums_bf16", reduce_test::ViewsBesideReductions(DType::kBF16, -4096, 1000, 11)},
      {"views_weighted_total_f32", reduce_test::ViewsBesideReductions(DType::kF32, -4096, 1000, 12)},
  };
  for (const auto& [name, c] : chains) {
    absl::StatusOr<Partition> p = PartitionChain(c);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status();
    ASSERT_GE(p->kernels.size(), 1u);
    for (size_t i = 0; i < p->kernels.size(); ++i) {
      const KernelGroup& g = p->kernels[i];
      std::vector<std::pair<Variant, Numerics>> runs;
      for (const Variant& v : FamilySpace(c, g)) runs.push_back({v, Numerics::kFast});
      ASSERT_FALSE(runs.empty()) << name << " kernel " << i;
      runs.push_back({FamilyHeuristic(c, g), Numerics::kReference64});
      runs.push_back({FamilyHeuristic(c, g), Numerics::kEager});
      for (const auto& [v, numerics] : runs) {
        SCOPED_TRACE(absl::StrCat(name, " kernel ", i, " ", v.ToString(), " numerics ",
                                  static_cast<int>(numerics)));
        absl::StatusOr<KernelSpec> spec = EmitFamily(c, g, v, numerics);
        ASSERT_TRUE(spec.ok()) << spec.status();
        absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
        ASSERT_TRUE(k.ok()) << k.status() << "\n" << spec->source;
        // The variants the tuner times must not spill; the fp64 yardstick
        // may (a register kept across its calls to double exp).
        if (g.family == Family::kReduction && numerics != Numerics::kReference64) {
          EXPECT_EQ(k->resources.spill_bytes, 0u) << "spills";
        }
      }
    }
  }
}

}  // namespace
}  // namespace kfuse
