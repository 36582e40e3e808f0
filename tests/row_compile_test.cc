// NVRTC compiles every variant of the row family's space (sm_90) for
// softmax (bf16 masked, f32), LayerNorm (f32) and residual RMSNorm (bf16) at
// the widths that matter: 1024, 4096, 5120, 8192 and a 50257-wide
// vocabulary. No GPU needed.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/generators.h"
#include "codegen/partition.h"
#include "codegen/row.h"
#include "codegen/row_test_chains.h"
#include "gtest/gtest.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

TEST(RowCompileTest, EverySpaceVariantCompiles) {
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = "sm_90";
  for (int64_t w : {1001, 1024, 4096, 5120, 8192, 50257}) {
    std::vector<std::pair<std::string, Chain>> chains = {
        {"softmax_bf16", row_test::Softmax(DType::kBF16, -4096, w, /*masked=*/true)},
        {"softmax_f32", row_test::Softmax(DType::kF32, -4096, w)},
        {"layer_norm_f32", row_test::LayerNorm(DType::kF32, 64, w)},
        {"rms_residual_bf16", row_test::RmsNormResidual(DType::kBF16, -64, w)},
    };
    // Written f32 sums, accumulated in double in resident rows.
    if (w == 1024 || w == 4096 || w == 50257) {
      chains.push_back({"row_stats_f32", row_test::RowStats(DType::kF32, -4096, w)});
      chains.push_back({"int_row_sum", row_test::IntRowSum(-4096, w)});  // Unsigned adds.
    }
    // Element functions out of line (past 64 ops), the sins too.
    if (w == 1001 || w == 50257) {
      chains.push_back({"long_chain_softmax_f32", row_test::LongChainSoftmax(DType::kF32, -4096, w)});
    }
    for (const auto& [name, c] : chains) {
      KernelGroup g = PartitionChain(c)->kernels[0];
      std::vector<Variant> space = RowSpace(c, g);
      EXPECT_FALSE(space.empty()) << name << " W=" << w;
      for (const Variant& v : space) {
        SCOPED_TRACE(absl::StrCat(name, " W=", w, " ", v.ToString()));
        absl::StatusOr<KernelSpec> spec = EmitRow(c, g, v);
        ASSERT_TRUE(spec.ok()) << spec.status();
        absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
        ASSERT_TRUE(k.ok()) << k.status() << "\n" << spec->source;
        // Looped variants of 1024 threads may spill a little (64 registers);
        // register-resident and bulk-staged ones must not, unless they call
        // their element functions out of line: a call saves what is live
        // around it (116 bytes at 1024 threads, W=50257).
        const bool calls = spec->source.find("__noinline__ void") != std::string::npos;
        if (v.Get("resident") == 1 || v.Get("resident") == 3) {
          EXPECT_LE(k->resources.spill_bytes, calls ? 256u : 0u) << "spills";
        }
      }
    }
  }
}

// Inputs at strides of their own: a slice of a fused projection (vectors),
// a padded vocabulary and rows 4100 apart (vectors through windows), a
// transpose (element by element), three row coordinates at strides; a
// slice of a dense input read in place; a peeled LayerNorm's weights
// (windows).
TEST(RowCompileTest, StridedRowsCompile) {
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = "sm_90";
  using row_test::Strided;
  const std::vector<std::pair<std::string, Chain>> chains = {
      {"qkv_slice_softmax_bf16", Strided(row_test::Softmax(DType::kBF16, -4096, 4096), 0, {3 * 4096, 1})},
      {"padded_vocab_softmax_bf16", Strided(row_test::Softmax(DType::kBF16, -4096, 50257), 0, {50304, 1})},
      {"transposed_layer_norm_f32", Strided(row_test::LayerNorm(DType::kF32, 64, 1024), 0, {1, 64})},
      {"padded_3d_softmax_f32", row_test::PaddedSoftmax3D(DType::kF32, 2, 3, 1000, 1008, 4096)},
      {"k_of_qkv_rms_norm_bf16", row_test::SlicedRmsNorm(DType::kBF16, -4096, 3 * 1024, 1024, 1024)},
      {"padded_vocab_softmax_f32", Strided(row_test::Softmax(DType::kF32, -4096, 50257), 0, {50262, 1})},
      {"rows_4100_apart_softmax_f32", Strided(row_test::Softmax(DType::kF32, -64, 4096), 0, {4100, 1})},
      {"odd_layer_norm_f32", row_test::LayerNorm(DType::kF32, 8, 1001)},
  };
  for (const auto& [name, c] : chains) {
    KernelGroup g = PartitionChain(c)->kernels[0];
    const std::vector<Variant> space = FamilySpace(c, g);
    EXPECT_FALSE(space.empty()) << name;
    for (const Variant& v : space) {
      SCOPED_TRACE(absl::StrCat(name, " ", v.ToString()));
      absl::StatusOr<KernelSpec> spec = EmitFamily(c, g, v);
      ASSERT_TRUE(spec.ok()) << spec.status();
      absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
      ASSERT_TRUE(k.ok()) << k.status() << "\n" << spec->source;
    }
  }
}

TEST(RowCompileTest, ReferenceAndEagerCompile) {
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = "sm_90";
  // A masked softmax (register-resident rows) and a wide one (bulk-staged).
  for (const Chain& c : {row_test::Softmax(DType::kBF16, 8, 4096, true),
                         row_test::Softmax(DType::kBF16, 8, 50257)}) {
    KernelGroup g = PartitionChain(c)->kernels[0];
    for (Numerics n : {Numerics::kReference64, Numerics::kEager}) {
      absl::StatusOr<KernelSpec> spec = EmitRow(c, g, RowHeuristic(c, g), n);
      ASSERT_TRUE(spec.ok()) << spec.status();
      absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
      EXPECT_TRUE(k.ok()) << k.status() << "\n" << spec->source;
    }
  }
}

}  // namespace
}  // namespace kfuse
