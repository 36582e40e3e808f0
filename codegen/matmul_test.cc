#include "codegen/matmul.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codegen/generators.h"
#include "codegen/golden_test_util.h"
#include "codegen/matmul_plan.h"
#include "codegen/matmul_test_chains.h"
#include "codegen/validate.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using matmul_test::Linear;
using matmul_test::Weight;
using matmul_test::WholeGroup;

Variant With(Variant v, const std::string& name, int64_t value) {
  v.params[name] = value;
  return v;
}

TEST(MatmulTest, HeuristicPicksWideTilesForLargeProductsAndSplitKForFewRows) {
  Chain big = Linear(DType::kBF16, 4096, 4096, 4096);
  Variant v = MatmulHeuristic(big, WholeGroup(big));
  EXPECT_EQ(v.Get("bm"), 128);
  EXPECT_EQ(v.Get("bn"), 256);
  EXPECT_EQ(v.Get("splitk"), 1);
  // Few rows stream B: 128 strips of 64 columns, a CTA of eight warps
  // along K each, about one an SM.
  Chain few = Linear(DType::kBF16, 16, 8192, 8192);
  Variant s = MatmulHeuristic(few, WholeGroup(few));
  EXPECT_EQ(s.Get("stream"), 1);
  EXPECT_EQ(s.Get("bm"), 16);
  EXPECT_EQ(s.Get("wk"), 8);
  EXPECT_EQ(s.Get("splitk"), 1);
  // 64 strips: two slices of K.
  Chain one = Linear(DType::kBF16, 1, 4096, 8192);
  const Variant o = MatmulHeuristic(one, WholeGroup(one));
  EXPECT_EQ(o.Get("bm"), 8);
  EXPECT_EQ(o.Get("splitk"), 2);
  // 64 rows: tiled, 64 x 128 tiles, K split in two over a cluster (about
  // one CTA an SM).
  Chain tens = Linear(DType::kBF16, 64, 8192, 8192);
  const Variant t = MatmulHeuristic(tens, WholeGroup(tens));
  EXPECT_EQ(t.Get("stream"), 0);
  EXPECT_EQ(t.Get("bm"), 64);
  EXPECT_EQ(t.Get("bn"), 128);
  EXPECT_EQ(t.Get("splitk"), 2);
  EXPECT_EQ(t.Get("cluster"), 1);
}

// Where K is a whole number of 32-wide steps, every step a warp takes lies
// within K: its loads carry no predicate and none past its last is issued.
TEST(MatmulTest, StreamedLoadsArePredicatedOnlyWhereKIsNotWholeSteps) {
  for (const int64_t k : {1024, 1000}) {
    SCOPED_TRACE(k);
    Chain c = Linear(DType::kBF16, 16, 512, k);
    const KernelGroup g = WholeGroup(c);
    const Variant v = MatmulHeuristic(c, g);
    ASSERT_EQ(v.Get("stream"), 1);
    absl::StatusOr<KernelSpec> spec = EmitMatmul(c, g, v);
    ASSERT_TRUE(spec.ok()) << spec.status();
    const bool whole = k % 32 == 0;
    EXPECT_EQ(absl::StrContains(spec->source, "k0 + 8 * c < kend);"), !whole);
    EXPECT_EQ(absl::StrContains(spec->source, "kf_ldg_stream(const unsigned short* p, bool ok)"),
              !whole);
    EXPECT_EQ(absl::StrContains(spec->source, "if (i0 + 2 * kf_STAGES <= mine)"), whole);
    EXPECT_EQ(absl::StrContains(spec->source, "for (int d = 0; d < kf_STAGES; ++d) if (d < mine)"),
              whole);
  }
}

