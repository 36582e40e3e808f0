// GPU property test of plans that reduce over outer axes: a column sum
// (symbolic N), centring by the column mean (f32, bf16), softmax over axis 0
// (bf16, f32: two reduction kernels and a pointwise one, two intermediates),
// a [B, S, H] reduction over the sequence axis and over two outer axes, an
// integer count per column, and row kernels after (columns standardized,
// then a softmax along rows) and beside (a column sum and a row softmax)
// reductions over axis 0, and reductions of per-row results a row kernel
// stores: a mean over the sequence of token norms (bf16) and a loss's mean
// over the batch (f32; bf16 with the probabilities beside it), and a mean
// squared error over both axes (bf16; f32 with keepdim), and a
// cross-entropy with i64 class labels picking their column through an iota
// (per row in bf16, at widths 1003 and 50257; its mean over the rows not
// ignored in f32) and an NLL of log-probabilities read as an input (the pick
// the row kernel's only reduction; f32 at width 1003, bf16 at 50257), and
// layout views beside reductions (a softmax of a slice or a transpose, a
// transpose plus row sums, a softmax transposed, column and row sums
// weighted by an iota). For every variant of every kernel (the other
// kernels at their heuristic), and for the whole plan in the fp64 yardstick,
// the plan is compiled with NVRTC for this GPU, launched through the C++
// Launcher on fresh random inputs and compared with the CPU fp64 evaluator,
// with eager PyTorch's error (the CPU kEager evaluator) as the yardstick.
// Skips without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "clients/launcher.h"
#include "codegen/analysis.h"
#include "codegen/evaluate.h"
#include "codegen/generators.h"
#include "codegen/numeric.h"
#include "codegen/partition.h"
#include "codegen/reduce_test_chains.h"
#include "codegen/row_test_chains.h"
#include "gtest/gtest.h"
#include "tests/gpu_test_util.h"
#include "tuner/check.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

constexpr double kSlack = 2.0;

// Values in [-4, 4], rounded to each input's dtype; a fresh seed per case.
std::vector<std::vector<double>> Inputs(const Chain& c, const std::vector<int64_t>& syms,
                                        unsigned seed) {
  return gpu_test::UniformInputs(c, syms, seed, -4, 4);
}

using gpu_test::DeviceMemory;
using gpu_test::ToBytes;
using gpu_test::Gpu;
using gpu_test::OpenGpu;
using gpu_test::PlanOfKernels;
using gpu_test::ShapeOf;

// One launch of the plan: each kernel's variant, and the numerics of all.
struct PlanRun {
  std::vector<Variant> variants;
  Numerics numerics = Numerics::kFast;
  std::string label;
};

