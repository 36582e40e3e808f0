// Golden tests of the row family: the emitted source of softmax (bf16,
// W=4096), LayerNorm (f32; f32 and bf16 looped), residual RMSNorm (bf16) and
// an f32 row sum beside a row min,
// byte for byte, under the heuristic and the looped schedule. After an intended change run with
// KFUSE_UPDATE_GOLDEN=1 (from the repository root) and review the diff of
// tests/golden/row_*.cu.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/golden_test_util.h"
#include "codegen/partition.h"
#include "codegen/reduce_test_chains.h"
#include "codegen/row.h"
#include "codegen/row_test_chains.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

// sum(x, -1) and min(x, -1) of x [R, W]: row results written as they are.
Chain RowSumAndMin(DType t, int64_t r, int64_t w) {
  Chain c;
  const int32_t x = c.AddInput(TensorType{t, {reduce_test::Size(&c, r, "r"), Dim::Static(w)}});
  c.outputs = {reduce_test::Reduce(&c, OpKind::kReduceSum, x, {1}, false),
               reduce_test::Reduce(&c, OpKind::kReduceMin, x, {1}, false)};
  return reduce_test::Finish(std::move(c));
}

TEST(RowGolden, Chains) {
  struct Case {
    const char* name;
    Chain chain;
    int resident;  // -1: the heuristic's.
    int split = 1;
    int threads = 0;  // 0: the heuristic's.
  } cases[] = {
      {"softmax_bf16_4096", row_test::Softmax(DType::kBF16, -4096, 4096), -1},
      {"softmax_bf16_4096_looped", row_test::Softmax(DType::kBF16, -4096, 4096), 0},
      {"layer_norm_f32", row_test::LayerNorm(DType::kF32, -1024, 1024), -1},
      // Looped: f32 sums compensated, 16-bit ones not.
      {"layer_norm_f32_looped", row_test::LayerNorm(DType::kF32, -4096, 8192), 0},
      {"layer_norm_bf16_looped", row_test::LayerNorm(DType::kBF16, -4096, 8192), 0},
      {"rms_norm_residual_bf16", row_test::RmsNormResidual(DType::kBF16, -1024, 4096), -1},
      {"softmax_bf16_50257_peeled", row_test::Softmax(DType::kBF16, -4096, 50257), -1},
      // The online pass's f32 lane sums compensated: 99 terms a lane.
      {"softmax_f32_50257_looped", row_test::Softmax(DType::kF32, -4096, 50257), 0, 1, 128},
      {"softmax_bf16_50257_split", row_test::Softmax(DType::kBF16, -4096, 50257), 1, 8},
      // A padded vocabulary's rows 50262 apart: their phase moves by 5 a
      // row, so their vectors are read through windows, from a bulk copy
      // of the row (the heuristic's) or from global memory (looped).
      {"softmax_bf16_50257_padded",
       row_test::Strided(row_test::Softmax(DType::kBF16, -4096, 50257), 0, {50262, 1}), -1},
      {"softmax_bf16_50257_padded_looped",
       row_test::Strided(row_test::Softmax(DType::kBF16, -4096, 50257), 0, {50262, 1}), 0},
      // An f32 row sum written as it is, register-resident: its threads
      // accumulate in double.
      {"sum_min_f32_1000", RowSumAndMin(DType::kF32, -4096, 1000), -1},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    KernelGroup g = PartitionChain(k.chain)->kernels[0];
    Variant v = RowHeuristic(k.chain, g);
    if (k.resident >= 0) v.params["resident"] = k.resident;
    if (k.resident == 0) {  // Register-resident rows' and bulk-staged rows' only.
      for (const char* p : {"policy", "stages", "grid", "dyn"}) v.params.erase(p);
    }
    if (k.threads > 0) v.params["threads"] = k.threads;
    if (k.split > 1) v = Variant{Family::kRowReduction, {{"vec", 8}, {"threads", 512}, {"rows", 1},
                                                         {"resident", 1}, {"split", k.split}}};
    absl::StatusOr<KernelSpec> spec = EmitRow(k.chain, g, v);
    ASSERT_TRUE(spec.ok()) << spec.status();
    golden::CheckGolden(absl::StrCat("row_", k.name), spec->source);
  }
}

}  // namespace
}  // namespace kfuse