TEST(MatmulTest, StreamNeedsAKMajorAAndItsOwnParams) {
  // A read as the transpose of x [K, M]: M-major, so the tiled schedule.
  Chain mmajor;
  const int32_t x = mmajor.AddInput(TensorType{DType::kBF16, {Dim::Static(256), Dim::Static(16)}});
  const int32_t w = mmajor.AddInput(TensorType{DType::kBF16, {Dim::Static(256), Dim::Static(512)}});
  const int32_t xt = mmajor.AddOp(OpKind::kPermute, {x});
  mmajor.nodes[xt].axes = {1, 0};
  mmajor.outputs.push_back(mmajor.AddOp(OpKind::kMatmul, {xt, w}));
  mmajor = row_test::Finish(std::move(mmajor));
  const KernelGroup mg = WholeGroup(mmajor);
  EXPECT_EQ(MatmulHeuristic(mmajor, mg).Get("stream"), 0);
  for (const Variant& v : MatmulSpace(mmajor, mg)) EXPECT_EQ(v.Get("stream"), 0) << v.ToString();

  Chain c = Linear(DType::kBF16, 16, 512, 1024);
  const KernelGroup g = WholeGroup(c);
  const Variant v = MatmulHeuristic(c, g);
  ASSERT_EQ(v.Get("stream"), 1);
  absl::Status s = CanGenerateMatmul(mmajor, mg, v);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "K-major A")) << s.message();
  struct Bad {
    Variant v;
    std::string says;
  } bad[] = {
      {With(v, "stream", 2), "stream must be 0 or 1"},
      {With(v, "bm", 128), "bm must be 8, 16, 32 or 64"},
      {With(v, "bn", 128), "bn must be 64 * wn"},
      {With(v, "wk", 3), "wk must be"},
      {With(With(With(v, "wn", 4), "bn", 256), "wk", 8), "at most 16"},
      {With(v, "stages", 5), "stages must be 1 to 4"},
      {With(With(v, "bm", 64), "stages", 3), "registers"},
      {With(v, "splitk", 16), "shorter than a step"},
  };
  for (const Bad& b : bad) {
    s = CanGenerateMatmul(c, g, b.v);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.v.ToString();
    EXPECT_TRUE(absl::StrContains(s.message(), b.says)) << s.message();
  }
  // Streamed kernels take wn * wk warps and the warps' sums' shared memory.
  absl::StatusOr<KernelSpec> k = EmitMatmul(c, g, v);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->block.x.value(), 32 * v.Get("wn") * v.Get("wk"));
  EXPECT_EQ(k->dynamic_smem_bytes, v.Get("wk") * v.Get("bm") * (v.Get("bn") + 1) * 4);
}

