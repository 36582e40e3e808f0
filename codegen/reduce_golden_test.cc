// Golden tests of the reduction family: the emitted source of the kernels of
// a column sum (f32, symbolic N), softmax over axis 0 (bf16: both reduction
// kernels and the pointwise kernel reading their results), a [B, S, H]
// reduction over the sequence axis and over two outer axes, a cross-entropy
// with class labels (one row kernel), and the fp64
// yardstick of the column sum, byte for byte. After an intended change run
// with KFUSE_UPDATE_GOLDEN=1 (from the repository root) and review the diff
// of tests/golden/reduce_*.cu.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/generators.h"
#include "codegen/golden_test_util.h"
#include "codegen/partition.h"
#include "codegen/reduce_test_chains.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

TEST(ReduceGolden, Chains) {
  struct Case {
    const char* name;
    Chain chain;
    Numerics numerics;
  } cases[] = {
      {"column_sum_f32", reduce_test::ColumnSum(DType::kF32, -4096, 1000), Numerics::kFast},
      {"column_sum_f32_reference64", reduce_test::ColumnSum(DType::kF32, -4096, 1000),
       Numerics::kReference64},
      {"column_softmax_bf16", reduce_test::ColumnSoftmax(DType::kBF16, -4096, 1024),
       Numerics::kFast},
      {"sequence_stats_f32", reduce_test::SequenceStats(DType::kF32, 4, -512, 768),
       Numerics::kFast},
      // The last kernel a row kernel reading both column statistics.
      {"standardize_row_softmax_bf16",
       reduce_test::StandardizeThenRowSoftmax(DType::kBF16, -4096, 1000), Numerics::kFast},
      // A cross-entropy's labels picking their column through an iota.
      {"cross_entropy_labels_bf16", reduce_test::CrossEntropyWithLabels(DType::kBF16, -4096, 1003),
       Numerics::kFast},
      // An ATen trace's nll_loss of _log_softmax: the pick computes the
      // log-probability at the label's column.
      {"nll_log_softmax_bf16", reduce_test::NllLoss(DType::kBF16, -4096, 50257, true),
       Numerics::kFast},
      {"standardize_row_softmax_bf16_reference64",
       reduce_test::StandardizeThenRowSoftmax(DType::kBF16, -4096, 1000), Numerics::kReference64},
  };
  for (const Case& k : cases) {
    absl::StatusOr<Partition> p = PartitionChain(k.chain);
    ASSERT_TRUE(p.ok()) << p.status();
    for (size_t i = 0; i < p->kernels.size(); ++i) {
      const std::string name = absl::StrCat(k.name, "_k", i);
      SCOPED_TRACE(name);
      const KernelGroup& g = p->kernels[i];
      absl::StatusOr<KernelSpec> spec =
          EmitFamily(k.chain, g, FamilyHeuristic(k.chain, g), k.numerics);
      ASSERT_TRUE(spec.ok()) << spec.status();
      golden::CheckGolden(absl::StrCat("reduce_", name), spec->source);
    }
  }
}

}  // namespace
}  // namespace kfuse