TEST(GpuReduceTest, EveryVariantOfEveryKernelMatchesReference) {
  absl::StatusOr<Gpu> gpu = OpenGpu();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status();
  NvrtcCompiler nvrtc;
  Launcher launcher(*gpu->cu);
  CompileOptions opts;
  opts.arch = gpu->arch;
  // Symbolic sizes are bound to 1027 (N) and 37 (S): odd, so no block is full
  // by accident.
  const std::vector<std::pair<std::string, Chain>> chains = {
      {"column_sum_f32", reduce_test::ColumnSum(DType::kF32, -1027, 1000)},
      {"long_chain_sum_f32", reduce_test::LongChainColumnSum(DType::kF32, -1027, 1000)},
      {"center_f32", reduce_test::CenterColumns(DType::kF32, 333, 4096)},
      {"center_bf16", reduce_test::CenterColumns(DType::kBF16, -1027, 1000)},
      {"softmax0_bf16", reduce_test::ColumnSoftmax(DType::kBF16, -1027, 1000)},
      {"softmax0_f32", reduce_test::ColumnSoftmax(DType::kF32, 333, 4096)},
      {"softmax0_f16", reduce_test::ColumnSoftmax(DType::kF16, -1027, 257)},
      {"sequence_f32", reduce_test::SequenceStats(DType::kF32, 3, -37, 257)},
      {"sequence_bf16", reduce_test::SequenceStats(DType::kBF16, 5, 64, 768)},
      {"count_f32", reduce_test::CountPositive(DType::kF32, -1027, 999)},
      {"standardize_bf16", reduce_test::StandardizeThenRowSoftmax(DType::kBF16, -1027, 1000)},
      {"standardize_f32", reduce_test::StandardizeThenRowSoftmax(DType::kF32, 333, 4096)},
      {"beside_f32", reduce_test::ColumnSumBesideRowSoftmax(DType::kF32, -1027, 1000)},
      {"token_rms_bf16", reduce_test::SequenceMeanOfTokenRms(DType::kBF16, 3, -37, 768)},
      {"loss_f32", reduce_test::RowLossMean(DType::kF32, -1027, 1000)},
      {"loss_probs_bf16", reduce_test::RowLossMean(DType::kBF16, -1027, 1000, true)},
      {"mse_bf16", reduce_test::MeanSquaredError(DType::kBF16, -1027, 1000)},
      {"mse_keep_f32", reduce_test::MeanSquaredError(DType::kF32, 333, 4096, true)},
      {"ce_labels_bf16", reduce_test::CrossEntropyWithLabels(DType::kBF16, -1027, 1003)},
      {"ce_labels_mean_f32", reduce_test::CrossEntropyWithLabels(DType::kF32, -1027, 1003, true)},
      {"ce_labels_vocab_bf16", reduce_test::CrossEntropyWithLabels(DType::kBF16, 333, 50257)},
      {"nll_f32", reduce_test::NllLoss(DType::kF32, -1027, 1003)},
      {"nll_vocab_bf16", reduce_test::NllLoss(DType::kBF16, 333, 50257)},
      {"nll_log_softmax_vocab_bf16", reduce_test::NllLoss(DType::kBF16, 333, 50257, true)},
      {"nll_log_softmax_f32", reduce_test::NllLoss(DType::kF32, -1027, 1003, true)},
      {"row_min_beside_totals_f32", reduce_test::RowMinBesideTotals(DType::kF32, 3, -1027, 1000)},
      {"row_min_keep_beside_totals_bf16", reduce_test::RowMinBesideTotals(DType::kBF16, 3, -1027, 1000, true)},
      {"inputs64_beside_row_softmax_f32", reduce_test::ManyInputsThenRowSoftmax(DType::kF32, 64, -1027, 1000)},
      {"column_sums_beside_scale_f32", reduce_test::ColumnSumsBesideScale(DType::kF32, -1027, 1000)},
      // Column sums of padded rows (1003 and 1001 elements apart): their
      // vectors through windows.
      {"padded_column_sum_bf16", row_test::Strided(reduce_test::ColumnSum(DType::kBF16, -1027, 1000), 0, {1003, 1})},
      {"padded_column_sum_f32", row_test::Strided(reduce_test::ColumnSum(DType::kF32, 333, 1000), 0, {1001, 1})},
      // A row sum used in the row and written as its keepdim-less twin.
      {"sum_normalized_twin_f32", row_test::SumNormalized(DType::kF32, -1027, 1000)},
      {"sum_normalized_twin_wide_f32", row_test::SumNormalized(DType::kF32, 333, 50257)},
      {"int_row_sum", row_test::IntRowSum(-1027, 1000)},
      {"int_row_sum_wide", row_test::IntRowSum(333, 50257)},
      // Layout views beside reductions: computed by pointwise kernels, but
      // the slice, which its row kernel reads in place, element by element.
      {"views_slice_softmax_bf16", reduce_test::ViewsBesideReductions(DType::kBF16, -1027, 1000, 0)},
      {"views_transpose_softmax_f32", reduce_test::ViewsBesideReductions(DType::kF32, 333, 1000, 1)},
      {"views_transpose_plus_sums_f32", reduce_test::ViewsBesideReductions(DType::kF32, 512, 512, 2)},
      {"views_softmax_transposed_bf16", reduce_test::ViewsBesideReductions(DType::kBF16, -1027, 1000, 3)},
      {"views_weighted_column_sum_f32", reduce_test::ViewsBesideReductions(DType::kF32, -1027, 1000, 4)},
      {"views_row_index_weighted_sum_f32", reduce_test::ViewsBesideReductions(DType::kF32, -1027, 1000, 5)},
      {"views_between_reductions_f32", reduce_test::ViewsBesideReductions(DType::kF32, 333, 1000, 6)},
      {"views_before_column_sums_bf16", reduce_test::ViewsBesideReductions(DType::kBF16, -1027, 1000, 7)},
      {"views_s_minus_its_column_masked_f32", reduce_test::ViewsBesideReductions(DType::kF32, 333, 1000, 8)},
      // Per-row values of two row shapes in one output, and summed.
      {"two_row_shapes_f32", reduce_test::TwoRowShapes(DType::kF32, -1027, 1000, 64, false)},
      {"two_row_shapes_bf16", reduce_test::TwoRowShapes(DType::kBF16, 333, 4096, 1003, false)},
      {"two_row_shapes_summed_f32", reduce_test::TwoRowShapes(DType::kF32, -1027, 1000, 64, true)},
      {"views_output_stored_for_column_sums_f32", reduce_test::ViewsBesideReductions(DType::kF32, -1027, 1000, 9)},
      {"views_row_max_stored_for_a_view_bf16", reduce_test::ViewsBesideReductions(DType::kBF16, -1027, 1000, 10)},
      {"views_row_output_for_column_sums_bf16", reduce_test::ViewsBesideReductions(DType::kBF16, -1027, 1000, 11)},
      {"views_weighted_total_f32", reduce_test::ViewsBesideReductions(DType::kF32, -1027, 1000, 12)},
  };
  // KFUSE_GPU_CASES: only the cases whose names hold it, or one of its
  // comma-separated parts (each case keeps its inputs: the seed is its
  // place in the list). KFUSE_GPU_VERBOSE: every run's error on every output.
  const char* cases = std::getenv("KFUSE_GPU_CASES");
  const std::vector<std::string> only =
      cases == nullptr ? std::vector<std::string>{} : absl::StrSplit(cases, ',', absl::SkipEmpty());
  const bool verbose = std::getenv("KFUSE_GPU_VERBOSE") != nullptr;
  unsigned seed = 0;
  int ran = 0;
  for (const auto& [name, c] : chains) {
    ++seed;
    if (!only.empty() && std::none_of(only.begin(), only.end(), [&](const std::string& part) {
          return name.find(part) != std::string::npos;
        })) {
      continue;
    }
    ++ran;
    SCOPED_TRACE(name);
    std::vector<int64_t> syms;
    for (const SymbolInfo& s : c.symbols) syms.push_back(s.hint == 37 ? 37 : 1027);
    absl::StatusOr<Partition> part = PartitionChain(c);
    ASSERT_TRUE(part.ok()) << part.status();
    auto in = Inputs(c, syms, seed);
    auto exact = Evaluate(c, in, syms, EvalMode::kExact64);
    auto eager = Evaluate(c, in, syms, EvalMode::kEager);
    ASSERT_TRUE(exact.ok() && eager.ok());
    DeviceMemory mem(gpu->cu);
    std::vector<DeviceBuffer> inputs = gpu_test::UploadInputs(mem, c, in, syms);
    // Every variant of each kernel with the others at their heuristic, then
    // the whole plan as the fp64 yardstick the tuner checks with.
    std::vector<Variant> seeds;
    for (const KernelGroup& g : part->kernels) seeds.push_back(FamilyHeuristic(c, g));
    std::vector<PlanRun> runs;
    for (size_t i = 0; i < part->kernels.size(); ++i) {
      for (const Variant& v : FamilySpace(c, part->kernels[i])) {
        PlanRun r{seeds, Numerics::kFast, absl::StrCat("kernel ", i, " ", v.ToString())};
        r.variants[i] = v;
        runs.push_back(std::move(r));
      }
    }
    runs.push_back(PlanRun{seeds, Numerics::kReference64, "reference64"});
    std::printf("%s: %zu kernels, %zu plans\n", name.c_str(), part->kernels.size(), runs.size());
    std::map<std::pair<size_t, std::pair<Variant, int>>, CompiledKernel> compiled;
    for (const PlanRun& run : runs) {
      SCOPED_TRACE(run.label);
      const bool yardstick = run.numerics == Numerics::kReference64;
      std::vector<CompiledKernel> kernels;
      for (size_t i = 0; i < part->kernels.size(); ++i) {
        const auto key = std::make_pair(i, std::make_pair(run.variants[i],
                                                          static_cast<int>(run.numerics)));
        auto it = compiled.find(key);
        if (it == compiled.end()) {
          absl::StatusOr<KernelSpec> spec =
              EmitFamily(c, part->kernels[i], run.variants[i], run.numerics);
          ASSERT_TRUE(spec.ok()) << spec.status();
          absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
          ASSERT_TRUE(k.ok()) << k.status();
          it = compiled.emplace(key, *std::move(k)).first;
        }
        kernels.push_back(it->second);
      }
      absl::StatusOr<v1::KernelPlan> plan = PlanOfKernels(c, *part, kernels, yardstick);
      ASSERT_TRUE(plan.ok()) << plan.status();
      ASSERT_EQ(plan->intermediates_size(), static_cast<int>(part->intermediates.size()));
      std::vector<DeviceBuffer> outputs = gpu_test::PoisonedOutputs(*gpu, mem, c, syms, yardstick);
      absl::Status s = launcher.Launch(*plan, inputs, outputs, nullptr);
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_EQ(gpu->cu->cuCtxSynchronize(), CUDA_SUCCESS);
      for (const auto& out : gpu_test::CheckOutputs(mem, outputs, *exact, *eager, kSlack, yardstick)) {
        EXPECT_TRUE(out.check.ok) << out.check.message;
        if (verbose) {
          std::printf("  %s: %s (eager %.3g)\n", run.label.c_str(), out.check.message.c_str(), out.eager_err);
        }
      }
    }
  }
  EXPECT_GT(ran, 0) << "no case's name holds KFUSE_GPU_CASES";
}

}  // namespace
}  // namespace kfuse