// Split K over a cluster (sm_90): the tile's slices meet in distributed
// shared memory, so the kernel takes no workspace and needs no zeroing.
TEST(MatmulTest, SplitKOverAClusterTakesNoWorkspace) {
  Chain c = Linear(DType::kBF16, 64, 8192, 8192);
  const KernelGroup g = WholeGroup(c);
  const Variant cl = MatmulHeuristic(c, g);
  ASSERT_EQ(cl.Get("splitk"), 2);
  ASSERT_EQ(cl.Get("cluster"), 1);
  const Variant ws = With(cl, "cluster", 0);
  EXPECT_EQ(VariantMinComputeCapability(ws), 80);
  EXPECT_EQ(VariantMinComputeCapability(cl), 90);
  absl::StatusOr<KernelSpec> a = EmitMatmul(c, g, ws), b = EmitMatmul(c, g, cl);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->params.size(), 6u);  // x, w, bias, out, partial tiles, counters.
  EXPECT_EQ(b->params.size(), 4u);
  for (const KernelParam& p : b->params) EXPECT_NE(p.kind, KernelParam::Kind::kWorkspace);
  EXPECT_EQ(b->grid.y.value(), 2);
  EXPECT_EQ(b->cluster_y, 0u);  // Fixed in the source: any launch keeps it.
  EXPECT_TRUE(absl::StrContains(b->source, "__cluster_dims__(1, kf_SPLITK, 1)"));
  EXPECT_TRUE(absl::StrContains(b->source, "kf_cluster_ld(at, r)"));
  EXPECT_FALSE(absl::StrContains(b->source, "kf_ws"));
  EXPECT_FALSE(absl::StrContains(a->source, "cluster"));
  // The stages (4 x (64 + 128) x 64 x 2 bytes) hold the 64 x 128 partial tile.
  EXPECT_EQ(b->dynamic_smem_bytes, 98304u);
  EXPECT_EQ(a->dynamic_smem_bytes, 98304u + 16);
  // A tile wider than its stages takes the partial tile's bytes.
  const Variant wide = With(With(With(cl, "bn", 256), "bk", 32), "stages", 2);
  absl::StatusOr<KernelSpec> w = EmitMatmul(c, g, wide);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->dynamic_smem_bytes, 64u * 256 * 4);
  // Streamed: the ranks share the tile's outputs.
  Chain few = Linear(DType::kBF16, 16, 512, 4096);
  const KernelGroup fg = WholeGroup(few);
  const Variant sv = With(With(MatmulHeuristic(few, fg), "splitk", 4), "cluster", 1);
  ASSERT_EQ(sv.Get("stream"), 1);
  absl::StatusOr<KernelSpec> sk = EmitMatmul(few, fg, sv);
  ASSERT_TRUE(sk.ok()) << sk.status();
  EXPECT_EQ(sk->params.size(), 4u);
  EXPECT_TRUE(absl::StrContains(sk->source, "idx = kf_cluster_rank() * kf_THREADS + tid"));
  // Errors name the param.
  struct Bad {
    Variant v;
    std::string says;
  } bad[] = {
      {With(ws, "cluster", 2), "cluster must be 0 or 1"},
      {With(cl, "splitk", 1), "cluster 1 needs splitk 2, 4 or 8"},
      {With(cl, "splitk", 16), "cluster 1 needs splitk 2, 4 or 8"},
      {With(sv, "splitk", 1), "cluster 1 needs splitk 2, 4 or 8"},
  };
  for (const Bad& x : bad) {
    absl::Status s = CanGenerateMatmul(x.v.Get("stream") ? few : c, x.v.Get("stream") ? fg : g, x.v);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << x.v.ToString();
    EXPECT_TRUE(absl::StrContains(s.message(), x.says)) << s.message();
  }
  // The few-row spaces offer a cluster twin of their split variants.
  int twins = 0;
  for (const Variant& v : MatmulSpace(c, g)) twins += v.Get("cluster") == 1;
  EXPECT_GE(twins, 4);
}

TEST(MatmulTest, SpaceIsLegalDistinctAndStartsWithTheHeuristic) {
  for (const Chain& c : {Linear(DType::kBF16, 4096, 4096, 4096),
                         Linear(DType::kF16, 64, 8192, 8192, Weight::kLinear),
                         matmul_test::BatchedResidual(DType::kBF16, 4, 256, 512, 384)}) {
    const KernelGroup g = WholeGroup(c);
    std::vector<Variant> space = MatmulSpace(c, g);
    ASSERT_GE(space.size(), 8u);
    EXPECT_LE(space.size(), 24u);
    EXPECT_EQ(space[0], MatmulHeuristic(c, g));
    for (size_t i = 0; i < space.size(); ++i) {
      EXPECT_TRUE(CanGenerateMatmul(c, g, space[i]).ok()) << space[i].ToString();
      for (size_t j = 0; j < i; ++j) EXPECT_NE(space[i], space[j]);
    }
  }
}

TEST(MatmulTest, BadParamsAreNamed) {
  Chain c = Linear(DType::kBF16, 256, 256, 256);
  const KernelGroup g = WholeGroup(c);
  const Variant v = MatmulHeuristic(c, g);
  struct Bad {
    Variant v;
    std::string says;
  } bad[] = {
      {With(v, "bm", 48), "bm must be"},
      {With(v, "bk", 16), "bk must be"},
      {With(With(v, "wm", 4), "wn", 4), "wm * wn"},
      {With(v, "wn", 32), "wm * wn"},
      {With(With(v, "bm", 16), "wm", 2), "bm / wm"},
      {With(v, "stages", 7), "stages must be"},
      {With(With(v, "bk", 128), "stages", 6), "shared memory"},
      {With(v, "group", 3), "group must be"},
      {With(v, "splitk", 3), "splitk must be"},
      {With(v, "splitk", 16), "shorter than bk"},
      {With(With(With(v, "bm", 256), "wm", 1), "wn", 2), "too many accumulators"},
  };
  for (const Bad& b : bad) {
    absl::Status s = CanGenerateMatmul(c, g, b.v);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.v.ToString();
    EXPECT_TRUE(absl::StrContains(s.message(), b.says)) << s.message();
    EXPECT_FALSE(EmitMatmul(c, g, b.v).ok());
  }
}

TEST(MatmulTest, WhatTheFamilyDoesNotCoverIsUnimplementedAndNamed) {
  Chain f32 = Linear(DType::kF32, 64, 64, 64);
  absl::Status s = CanGenerateMatmul(f32, WholeGroup(f32), MatmulHeuristic(f32, WholeGroup(f32)));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(s.message(), "operand A: f32")) << s.message();

  // K = 100 rows of 200 bytes: 16-byte chunks would straddle rows.
  Chain odd = Linear(DType::kBF16, 64, 64, 100);
  s = CanGenerateMatmul(odd, WholeGroup(odd), MatmulHeuristic(odd, WholeGroup(odd)));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(s.message(), "not a multiple of 8")) << s.message();

  // An operand with no contiguous inner dim (every other column).
  Chain strided;
  const int32_t x = strided.AddInput(TensorType{DType::kBF16, {Dim::Static(64), Dim::Static(64)}},
                                     {128, 2});
  const int32_t w = strided.AddInput(TensorType{DType::kBF16, {Dim::Static(64), Dim::Static(64)}});
  strided.outputs.push_back(strided.AddOp(OpKind::kMatmul, {x, w}));
  strided = row_test::Finish(std::move(strided));
  s = CanGenerateMatmul(strided, WholeGroup(strided),
                        MatmulHeuristic(strided, WholeGroup(strided)));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(s.message(), "operand A: neither M nor K")) << s.message();
}

TEST(MatmulTest, LaunchContract) {
  Chain c = Linear(DType::kBF16, -4096, 8192, 8192);  // Symbolic rows.
  const KernelGroup g = WholeGroup(c);
  Variant v = With(With(MatmulHeuristic(c, g), "splitk", 4), "bm", 64);
  absl::StatusOr<KernelSpec> k = EmitMatmul(c, g, v);
  ASSERT_TRUE(k.ok()) << k.status();
  // x, w, bias; the output; two workspaces; the rows symbol.
  ASSERT_EQ(k->params.size(), 7u);
  EXPECT_EQ(k->params[3].buffer, (BufferRef{BufferRef::Kind::kOutput, 0}));
  EXPECT_EQ(k->params[4].kind, KernelParam::Kind::kWorkspace);
  EXPECT_FALSE(k->params[4].workspace_zeroed);
  EXPECT_TRUE(k->params[5].workspace_zeroed);
  EXPECT_EQ(k->params[6].kind, KernelParam::Kind::kScalar);
  const std::vector<int64_t> rows = {1000};
  // ceil(1000 / 64) x (8192 / 256) tiles, 4 slices each.
  EXPECT_EQ(*k->grid.x.Eval(rows), 16 * 32);
  EXPECT_EQ(*k->grid.y.Eval(rows), 4);
  EXPECT_EQ(*k->block.x.Eval(rows), 256);
  EXPECT_EQ(*k->params[4].workspace_bytes.Eval(rows), int64_t{16} * 32 * 4 * 64 * 256 * 4);
  EXPECT_EQ(k->dynamic_smem_bytes, 4u * (64 + 256) * 32 * 2 + 16);  // The split-K flag.
  bool aligned = false;
  for (const Precondition& p : k->preconditions) {
    aligned = aligned || (p.kind == Precondition::Kind::kAligned && p.value == 16);
  }
  EXPECT_TRUE(aligned);
  // The same inputs give the same source; another variant another entry.
  EXPECT_EQ(EmitMatmul(c, g, v)->source, k->source);
  EXPECT_NE(EmitMatmul(c, g, With(v, "stages", 3))->entry, k->entry);
}

TEST(MatmulTest, YardsticksPutTilesOnGridXAndBatchesAreBounded) {
  Chain c = Linear(DType::kBF16, -4096, 8192, 512);
  const KernelGroup g = WholeGroup(c);
  absl::StatusOr<KernelSpec> ref = EmitMatmul(c, g, MatmulHeuristic(c, g), Numerics::kReference64);
  ASSERT_TRUE(ref.ok()) << ref.status();
  const std::vector<int64_t> rows = {int64_t{1} << 20};  // 65536 x 512 tiles of 16 x 16.
  EXPECT_EQ(*ref->grid.x.Eval(rows), int64_t{65536} * 512);
  EXPECT_EQ(*ref->grid.y.Eval(rows), 1);

  // Columns past 65535 tiles of 16 (a grid's y limit) are generated, the
  // yardsticks' tiles on grid.x too, and none of them has a precondition
  // on N.
  Chain wide = Linear(DType::kBF16, 3, 1048600, 40);
  const KernelGroup wg = WholeGroup(wide);
  for (const Variant& v : MatmulSpace(wide, wg)) {
    ASSERT_TRUE(CanGenerateMatmul(wide, wg, v).ok()) << v.ToString();
  }
  for (Numerics numerics : {Numerics::kFast, Numerics::kReference64, Numerics::kEager}) {
    absl::StatusOr<KernelSpec> k = EmitFamily(wide, wg, MatmulHeuristic(wide, wg), numerics);
    ASSERT_TRUE(k.ok()) << NumericsName(numerics) << ": " << k.status();
    EXPECT_LE(k->grid.x.value(), kMaxGridDims[0]);
    EXPECT_LE(k->grid.y.value(), kMaxGridDims[1]);
    for (const Precondition& p : k->preconditions) {
      EXPECT_NE(p.kind, Precondition::Kind::kAtMost) << NumericsName(numerics) << ": " << p.description;
    }
  }
  absl::StatusOr<KernelSpec> wide_ref = EmitMatmul(wide, wg, MatmulHeuristic(wide, wg), Numerics::kReference64);
  ASSERT_TRUE(wide_ref.ok());
  EXPECT_EQ(wide_ref->grid.x.value(), 1 * 65538);

  Chain many = matmul_test::BatchedResidual(DType::kBF16, 70000, 16, 16, 16);
  absl::Status s = CanGenerateMatmul(many, WholeGroup(many), MatmulHeuristic(many, WholeGroup(many)));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(s.message(), "the batch (70000) exceeds 65535")) << s.message();
}

// Row reductions in the epilogue: every tile of the space holds whole rows,
// a narrower one is refused naming bn, and wider rows are not generated.
TEST(MatmulTest, RowEpiloguesTakeTilesAsWideAsTheRows) {
  struct Case {
    Chain chain;
    int64_t bn;
  } cases[] = {
      {matmul_test::SoftmaxOfProduct(DType::kBF16, 4096, 136, 4096), 256},
      {matmul_test::SoftmaxOfProduct(DType::kBF16, 4096, 128, 4096), 128},
      {matmul_test::SoftmaxOfProduct(DType::kBF16, 16, 64, 4096), 64},
      {matmul_test::ProductLayerNorm(DType::kF16, 1000, 40, 512, Weight::kLinear), 64},
  };
  for (const Case& k : cases) {
    const KernelGroup g = WholeGroup(k.chain);
    std::vector<Variant> space = MatmulSpace(k.chain, g);
    ASSERT_GE(space.size(), 6u);
    EXPECT_EQ(space[0], MatmulHeuristic(k.chain, g));
    for (const Variant& v : space) {
      EXPECT_EQ(v.Get("bn"), k.bn) << v.ToString();
      EXPECT_TRUE(CanGenerateMatmul(k.chain, g, v).ok()) << v.ToString();
    }
    if (k.bn > 32) {
      Variant narrow = With(With(space[0], "bn", k.bn / 2), "wn", 1);
      absl::Status s = CanGenerateMatmul(k.chain, g, narrow);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_TRUE(absl::StrContains(s.message(), "is narrower than the rows")) << s.message();
    }
  }
  const Chain few = matmul_test::SoftmaxOfProduct(DType::kBF16, 16, 256, 4096);
  EXPECT_GT(MatmulHeuristic(few, WholeGroup(few)).Get("splitk"), 1);

  const Chain wide = matmul_test::SoftmaxOfProduct(DType::kBF16, 64, 264, 256);
  absl::Status s = CanGenerateMatmul(wide, WholeGroup(wide), MatmulHeuristic(wide, WholeGroup(wide)));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(s.message(), "(reduce_max): not generated in a matmul's epilogue: "
                                             "its rows must be static and at most 256"))
      << s.message();
}

// The row yardsticks: a block per row, a thread per column; a per-row
// result is the kernel's output like any other.
TEST(MatmulTest, RowYardsticksRunABlockPerRow) {
  const Chain c = matmul_test::ProductLayerNorm(DType::kBF16, 1000, 63, 256, Weight::kLinear);
  const KernelGroup g = WholeGroup(c);
  for (Numerics n : {Numerics::kReference64, Numerics::kEager}) {
    absl::StatusOr<KernelSpec> k = EmitMatmul(c, g, MatmulHeuristic(c, g), n);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(*k->grid.x.Eval({}), 1000);
    EXPECT_EQ(*k->block.x.Eval({}), 64);
    EXPECT_TRUE(absl::StrContains(k->source, "__shared__")) << NumericsName(n);
  }
  absl::StatusOr<KernelSpec> fast = EmitMatmul(c, g, MatmulHeuristic(c, g));
  ASSERT_TRUE(fast.ok()) << fast.status();
  // Outputs: the normalised rows and each row's 1 / std.
  int outputs = 0;
  for (const KernelParam& p : fast->params) {
    outputs += p.kind == KernelParam::Kind::kBuffer && p.buffer.kind == BufferRef::Kind::kOutput;
  }
  EXPECT_EQ(outputs, 2);
  EXPECT_TRUE(absl::StrContains(fast->source, "kf_row_reduce("));
}

TEST(MatmulTest, LayoutsPickTheLdmatrixForm) {
  Chain row_major = Linear(DType::kBF16, 256, 256, 256);
  Chain linear = Linear(DType::kBF16, 256, 256, 256, Weight::kLinear);
  std::string a = EmitMatmul(row_major, WholeGroup(row_major),
                             MatmulHeuristic(row_major, WholeGroup(row_major)))->source;
  std::string b =
      EmitMatmul(linear, WholeGroup(linear), MatmulHeuristic(linear, WholeGroup(linear)))->source;
  EXPECT_TRUE(absl::StrContains(a, "kf_B_KMAJOR = false"));
  EXPECT_TRUE(absl::StrContains(b, "kf_B_KMAJOR = true"));
  EXPECT_TRUE(absl::StrContains(a, "mma.sync.aligned.m16n8k16.row.col.f32.\" KF_AB"));
  EXPECT_TRUE(absl::StrContains(a, "#define KF_AB \"bf16\""));
}

TEST(MatmulGolden, Chains) {
  struct Case {
    const char* name;
    Chain chain;
    Numerics numerics;
  } cases[] = {
      {"linear_bias_gelu_bf16", Linear(DType::kBF16, -4096, 4096, 4096), Numerics::kFast},
      {"linear_few_rows_bf16", Linear(DType::kBF16, 16, 8192, 8192, Weight::kLinear),
       Numerics::kFast},
      {"batched_residual_bf16_ref64",
       matmul_test::BatchedResidual(DType::kBF16, 4, 256, 512, 384), Numerics::kReference64},
      {"linear_bias_gelu_bf16_eager", Linear(DType::kBF16, 64, 256, 256), Numerics::kEager},
      {"softmax_in_epilogue_bf16", matmul_test::SoftmaxOfProduct(DType::kBF16, 4096, 128, 4096),
       Numerics::kFast},
      {"layer_norm_in_epilogue_bf16_ref64",
       matmul_test::ProductLayerNorm(DType::kBF16, 1000, 63, 256, Weight::kLinear),
       Numerics::kReference64},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const KernelGroup g = WholeGroup(k.chain);
    absl::StatusOr<KernelSpec> spec = EmitMatmul(k.chain, g, MatmulHeuristic(k.chain, g), k.numerics);
    ASSERT_TRUE(spec.ok()) << spec.status();
    golden::CheckGolden(absl::StrCat("matmul_", k.name), spec->source);
  }
}

}  // namespace
}  // namespace kfuse

namespace kfuse {
namespace {

// Views of a [2, 3, 8] bf16 input as the attention's operands read them.
struct ViewCase {
  Chain c;
  int32_t x = 0;
  int32_t View(OpKind kind, int32_t arg, std::vector<int64_t> shape, std::vector<int64_t> axes = {}) {
    const int32_t v = c.AddOp(kind, {arg});
    for (int64_t d : shape) c.nodes[v].shape.push_back(Dim::Static(d));
    c.nodes[v].axes = std::move(axes);
    return v;
  }
};

std::vector<int64_t> Consts(const std::vector<SizeExpr>& s) {
  std::vector<int64_t> out;
  for (const SizeExpr& e : s) out.push_back(e.is_const() ? e.value() : -1);
  return out;
}

TEST(ResolveTest, SlicesAndBroadcastMergesAreStridesOffsetsAndDivisors) {
  ViewCase v;
  v.x = v.c.AddInput(TensorType{DType::kBF16, {Dim::Static(2), Dim::Static(3), Dim::Static(8)}});
  // x[:, 1:3, 4:8]: offset 8 + 4, strides unchanged.
  const int32_t a = v.c.AddOp(OpKind::kSlice, {v.x});
  v.c.nodes[a].axis = 1, v.c.nodes[a].start = 1, v.c.nodes[a].stop = 3;
  const int32_t b = v.c.AddOp(OpKind::kSlice, {a});
  v.c.nodes[b].axis = 2, v.c.nodes[b].start = 4, v.c.nodes[b].stop = 8;
  // repeat_kv: [2, 3, 8] -> [2, 3, 1, 8] -> expand [2, 3, 4, 8] -> [2, 12, 8].
  const int32_t u = v.View(OpKind::kReshape, v.x, {2, 3, 1, 8});
  const int32_t e = v.View(OpKind::kExpand, u, {2, 3, 4, 8});
  const int32_t r = v.View(OpKind::kReshape, e, {2, 12, 8});
  // Merged with the batch too, as ATen's bmm lowering does: [24, 8].
  const int32_t all = v.View(OpKind::kReshape, e, {24, 8});
  // The group before the heads: [2, 4, 3, 8] -> [2, 12, 8] is no stride.
  const int32_t p = v.View(OpKind::kPermute, e, {}, {0, 2, 1, 3});
  const int32_t q = v.View(OpKind::kReshape, p, {2, 12, 8});
  v.c.outputs = {b, r, all, q};
  absl::StatusOr<Chain> c = Validate(v.c);
  ASSERT_TRUE(c.ok()) << c.status();
  using matmul_internal::Resolve;
  absl::StatusOr<matmul_internal::Access> sb = Resolve(*c, b, {});
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ(Consts({sb->offset}), std::vector<int64_t>{12});
  EXPECT_EQ(Consts(sb->strides), (std::vector<int64_t>{24, 8, 1}));
  EXPECT_FALSE(sb->divided());
  absl::StatusOr<matmul_internal::Access> sr = Resolve(*c, r, {});
  ASSERT_TRUE(sr.ok()) << sr.status();
  EXPECT_EQ(Consts(sr->strides), (std::vector<int64_t>{24, 8, 1}));
  EXPECT_EQ(sr->divisors, (std::vector<int64_t>{1, 4, 1}));
  absl::StatusOr<matmul_internal::Access> sa = Resolve(*c, all, {});
  ASSERT_TRUE(sa.ok()) << sa.status();
  EXPECT_EQ(Consts(sa->strides), (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(sa->divisors, (std::vector<int64_t>{4, 1}));
  absl::StatusOr<matmul_internal::Access> sq = Resolve(*c, q, {});
  ASSERT_FALSE(sq.ok());
  EXPECT_EQ(sq.status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace kfuse
