#include "codegen/row.h"

#include <algorithm>
#include <set>
#include <string>

#include "codegen/generators.h"
#include "codegen/reduce_test_chains.h"
#include "codegen/row_analysis.h"
#include "codegen/row_test_chains.h"
#include "codegen/validate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

KernelGroup Group(const Chain& c) {
  absl::StatusOr<Partition> p = PartitionChain(c);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok() || p->kernels.size() != 1) return {};
  return p->kernels[0];
}

struct Named {
  const char* name;
  Chain chain;
  size_t phases;
  size_t outputs;
};

std::vector<Named> Chains() {
  using namespace row_test;
  return {
      {"softmax", Softmax(DType::kBF16, 8, 4096), 2, 1},
      {"masked_softmax", Softmax(DType::kF32, -64, 1000, true, false), 2, 1},
      {"log_softmax", Softmax(DType::kF32, 4, 1024, false, true, true), 2, 1},
      {"layer_norm", LayerNorm(DType::kF32, 16, 5120), 2, 1},
      {"rms_norm", RmsNormResidual(DType::kBF16, 16, 4096, false), 1, 1},
      {"residual_rms_norm", RmsNormResidual(DType::kBF16, 16, 4096), 1, 2},
      {"row_stats", RowStats(DType::kF32, 3, 50257), 1, 2},
      {"odd_softmax", Softmax(DType::kBF16, 8, 1001), 2, 1},
  };
}

TEST(RowPartitionTest, NormalisationChainsAreOneRowKernel) {
  for (const Named& n : Chains()) {
    SCOPED_TRACE(n.name);
    absl::StatusOr<Partition> p = PartitionChain(n.chain);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->kernels.size(), 1u);
    EXPECT_EQ(p->kernels[0].family, Family::kRowReduction);
    EXPECT_EQ(p->kernels[0].results.size(), n.outputs);
    absl::StatusOr<RowStructure> r = AnalyzeRows(n.chain);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->phases.size(), n.phases);
  }
}

TEST(RowPartitionTest, OuterAxisReductionIsNotARowKernel) {
  Chain c;
  int32_t x = c.AddInput(TensorType{DType::kF32, {Dim::Static(4), Dim::Static(8)}});
  c.outputs = {row_test::Reduce(&c, OpKind::kReduceSum, x, 0)};
  absl::StatusOr<Partition> p = PartitionChain(row_test::Finish(c));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  EXPECT_EQ(p->kernels[0].family, Family::kReduction);
}

TEST(RowPartitionTest, MixingFramesIsUnimplemented) {
  // x[8, 8] - max(x) without keepdim broadcasts the max along columns.
  Chain c;
  int32_t x = c.AddInput(TensorType{DType::kF32, {Dim::Static(8), Dim::Static(8)}});
  int32_t m = row_test::Reduce(&c, OpKind::kReduceMax, x, 1, false);
  c.outputs = {c.AddOp(OpKind::kSub, {x, m})};
  absl::StatusOr<Partition> p = PartitionChain(row_test::Finish(c));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented) << p.status();
}

// Rows of one dim: a reduction without keepdim is rank 0, the row's one
// value, which broadcasts back over the row (softmax of a vector) and may
// be an output after element-wise work of its own (a cast, as Canonicalize
// leaves after a bf16 mean over every axis).
TEST(RowPartitionTest, TheRankZeroValueOfAVectorBroadcastsOrIsAnOutput) {
  Chain c;
  int32_t x = c.AddInput(TensorType{DType::kBF16, {Dim::Static(1000)}});
  int32_t e = c.AddOp(OpKind::kExp,
                      {c.AddOp(OpKind::kSub, {x, row_test::Reduce(&c, OpKind::kReduceMax, x, 0, false)})});
  int32_t s = row_test::Reduce(&c, OpKind::kReduceSum, e, 0, false);
  c.outputs = {c.AddOp(OpKind::kDiv, {e, s}), c.AddOp(OpKind::kNeg, {s})};
  Chain v = row_test::Finish(c);
  absl::StatusOr<Partition> p = PartitionChain(v);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  EXPECT_EQ(p->kernels[0].family, Family::kRowReduction);
  absl::StatusOr<RowStructure> r = AnalyzeRows(v);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->reduced_frame[v.outputs[1]]);
  EXPECT_FALSE(r->reduced_frame[v.outputs[0]]);
  EXPECT_TRUE(CanGenerateFamily(v, p->kernels[0], FamilyHeuristic(v, p->kernels[0])).ok());
}

TEST(RowValidationTest, BadInputIsInvalidArgumentNamingIt) {
  struct Case {
    const char* name;
    std::function<Chain()> make;
    const char* message;
  } cases[] = {
      {"axis out of range",
       [] {
         Chain c;
         int32_t x = c.AddInput(TensorType{DType::kF32, {Dim::Static(4), Dim::Static(8)}});
         c.outputs = {row_test::Reduce(&c, OpKind::kReduceMax, x, 2)};
         return c;
       },
       "axis 2 out of range for rank 2"},
      {"norm weight of the wrong length",
       [] {
         Chain c;
         int32_t x = c.AddInput(TensorType{DType::kF32, {Dim::Static(4), Dim::Static(8)}});
         int32_t w = c.AddInput(TensorType{DType::kF32, {Dim::Static(7)}});
         int32_t m = row_test::Reduce(&c, OpKind::kReduceMean, x, 1);
         c.outputs = {c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kSub, {x, m}), w})};
         return c;
       },
       "op 2 (mul)"},
      {"mask that does not broadcast",
       [] {
         Chain c;
         int32_t x = c.AddInput(TensorType{DType::kF32, {Dim::Static(4), Dim::Static(8)}});
         int32_t k = c.AddInput(TensorType{DType::kBool, {Dim::Static(3), Dim::Static(8)}});
         int32_t y = c.AddOp(OpKind::kWhere, {k, x, c.AddConstant(-HUGE_VAL)});
         c.outputs = {row_test::Reduce(&c, OpKind::kReduceMax, y, 1)};
         return c;
       },
       "op 1 (where)"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    Chain c = k.make();
    for (size_t i = 0, w = 0; i < c.nodes.size(); ++i) {
      if (c.nodes[i].kind != OpKind::kInput) c.nodes[i].wire_index = static_cast<int32_t>(w++);
    }
    absl::StatusOr<Chain> v = Validate(c);
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << v.status();
    EXPECT_THAT(std::string(v.status().message()), HasSubstr(k.message));
  }
}

TEST(RowVariantTest, IllegalVariantsNameTheParam) {
  Chain c = row_test::Softmax(DType::kBF16, 8, 4096);
  KernelGroup g = Group(c);
  auto v = [](int vec, int threads, int rows, int resident) {
    return Variant{Family::kRowReduction,
                   {{"vec", vec}, {"threads", threads}, {"rows", rows}, {"resident", resident}}};
  };
  struct Case {
    Variant v;
    const char* message;
  } cases[] = {
      {v(16, 128, 1, 1), "vec must be"},
      {v(8, 48, 1, 1), "threads must be"},
      {v(8, 512, 4, 1), "threads * rows exceeds 1024"},
      {v(8, 32, 1, 1), "resident rows need 128 registers"},  // Legal: exactly 128.
      {v(8, 128, 3, 0), "rows must be"},
  };
  EXPECT_TRUE(CanGenerateRow(c, g, cases[3].v).ok());
  for (size_t i = 0; i < std::size(cases); ++i) {
    if (i == 3) continue;
    absl::Status s = CanGenerateRow(c, g, cases[i].v);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << cases[i].v.ToString();
    EXPECT_THAT(std::string(s.message()), HasSubstr(cases[i].message));
  }
  Chain res = row_test::RmsNormResidual(DType::kBF16, 8, 4096);
  EXPECT_THAT(std::string(CanGenerateRow(res, Group(res), v(8, 32, 1, 1)).message()),
              HasSubstr("resident rows need 256 registers per thread; at most 128"));
  // An odd width: rows are peeled to their first aligned vector (resident
  // rows hold one more element a thread); inputs laid out otherwise than
  // the rows are read through windows, of 4 bytes or more.
  Chain odd = row_test::Softmax(DType::kF32, 8, 50257);
  EXPECT_TRUE(CanGenerateRow(odd, Group(odd), v(4, 1024, 1, 0)).ok());
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), v(4, 1024, 1, 1)).message()),
              HasSubstr("resident rows need 53 registers per thread; at most 16"));
  Chain odd_narrow = row_test::Softmax(DType::kF32, 8, 1001);
  EXPECT_TRUE(CanGenerateRow(odd_narrow, Group(odd_narrow), v(4, 128, 1, 1)).ok());
  Chain odd_norm = row_test::LayerNorm(DType::kF32, 8, 1001);
  absl::StatusOr<KernelSpec> odd_norm_k = EmitRow(odd_norm, Group(odd_norm), v(4, 256, 1, 0));
  ASSERT_TRUE(odd_norm_k.ok()) << odd_norm_k.status();
  // The weight and bias through windows; x, laid out as the rows, not.
  const std::string& odd_norm_src = odd_norm_k->source;
  EXPECT_NE(odd_norm_src.find("kf_ldw<kf_vec<float, 4>>(in1 + kf_b1 + kf_c)"), std::string::npos);
  EXPECT_NE(odd_norm_src.find("kf_ldw<kf_vec<float, 4>>(in2 + kf_b2 + kf_c)"), std::string::npos);
  EXPECT_EQ(odd_norm_src.find("kf_ldwh<kf_vec"), std::string::npos);
  EXPECT_EQ(odd_norm_src.find("kf_ldw<kf_vec<float, 4>>(in0"), std::string::npos);
  EXPECT_TRUE(CanGenerateRow(odd_norm, Group(odd_norm), v(1, 256, 1, 0)).ok());
  Chain odd_masked = row_test::Softmax(DType::kF32, 8, 1001, true, false);
  EXPECT_TRUE(CanGenerateRow(odd_masked, Group(odd_masked), v(4, 256, 1, 0)).ok());
  EXPECT_THAT(std::string(CanGenerateRow(odd_masked, Group(odd_masked), v(2, 256, 1, 0)).message()),
              HasSubstr("vec 2 reads input 1 off the dense rows' phase in vectors of fewer than 4 bytes"));
  Chain sym = row_test::Softmax(DType::kF32, -8, 1000);
  EXPECT_TRUE(CanGenerateRow(sym, Group(sym), v(4, 256, 1, 1)).ok());
  // resident=2: the rows staged in shared memory, which must hold them.
  EXPECT_TRUE(CanGenerateRow(odd, Group(odd), v(4, 1024, 1, 2)).ok());
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), v(4, 512, 2, 2)).message()),
              HasSubstr("resident=2 needs 402176 bytes of shared memory a block; at most"));
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), v(4, 512, 1, 4)).message()),
              HasSubstr("resident must be 0 (re-read), 1 (registers), 2 (shared memory) or 3"));
  // resident=3: rows staged whole by bulk copies, in 16-byte vectors, into
  // `stages` buffers of persistent blocks.
  auto bulk = [&](int vec, int threads, int rows, int stages, int grid) {
    Variant x = v(vec, threads, rows, 3);
    x.params["stages"] = stages;
    x.params["grid"] = grid;
    return x;
  };
  EXPECT_TRUE(CanGenerateRow(odd, Group(odd), bulk(4, 512, 1, 1, 132)).ok());
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), bulk(4, 512, 1, 2, 132)).message()),
              HasSubstr("resident=3 needs 402176 bytes of shared memory a block; at most"));
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), bulk(2, 512, 1, 1, 132)).message()),
              HasSubstr("16-byte vectors of every staged input; input 0 has 2 x 4 bytes"));
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), bulk(4, 256, 2, 1, 132)).message()),
              HasSubstr("resident=3 needs rows=1"));
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), bulk(4, 512, 1, 5, 132)).message()),
              HasSubstr("stages must be 1, 2, 3 or 4"));
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), bulk(4, 512, 1, 1, 0)).message()),
              HasSubstr("grid must be from 1 to 2^20 blocks"));
  Variant stray = v(4, 1024, 1, 0);
  stray.params["grid"] = 132;
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), stray).message()),
              HasSubstr("stages, grid and dyn are resident=3's"));
  Variant stray_dyn = v(4, 1024, 1, 0);
  stray_dyn.params["dyn"] = 1;
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), stray_dyn).message()),
              HasSubstr("stages, grid and dyn are resident=3's"));
  Variant dyn2 = bulk(4, 512, 1, 1, 132);
  dyn2.params["dyn"] = 2;
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), dyn2).message()),
              HasSubstr("dyn must be 0 or 1"));
  Chain narrow16 = row_test::Softmax(DType::kF32, 8, 48);
  EXPECT_THAT(std::string(CanGenerateRow(narrow16, Group(narrow16), bulk(4, 128, 1, 1, 132)).message()),
              HasSubstr("resident=3 needs rows of at least 64 elements"));
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), bulk(4, 64, 1, 1, 132)).message()),
              HasSubstr("resident=3 needs at least 128 threads"));
  EXPECT_EQ(RowMinComputeCapability(bulk(4, 512, 1, 1, 132)), 90);
  // Rows split over a cluster: each block's share in registers.
  auto split = [&](int vec, int threads, int rows, int resident, int n) {
    Variant x = v(vec, threads, rows, resident);
    x.params["split"] = n;
    return x;
  };
  EXPECT_TRUE(CanGenerateRow(odd, Group(odd), split(4, 512, 1, 1, 8)).ok());
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), split(4, 512, 1, 1, 2)).message()),
              HasSubstr("resident rows need 53 registers per thread; at most 32"));
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), split(4, 512, 1, 1, 3)).message()),
              HasSubstr("split must be 1, 2, 4 or 8"));
  EXPECT_THAT(std::string(CanGenerateRow(odd, Group(odd), split(4, 512, 1, 0, 8)).message()),
              HasSubstr("split rows need resident=1 and rows=1"));
  EXPECT_THAT(std::string(CanGenerateRow(c, g, split(8, 128, 2, 1, 2)).message()),
              HasSubstr("split rows need resident=1 and rows=1"));
  EXPECT_EQ(RowMinComputeCapability(split(4, 512, 1, 1, 8)), 90);
  EXPECT_EQ(RowMinComputeCapability(v(4, 512, 1, 1)), 80);
}

// A split row: one cluster of blocks a row, every block reducing its share
// and meeting the others through distributed shared memory.
TEST(RowEmitTest, SplitRowsAreClusters) {
  Chain c = row_test::Softmax(DType::kBF16, -64, 50257);
  KernelGroup g = Group(c);
  Variant v{Family::kRowReduction,
            {{"vec", 8}, {"threads", 512}, {"rows", 1}, {"resident", 1}, {"split", 8}}};
  absl::StatusOr<KernelSpec> k = EmitRow(c, g, v);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->grid.x.Eval({100}).value(), 800);
  EXPECT_EQ(k->block.x.Eval({}).value(), 512);
  EXPECT_EQ(k->cluster_x, 0u);  // Fixed in the source: any launch keeps it.
  EXPECT_NE(k->source.find("__cluster_dims__(8, 1, 1)"), std::string::npos);
  EXPECT_NE(k->source.find("kf_cluster_reduce<8>"), std::string::npos);
  EXPECT_NE(k->source.find("split=8"), std::string::npos);  // The header names it.
  // 6282 vectors a row, 786 a block.
  EXPECT_NE(k->source.find("kf_j < 786 && "), std::string::npos);
  // The fp64 yardstick is one block a row.
  absl::StatusOr<KernelSpec> ref = EmitRow(c, g, v, Numerics::kReference64);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->source.find("cluster"), std::string::npos);
  EXPECT_EQ(ref->grid.x.Eval({100}).value(), 100);
  // Split variants lead the space of wide rows, after the heuristic, the
  // heuristic of GPUs before sm_90 (looped rows) and the heuristic's rows
  // in fixed turns.
  std::vector<Variant> space = RowSpace(c, g);
  ASSERT_GT(space.size(), 3u);
  EXPECT_EQ(space[0].Get("resident"), 3);
  EXPECT_EQ(space[0].Get("dyn", 0), 1);
  EXPECT_EQ(space[1], (Variant{Family::kRowReduction,
                               {{"vec", 4}, {"threads", 1024}, {"rows", 1}, {"resident", 0}}}));
  EXPECT_EQ(RowMinComputeCapability(space[1]), 80);
  EXPECT_EQ(space[2].Get("resident"), 3);
  EXPECT_EQ(space[2].Get("dyn", 0), 0);
  EXPECT_EQ(space[3].Get("split", 1), 8);
  Chain narrow = row_test::Softmax(DType::kBF16, -64, 4096);
  for (const Variant& x : RowSpace(narrow, Group(narrow))) EXPECT_EQ(x.Get("split", 1), 1);
}

// A few long rows read in one pass into per-row values (a 1-D total is one
// row) are sliced over the grid: each block reduces its span, the row's
// last block combines the spans' values from the workspace.
TEST(RowEmitTest, FewLongRowsAreSlicedOverTheGrid) {
  Chain c = row_test::RowStats(DType::kF32, -4, int64_t{1} << 22);
  KernelGroup g = Group(c);
  const Variant h = RowHeuristic(c, g);
  ASSERT_GT(h.Get("slices", 1), 1) << h.ToString();
  EXPECT_EQ(h.Get("resident"), 0);
  absl::StatusOr<KernelSpec> k = EmitRow(c, g, h);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->grid.x.Eval({4}).value(), 4);
  EXPECT_EQ(k->grid.y.Eval({4}).value(), h.Get("slices"));
  // Many rows take fewer slices, so the workspace stays small.
  EXPECT_EQ(k->grid.y.Eval({int64_t{1} << 20}).value(), 1);
  std::vector<const KernelParam*> ws;
  for (const KernelParam& p : k->params) {
    if (p.kind == KernelParam::Kind::kWorkspace) ws.push_back(&p);
  }
  ASSERT_EQ(ws.size(), 2u);
  EXPECT_EQ(ws[0]->workspace_bytes.Eval({4}).value(), 4 * h.Get("slices") * 8 * 2);  // Max and sum.
  EXPECT_FALSE(ws[0]->workspace_zeroed);
  EXPECT_EQ(ws[1]->workspace_bytes.Eval({4}).value(), 4 * 4);  // A counter a row.
  EXPECT_TRUE(ws[1]->workspace_zeroed);
  EXPECT_THAT(k->source, HasSubstr("kf_slices_reduce<"));
  EXPECT_THAT(k->source, HasSubstr("atomicAdd(kf_cnt + kf_r, 1u) == gridDim.y - 1"));
  // The space keeps fewer slices and the unsliced rows.
  bool unsliced = false;
  for (const Variant& v : RowSpace(c, g)) unsliced = unsliced || (v.Get("slices", 1) == 1 && v.Get("resident") == 0);
  EXPECT_TRUE(unsliced);
  // The fp64 yardstick is one block a row.
  absl::StatusOr<KernelSpec> ref = EmitRow(c, g, h, Numerics::kReference64);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->source.find("kf_slices_reduce"), std::string::npos);
  // Many rows are not sliced; nor are rows read twice or written whole.
  Chain many = row_test::RowStats(DType::kF32, 4096, 65536);
  EXPECT_EQ(RowHeuristic(many, Group(many)).Get("slices", 1), 1);
  Chain softmax = row_test::Softmax(DType::kF32, -4, int64_t{1} << 20);
  KernelGroup sg = Group(softmax);
  EXPECT_EQ(RowHeuristic(softmax, sg).Get("slices", 1), 1);
  Variant sliced{Family::kRowReduction, {{"vec", 4}, {"threads", 512}, {"rows", 1}, {"resident", 0}, {"slices", 8}}};
  EXPECT_THAT(CanGenerateRow(softmax, sg, sliced).message(),
              HasSubstr("sliced rows need one pass over the row and per-row outputs only"));
  sliced.params["resident"] = 1;
  EXPECT_THAT(CanGenerateRow(c, g, sliced).message(), HasSubstr("sliced rows need resident=0 and rows=1"));
  sliced.params["resident"] = 0;
  sliced.params["slices"] = 3;
  EXPECT_THAT(CanGenerateRow(c, g, sliced).message(), HasSubstr("slices must be a power of two, at most 1024"));
}

// Bulk-staged rows: persistent blocks, at most `grid`, each row's inputs
// copied whole into one of `stages` shared-memory buffers.
TEST(RowEmitTest, BulkRowsArePersistent) {
  Chain c = row_test::RmsNormResidual(DType::kBF16, -64, 8192);
  KernelGroup g = Group(c);
  Variant v{Family::kRowReduction,
            {{"vec", 8}, {"threads", 512}, {"rows", 1}, {"resident", 3}, {"stages", 2},
             {"grid", 132}}};
  absl::StatusOr<KernelSpec> k = EmitRow(c, g, v);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->grid.x.Eval({100}).value(), 100);
  EXPECT_EQ(k->grid.x.Eval({1000}).value(), 132);
  // Two inputs (x and the residual), two buffers each of 8192 bf16.
  EXPECT_EQ(k->dynamic_smem_bytes, 2u * 2 * 8192 * 2);
  EXPECT_NE(k->source.find("cp.async.bulk.shared::cluster.global"), std::string::npos);
  // Both inputs' copies, when a block starts and when it takes its next row.
  size_t copies = 0;
  for (size_t at = 0; (at = k->source.find("kf_bulk_load(kf_S", at)) != std::string::npos; ++at) {
    ++copies;
  }
  EXPECT_EQ(copies, 4u);
  // The row a block fetches next is named apart from the row it is on.
  EXPECT_NE(k->source.find("const long long kf_r = kf_next;"), std::string::npos);
  EXPECT_EQ(k->source.find("kf_r = kf_r"), std::string::npos);
  // The fp64 yardstick is one block a row, no staging.
  absl::StatusOr<KernelSpec> ref = EmitRow(c, g, v, Numerics::kReference64);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->grid.x.Eval({1000}).value(), 1000);
  EXPECT_EQ(ref->dynamic_smem_bytes, 0u);
  EXPECT_EQ(ref->source.find("kf_bulk_load"), std::string::npos);
}

// dyn=1: a bulk-staged block takes its rows from a counter in a zeroed
// 4-byte workspace, the kernel's last parameter; thread 0 takes one for
// each buffer it fills and posts it where the block reads it after a
// barrier. The heuristic takes it; the space keeps its fixed twin.
TEST(RowEmitTest, BulkRowsTakeTheirRowsFromACounter) {
  Chain c = row_test::Softmax(DType::kBF16, -64, 50257);
  KernelGroup g = Group(c);
  Variant v = RowHeuristic(c, g);
  ASSERT_EQ(v.Get("dyn", 0), 1) << v.ToString();
  absl::StatusOr<KernelSpec> k = EmitRow(c, g, v);
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_EQ(k->params.size(), 4u);  // x, y, the row count, the counter.
  const KernelParam& next = k->params.back();
  EXPECT_EQ(next.kind, KernelParam::Kind::kWorkspace);
  EXPECT_TRUE(next.workspace_zeroed);
  EXPECT_EQ(next.workspace_bytes.Eval({}).value(), 4);
  // A 32-bit counter: the launch checks the row count.
  ASSERT_FALSE(k->preconditions.empty());
  EXPECT_EQ(k->preconditions.back().kind, Precondition::Kind::kAtMost);
  EXPECT_THAT(k->preconditions.back().description, HasSubstr("32-bit row counter"));
  EXPECT_NE(k->source.find("unsigned int* __restrict__ kf_next_row)"), std::string::npos);
  // Taken at the start (one a buffer) and once a row; the row the block
  // works on is read from the posted slots, never from blockIdx.
  size_t takes = 0;
  for (size_t at = 0; (at = k->source.find("atomicAdd(kf_next_row, 1u)", at)) != std::string::npos;
       ++at) {
    ++takes;
  }
  EXPECT_EQ(takes, 2u);
  EXPECT_NE(k->source.find("const long long kf_r = kf_rows[kf_it % 3];"), std::string::npos);
  EXPECT_NE(k->source.find("if (threadIdx.x == 0) kf_rows[(kf_it + 2) % 3] = kf_take;\n"
                           "  __syncthreads();"),
            std::string::npos);
  EXPECT_EQ(k->source.find("blockIdx.x + kf_it"), std::string::npos);
  // The fixed schedule, its twin in the space, has no counter.
  Variant fixed = v;
  fixed.params.erase("dyn");
  const std::vector<Variant> space = RowSpace(c, g);
  EXPECT_NE(std::find(space.begin(), space.end(), fixed), space.end());
  absl::StatusOr<KernelSpec> f = EmitRow(c, g, fixed);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->params.size(), 3u);
  EXPECT_EQ(f->source.find("atomicAdd"), std::string::npos);
  // The fp64 yardstick is one block a row: no counter either.
  absl::StatusOr<KernelSpec> ref = EmitRow(c, g, v, Numerics::kReference64);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->params.size(), 3u);
}

// Bulk-staged f32 softmax: exp(x - max) is written over the row's buffer
// by the pass that sums it and read back by the outputs' pass (one exp an
// element, no online pass); the buffer's next copy is fenced after those
// writes. log_softmax reads x again for its outputs, and a bf16 buffer
// cannot hold a float, so both keep the online pass.
TEST(RowEmitTest, BulkSoftmaxKeepsItsExpInTheBuffer) {
  const auto emit = [](const Chain& c) {
    KernelGroup g = Group(c);
    Variant v = RowHeuristic(c, g);
    EXPECT_EQ(v.Get("resident"), 3) << v.ToString();
    absl::StatusOr<KernelSpec> k = EmitRow(c, g, v);
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? k->source : std::string();
  };
  const std::string kept = "*>(const_cast<float*>(kf_s0) + kf_so + kf_c) = kf_k;";
  const std::string fence = "fence.proxy.async.shared::cta;\" ::: \"memory\");\n  __syncthreads();";
  const std::string f32 = emit(row_test::Softmax(DType::kF32, -64, 50257));
  EXPECT_NE(f32.find(kept), std::string::npos);
  EXPECT_NE(f32.find(fence), std::string::npos);
  EXPECT_NE(f32.find("kf_he"), std::string::npos);  // The columns around the vectors.
  EXPECT_EQ(f32.find("kf_team_reduce_ms"), std::string::npos);
  // A mask shared by every row (a width of whole vectors: the mask's rows
  // cannot be peeled): the masked x goes over x, then its exp over that.
  const std::string masked = emit(row_test::Softmax(DType::kF32, -64, 50256, true, false));
  size_t stores = 0;
  for (size_t at = 0; (at = masked.find(kept, at)) != std::string::npos; ++at) ++stores;
  EXPECT_EQ(stores, 2u);
  for (const Chain& c : {row_test::Softmax(DType::kF32, -64, 50257, false, true, true),
                         row_test::Softmax(DType::kBF16, -64, 50257)}) {
    const std::string src = emit(c);
    EXPECT_EQ(src.find("const_cast<float*>"), std::string::npos);
    EXPECT_EQ(src.find(fence), std::string::npos);
    EXPECT_NE(src.find("kf_team_reduce_ms"), std::string::npos);
  }
}

// A quotient by a per-row value: 16-bit results multiply by the row's
// reciprocal; f32 results divide, as eager does. A norm's rsqrt, once a
// row, is correctly rounded. f32 sums meet across threads in double.
// Eager numerics keep PyTorch's forms.
TEST(RowEmitTest, RowValuesRoundNoWorseThanEager) {
  const auto source = [](const Chain& c) {
    KernelGroup g = Group(c);
    absl::StatusOr<KernelSpec> k = EmitRow(c, g, RowHeuristic(c, g));
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? k->source : std::string();
  };
  const std::string f32 = source(row_test::Softmax(DType::kF32, -64, 4096));
  const std::string bf16 = source(row_test::Softmax(DType::kBF16, -64, 4096));
  EXPECT_EQ(f32.find("((float)1 / r"), std::string::npos);
  EXPECT_NE(f32.find(" / r"), std::string::npos);
  EXPECT_NE(bf16.find("((float)1 / r"), std::string::npos);
  EXPECT_NE(f32.find(">((double)a"), std::string::npos);
  EXPECT_EQ(bf16.find("(double)"), std::string::npos);
  for (DType t : {DType::kF32, DType::kBF16}) {
    const std::string norm = source(row_test::LayerNorm(t, -64, 4096));
    EXPECT_EQ(norm.find("rsqrtf("), std::string::npos);
    EXPECT_NE(norm.find("__frsqrt_rn(r"), std::string::npos);
    // f32's (x - mean) * r * w rounds once; 16-bit results round far above.
    EXPECT_EQ(norm.find("= kf_mul3(") != std::string::npos, t == DType::kF32) << norm;
  }
  EXPECT_NE(source(row_test::RmsNormResidual(DType::kF32, -64, 4096)).find("= kf_mul3("),
            std::string::npos);
  // Eager numerics keep PyTorch's rsqrtf and float tree.
  Chain ln = row_test::LayerNorm(DType::kF32, -64, 4096);
  KernelGroup g = Group(ln);
  absl::StatusOr<KernelSpec> eager = EmitRow(ln, g, RowHeuristic(ln, g), Numerics::kEager);
  ASSERT_TRUE(eager.ok()) << eager.status();
  EXPECT_NE(eager->source.find("rsqrtf(r"), std::string::npos);
  EXPECT_EQ(eager->source.find("(double)"), std::string::npos);
  EXPECT_EQ(eager->source.find("kf_mul3"), std::string::npos);
}

// A pick of a computed value (an ATen trace's nll_loss of _log_softmax):
// computed once a row from the inputs at the label's column, so the row
// kernel compares no column and makes one pass, the online max and sum of
// exps, looped as F.cross_entropy's is.
TEST(RowEmitTest, PicksOfComputedValuesReadTheLabelsColumnOnce) {
  Chain c = reduce_test::NllLoss(DType::kBF16, 8, 50257, /*of_log_softmax=*/true);
  absl::StatusOr<Partition> p = PartitionChain(c);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 2u);
  const KernelGroup& g = p->kernels[0];
  const Variant h = FamilyHeuristic(c, g);
  EXPECT_EQ(h, (Variant{Family::kRowReduction,
                        {{"vec", 4}, {"threads", 512}, {"rows", 1}, {"resident", 0}}}));
  for (Numerics n : {Numerics::kFast, Numerics::kReference64}) {
    absl::StatusOr<KernelSpec> k = EmitFamily(c, g, h, n);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_NE(k->source.find("kf_pick"), std::string::npos);
    EXPECT_EQ(k->source.find("kf_col"), std::string::npos);
  }
  // A label known only after a phase (a row's max of integers) is picked
  // once that phase's result is.
  Chain late;
  int32_t lx = late.AddInput(TensorType{DType::kF32, {Dim::Static(8), Dim::Static(100)}});
  int32_t ly = late.AddInput(TensorType{DType::kI32, {Dim::Static(8), Dim::Static(100)}});
  int32_t lv = reduce_test::Reduce(&late, OpKind::kReduceMax, ly, {1}, true);
  late.outputs = {reduce_test::PickColumn(&late, lx, lv, 100, true)};
  late = reduce_test::Finish(std::move(late));
  KernelGroup gl = Group(late);
  absl::StatusOr<KernelSpec> kl = EmitRow(late, gl, RowHeuristic(late, gl));
  ASSERT_TRUE(kl.ok()) << kl.status();
  const size_t label_at = kl->source.find("const int r" + std::to_string(lv) + " = ");
  const size_t pick_at = kl->source.find("r" + std::to_string(lv) + " >= 0");
  ASSERT_NE(label_at, std::string::npos) << kl->source;
  ASSERT_NE(pick_at, std::string::npos) << kl->source;
  EXPECT_LT(label_at, pick_at);
  // A value computed from the column itself is compared element by element.
  Chain col;
  int32_t x = col.AddInput(TensorType{DType::kF32, {Dim::Static(8), Dim::Static(1000)}});
  int32_t labels = col.AddInput(TensorType{DType::kI32, {Dim::Static(8)}});
  int32_t column = reduce_test::LabelColumn(&col, labels, Dim::Static(8), 1000);
  int32_t iota = col.AddOp(OpKind::kIota, {});
  col.nodes[iota].shape = {Dim::Static(1000)};
  col.nodes[iota].dtype = DType::kF32;
  int32_t shifted = col.AddOp(OpKind::kAdd, {x, iota});
  col.outputs = {reduce_test::PickColumn(&col, shifted, column, 1000, true)};
  col = reduce_test::Finish(std::move(col));
  KernelGroup gc = Group(col);
  absl::StatusOr<KernelSpec> k = EmitRow(col, gc, RowHeuristic(col, gc));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->source.find("kf_pick"), std::string::npos);
  EXPECT_NE(k->source.find("kf_col"), std::string::npos);
}

// A looped pass loads without a kf_valid guard (rows past kf_R read row
// 0, the peel head of that row included); register-resident rows keep it.
TEST(RowEmitTest, LoopedPassesLoadUnguarded) {
  Chain c = row_test::Softmax(DType::kBF16, -64, 1001, /*masked=*/true);
  KernelGroup g = Group(c);
  const auto source = [&](int resident) {
    Variant v{Family::kRowReduction,
              {{"vec", 8}, {"threads", 32}, {"rows", 4}, {"resident", resident}}};
    absl::StatusOr<KernelSpec> k = EmitRow(c, g, v);
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? k->source : std::string();
  };
  const std::string looped = source(0), resident = source(1);
  EXPECT_EQ(looped.find("if (kf_valid) {"), std::string::npos);
  EXPECT_NE(looped.find("(8 - (kf_valid ? kf_r : 0) * kf_W % 8) % 8"), std::string::npos);
  EXPECT_NE(resident.find("if (kf_valid) {"), std::string::npos);
}

// Inputs at strides of their own (a slice of a wider tensor, a padded row,
// a transpose) are read where they lie: vectors where every row of theirs
// starts at the dense rows' phase, vectors through windows where rows
// start elsewhere, element by element where a row's elements are not
// consecutive; the heuristic and the space keep to that.
TEST(RowVariantTest, StridedRowsTakeTheVectorsTheirPhaseAllows) {
  using row_test::Strided;
  const auto vecs = [](const Chain& c) {
    std::set<int64_t> out;
    for (const Variant& v : RowSpace(c, Group(c))) out.insert(v.Get("vec"));
    return out;
  };
  const auto vec8 = [](const Chain& c, int resident) {
    return CanGenerateRow(c, Group(c), Variant{Family::kRowReduction, {{"vec", 8},
                                                                       {"threads", 128},
                                                                       {"rows", 1},
                                                                       {"resident", resident}}});
  };
  // One of q, k, v sliced from a fused [T, 3 x 4096] projection: aligned.
  Chain qkv = Strided(row_test::Softmax(DType::kBF16, -64, 4096), 0, {3 * 4096, 1});
  EXPECT_EQ(RowHeuristic(qkv, Group(qkv)).Get("vec"), 8);
  EXPECT_TRUE(vec8(qkv, 1).ok());
  EXPECT_TRUE(vecs(qkv).count(8));
  const auto windowed = [](const Chain& c, int vec, int resident) {
    absl::StatusOr<KernelSpec> k =
        EmitRow(c, Group(c), Variant{Family::kRowReduction, {{"vec", vec},
                                                             {"threads", 128},
                                                             {"rows", 1},
                                                             {"resident", resident}}});
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() && k->source.find("kf_ldw") != std::string::npos;
  };
  EXPECT_FALSE(windowed(qkv, 8, 1));
  // Rows 4100 apart: 4-element vectors stay aligned, 8-element ones are
  // read through windows (every other row starts 8 bytes off).
  Chain four = Strided(row_test::Softmax(DType::kBF16, -64, 4096), 0, {4100, 1});
  EXPECT_TRUE(windowed(four, 8, 0));
  EXPECT_TRUE(windowed(four, 8, 1));
  EXPECT_FALSE(windowed(four, 4, 0));
  EXPECT_EQ(RowHeuristic(four, Group(four)).Get("vec"), 8);
  EXPECT_EQ(*vecs(four).rbegin(), 8);
  // A peeled width whose padded rows keep the dense rows' phase mod 8.
  Chain peeled = Strided(row_test::Softmax(DType::kBF16, -64, 1001), 0, {1009, 1});
  EXPECT_TRUE(vec8(peeled, 0).ok());
  EXPECT_TRUE(vecs(peeled).count(8));
  // A vocabulary padded from 50257 to 50304: the phase moves by 47 a row,
  // so through windows; bulk-staged, each row is copied from the 16-byte
  // unit holding its first element (kf_q0 elements before it), and read
  // from the buffer through windows, kf_sh0 elements in.
  Chain vocab = Strided(row_test::Softmax(DType::kBF16, -4096, 50257), 0, {50304, 1});
  EXPECT_EQ(vecs(vocab), (std::set<int64_t>{1, 4, 8}));
  EXPECT_TRUE(windowed(vocab, 8, 2));
  const Variant bulk = RowHeuristic(vocab, Group(vocab));
  ASSERT_EQ(bulk.Get("resident"), 3);
  EXPECT_EQ(bulk.Get("vec"), 8);
  absl::StatusOr<KernelSpec> bulk_k = EmitRow(vocab, Group(vocab), bulk);
  ASSERT_TRUE(bulk_k.ok()) << bulk_k.status();
  for (const char* want : {"in0 + kf_b0 + kf_h - kf_q0, ((kf_n + kf_q0) * 2 + 15) / 16 * 16",
                           "kf_ldw<kf_vec<__kf_bf16, 8>>(kf_s0 + kf_so + kf_c + kf_sh0)"}) {
    EXPECT_NE(bulk_k->source.find(want), std::string::npos) << want;
  }
  // A transposed input: a row's elements 7 apart.
  Chain transposed = Strided(row_test::LayerNorm(DType::kF32, 7, 1024), 0, {1, 7});
  EXPECT_THAT(CanGenerateRow(transposed, Group(transposed),
                             Variant{Family::kRowReduction,
                                     {{"vec", 4}, {"threads", 128}, {"rows", 1}, {"resident", 0}}})
                  .message(),
              HasSubstr("whose elements are 7 apart, as vectors"));
  EXPECT_EQ(vecs(transposed), std::set<int64_t>{1});
}

TEST(RowEmitTest, StridedRowsAreAddressedAtTheirStrides) {
  const auto source = [](const Chain& c) {
    absl::StatusOr<KernelSpec> k = EmitRow(c, Group(c), RowHeuristic(c, Group(c)));
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? k->source : std::string();
  };
  const std::string qkv =
      source(row_test::Strided(row_test::Softmax(DType::kBF16, -64, 4096), 0, {3 * 4096, 1}));
  EXPECT_THAT(qkv, HasSubstr("const long long kf_b0 = kf_c0 * 12288LL;"));
  const std::string padded = source(row_test::PaddedSoftmax3D(DType::kF32, 2, 3, 1000, 1008, 4096));
  EXPECT_THAT(padded, HasSubstr("const long long kf_b0 = kf_c0 * 4096LL + kf_c1 * 1008LL;"));
  const std::string transposed =
      source(row_test::Strided(row_test::LayerNorm(DType::kF32, 7, 1024), 0, {1, 7}));
  EXPECT_THAT(transposed, HasSubstr("const long long kf_b0 = kf_c0 * 1LL;"));
  EXPECT_THAT(transposed, HasSubstr("in0 + kf_b0 + kf_c * 7LL"));
}

// The online pass's lane sums: an f32 lane of more than 64 terms is
// Kahan-compensated (a near-uniform row's terms otherwise round the same
// way at every step), 64 or fewer plain (compensation costs up to 13%);
// 16-bit results and a symbolic width as their rule says.
TEST(RowEmitTest, OnlineSumsCompensatePastSixtyFourTermsALane) {
  const auto online = [](const Chain& c, int threads, int vec) {
    Variant v{Family::kRowReduction,
              {{"vec", vec}, {"threads", threads}, {"rows", 1}, {"resident", 0}}};
    absl::StatusOr<KernelSpec> k = EmitRow(c, Group(c), v);
    EXPECT_TRUE(k.ok()) << k.status();
    if (!k.ok()) return std::string();
    const size_t begin = k->source.find("in one pass");
    const size_t end = k->source.find("kf_team_reduce_ms<", begin);
    EXPECT_NE(begin, std::string::npos);
    return k->source.substr(begin, end - begin);
  };
  const auto compensated = [](const std::string& pass) {
    return pass.find("kf_d = ") != std::string::npos && pass.find("*= kf_k; e") != std::string::npos;
  };
  const Chain f32 = row_test::Softmax(DType::kF32, -64, 50257);
  EXPECT_TRUE(compensated(online(f32, 128, 4)));   // 99 terms a lane.
  EXPECT_TRUE(compensated(online(f32, 512, 1)));   // 99.
  EXPECT_FALSE(compensated(online(f32, 256, 4)));  // 50.
  EXPECT_FALSE(compensated(online(f32, 512, 4)));  // 25.
  EXPECT_FALSE(compensated(online(row_test::Softmax(DType::kBF16, -64, 50257), 32, 4)));
}

// policy=1: a register-resident row's loads mark its lines L2 evict_last
// (rows of 4-byte elements by default; the space keeps the heuristic's
// plain twin). Other schedules do not take it; the fp64 yardstick ignores
// it.
TEST(RowEmitTest, ResidentRowsLoadUnderThePolicy) {
  Chain c = row_test::LayerNorm(DType::kF32, -64, 4096);
  KernelGroup g = Group(c);
  Variant h = RowHeuristic(c, g);
  ASSERT_EQ(h.Get("policy", 0), 1) << h.ToString();
  absl::StatusOr<KernelSpec> k = EmitRow(c, g, h);
  ASSERT_TRUE(k.ok()) << k.status();
  // The row's loads carry it; the weight and bias (every row's) do not.
  EXPECT_NE(k->source.find("kf_ldh(reinterpret_cast<const kf_vec<float, 4>*>(in0 + kf_b0 + kf_c), "
                           "kf_keep)"),
            std::string::npos);
  EXPECT_EQ(k->source.find("kf_ldh(reinterpret_cast<const kf_vec<float, 4>*>(in1"), std::string::npos);
  absl::StatusOr<KernelSpec> ref = EmitRow(c, g, h, Numerics::kReference64);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->source.find("policy=1"), std::string::npos);  // Its header.
  const std::vector<Variant> space = RowSpace(c, g);
  Variant plain = h;
  plain.params.erase("policy");
  EXPECT_NE(std::find(space.begin(), space.end(), plain), space.end());
  // bf16 rows keep plain loads.
  Chain b = row_test::LayerNorm(DType::kBF16, -64, 4096);
  EXPECT_EQ(RowHeuristic(b, Group(b)).Get("policy", 0), 0);
  for (const Variant& v : RowSpace(b, Group(b))) EXPECT_EQ(v.Get("policy", 0), 0) << v.ToString();
  // Only register-resident rows take it.
  for (int resident : {0, 2, 3}) {
    Variant v = h;
    v.params["resident"] = resident;
    if (resident == 3) {
      v.params["stages"] = 1;
      v.params["grid"] = 132;
    }
    EXPECT_THAT(std::string(CanGenerateRow(c, g, v).message()),
                HasSubstr("policy=1 is for register-resident rows"));
  }
  Variant two = h;
  two.params["policy"] = 2;
  EXPECT_THAT(std::string(CanGenerateRow(c, g, two).message()), HasSubstr("policy must be 0 or 1"));
}

// A row no input of which varies by row (one row here) still keeps its
// computed values in registers: its resident variants stay within the
// register budget a thread, and a row of 2^40 elements sizes none of them
// by an overflowing product (a fuzzer finding).
TEST(RowVariantTest, ResidentVariantsOfASingleRowStayWithinTheRegisterBudget) {
  for (int64_t width : {int64_t{1024}, int64_t{8192}, int64_t{50257}, int64_t{1} << 40}) {
    SCOPED_TRACE(width);
    Chain c = row_test::Softmax(DType::kF32, 1, width);
    KernelGroup g = Group(c);
    EXPECT_TRUE(CanGenerateRow(c, g, RowHeuristic(c, g)).ok()) << RowHeuristic(c, g).ToString();
    int resident = 0;
    for (const Variant& v : RowSpace(c, g)) {
      if (v.params.at("resident") != 1) continue;
      ++resident;
      auto param = [&](const char* name) {
        auto it = v.params.find(name);
        return it == v.params.end() ? int64_t{1} : int64_t{it->second};
      };
      const int64_t vec = param("vec"), threads = param("threads"), rows = param("rows");
      const int64_t share = ((width / vec) + param("split") - 1) / param("split");
      const int64_t slots = (share + threads - 1) / threads * vec;
      EXPECT_LE(slots, std::min<int64_t>(128, 16384 / (threads * rows))) << v.ToString();
    }
    EXPECT_EQ(resident > 0, width < (int64_t{1} << 40));
  }
}

TEST(RowVariantTest, HeuristicAndSpaceAreLegalAndStable) {
  for (const Named& n : Chains()) {
    SCOPED_TRACE(n.name);
    KernelGroup g = Group(n.chain);
    Variant h = RowHeuristic(n.chain, g);
    EXPECT_TRUE(CanGenerateRow(n.chain, g, h).ok()) << h.ToString();
    std::vector<Variant> space = RowSpace(n.chain, g);
    ASSERT_FALSE(space.empty());
    EXPECT_LE(space.size(), 52u);
    EXPECT_EQ(space[0], h);
    EXPECT_EQ(space, RowSpace(n.chain, g));
    for (const Variant& v : space) {
      absl::StatusOr<KernelSpec> k = EmitFamily(n.chain, g, v);
      ASSERT_TRUE(k.ok()) << v.ToString() << ": " << k.status();
      EXPECT_EQ(k->source, EmitRow(n.chain, g, v)->source);
      EXPECT_EQ(k->source.find("rows\""), std::string::npos);  // No client names.
    }
  }
  EXPECT_EQ(GeneratorVersion(Family::kRowReduction), "row/20");
}

TEST(RowVariantTest, HeuristicPicksTheSchedule) {
  struct Case {
    Chain chain;
    Variant want;
  } cases[] = {
      {row_test::Softmax(DType::kBF16, 8, 4096),
       Variant{Family::kRowReduction, {{"vec", 8}, {"threads", 128}, {"rows", 1}, {"resident", 1}}}},
      // Wide rows: staged whole by bulk copies, 512 threads, as many row
      // buffers as fit (201 KB of shared memory either way); one block an SM.
      {row_test::Softmax(DType::kF32, 8, 50257),
       Variant{Family::kRowReduction,
               {{"vec", 4}, {"threads", 512}, {"rows", 1}, {"resident", 3}, {"stages", 1},
                {"grid", 132}, {"dyn", 1}}}},
      {row_test::Softmax(DType::kBF16, 8, 50257),
       Variant{Family::kRowReduction,
               {{"vec", 8}, {"threads", 512}, {"rows", 1}, {"resident", 3}, {"stages", 2},
                {"grid", 132}, {"dyn", 1}}}},
      // Read in one pass (a cross-entropy's online max and sum of exps, its
      // label's logit picked once a row): looped, 512 threads.
      {reduce_test::CrossEntropyWithLabels(DType::kBF16, 8, 50257),
       Variant{Family::kRowReduction, {{"vec", 4}, {"threads", 512}, {"rows", 1}, {"resident", 0}}}},
      // 40 elements a thread stay in registers.
      {row_test::LayerNorm(DType::kBF16, 8, 5120),
       Variant{Family::kRowReduction, {{"vec", 8}, {"threads", 128}, {"rows", 1}, {"resident", 1}}}},
      // Two inputs that differ by row: twice the threads, 16 elements each.
      {row_test::RmsNormResidual(DType::kBF16, 8, 4096),
       Variant{Family::kRowReduction, {{"vec", 8}, {"threads", 256}, {"rows", 1}, {"resident", 1}}}},
      // Rows of 4-byte elements load with an L2 evict_last policy.
      {row_test::Softmax(DType::kF32, 8, 128),
       Variant{Family::kRowReduction,
               {{"vec", 4}, {"threads", 32}, {"rows", 4}, {"resident", 1}, {"policy", 1}}}},
  };
  for (const Case& k : cases) EXPECT_EQ(RowHeuristic(k.chain, Group(k.chain)), k.want);
  // Rows too long for registers at any team size are looped, and every
  // heuristic variant can be generated.
  for (int64_t w : {16384, 32768, 65536, 100000}) {
    for (DType t : {DType::kBF16, DType::kF32}) {
      Chain c = row_test::Softmax(t, 8, w);
      Variant h = RowHeuristic(c, Group(c));
      EXPECT_TRUE(CanGenerateRow(c, Group(c), h).ok()) << w << " " << h.ToString();
    }
  }
  Chain wide = row_test::Softmax(DType::kBF16, 8, 32768);
  EXPECT_EQ(RowHeuristic(wide, Group(wide)),
            (Variant{Family::kRowReduction,
                     {{"vec", 8}, {"threads", 512}, {"rows", 1}, {"resident", 3}, {"stages", 2},
                      {"grid", 132}, {"dyn", 1}}}));
  // Where bulk copies cannot serve (a mask of 1-byte elements beside bf16
  // rows: 8-byte vectors of it), wide rows are looped, 1024 threads of
  // 4-element vectors.
  Chain masked = row_test::Softmax(DType::kBF16, 8, 32768, /*masked=*/true);
  EXPECT_EQ(RowHeuristic(masked, Group(masked)),
            (Variant{Family::kRowReduction,
                     {{"vec", 4}, {"threads", 1024}, {"rows", 1}, {"resident", 0}}}));
}

// The fp64 yardstick of any variant is a scalar loop over the row, whatever
// the variant's vector width or residency (it must cover every column).
TEST(RowEmitTest, ReferenceIsScalarAndLooped) {
  for (const Named& n : Chains()) {
    SCOPED_TRACE(n.name);
    KernelGroup g = Group(n.chain);
    for (const Variant& v : RowSpace(n.chain, g)) {
      absl::StatusOr<KernelSpec> k = EmitRow(n.chain, g, v, Numerics::kReference64);
      ASSERT_TRUE(k.ok()) << v.ToString() << ": " << k.status();
      EXPECT_EQ(k->source.find("kf_vec<"), std::string::npos) << v.ToString();
      EXPECT_EQ(k->source.find("kf_i <"), std::string::npos) << v.ToString();  // Not resident.
      EXPECT_NE(k->source.find("for (long long kf_c = (long long)kf_lane * 1;"), std::string::npos);
    }
  }
}

TEST(RowEmitTest, StagedRowsAskForTheirSharedMemory) {
  Chain c = row_test::Softmax(DType::kBF16, -64, 50257);
  KernelGroup g = Group(c);
  Variant v{Family::kRowReduction, {{"vec", 8}, {"threads", 1024}, {"rows", 1}, {"resident", 2}}};
  absl::StatusOr<KernelSpec> k = EmitRow(c, g, v);
  ASSERT_TRUE(k.ok()) << k.status();
  // 50257 + 8 columns rounded up to 16, bf16.
  EXPECT_EQ(k->dynamic_smem_bytes, 50272u * 2);
  EXPECT_NE(k->source.find("extern __shared__"), std::string::npos);
  absl::StatusOr<KernelSpec> ref = EmitRow(c, g, v, Numerics::kReference64);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->dynamic_smem_bytes, 0u);  // The yardstick reads global memory.
}

// L2 policies: a looped row's earlier passes keep it, its last pass lets
// it go, also when that pass is a reduction's (no full-row outputs);
// register-resident rows are plain.
TEST(RowEmitTest, LoopedRowsCarryL2Policies) {
  auto looped = [](int threads) {
    return Variant{Family::kRowReduction,
                   {{"vec", 4}, {"threads", threads}, {"rows", 1}, {"resident", 0}}};
  };
  Chain soft = row_test::Softmax(DType::kF32, -64, 4096);
  absl::StatusOr<KernelSpec> k = EmitRow(soft, Group(soft), looped(256));
  ASSERT_TRUE(k.ok()) << k.status();
  const std::string& src = k->source;
  const size_t keep = src.find("kf_keep);"), stream = src.find("kf_stream);");
  ASSERT_NE(keep, std::string::npos);
  ASSERT_NE(stream, std::string::npos);
  EXPECT_LT(keep, stream);
  EXPECT_NE(src.find("kf_sth("), std::string::npos);
  // Max and sum, per-row outputs only: one pass, the row's last read.
  Chain stats = row_test::RowStats(DType::kF32, 8, 4096);
  k = EmitRow(stats, Group(stats), looped(256));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->source.find("kf_keep);"), std::string::npos) << k->source;
  EXPECT_NE(k->source.find("kf_stream);"), std::string::npos);
  Variant resident = looped(256);
  resident.params["resident"] = 1;
  k = EmitRow(soft, Group(soft), resident);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->source.find("kf_ldh"), std::string::npos);
  EXPECT_EQ(k->source.find("kf_sth"), std::string::npos);
}

TEST(RowEmitTest, LaunchContract) {
  Chain c = row_test::RmsNormResidual(DType::kBF16, -1024, 4096);
  KernelGroup g = Group(c);
  Variant v = RowHeuristic(c, g);
  absl::StatusOr<KernelSpec> k = EmitRow(c, g, v);
  ASSERT_TRUE(k.ok()) << k.status();
  // 3 inputs, 2 outputs, 1 symbol.
  ASSERT_EQ(k->params.size(), 6u);
  EXPECT_EQ(k->params[5].kind, KernelParam::Kind::kScalar);
  EXPECT_EQ(k->grid.x.Eval({1001}).value(), (1001 + v.Get("rows") - 1) / v.Get("rows"));
  EXPECT_EQ(k->block.x.Eval({}).value(), v.Get("threads") * v.Get("rows"));
  int aligned = 0;
  for (const Precondition& p : k->preconditions) aligned += p.kind == Precondition::Kind::kAligned;
  EXPECT_EQ(aligned, 5);  // x, w, residual, both outputs.
}

// f32 row sums a kernel writes as they are accumulate in double in each
// thread of a register-resident row (their float partials added up to 3.2x
// eager's error over stored row sums, run208); sums used only inside the
// row keep float partials. The written sum may be the twin of a kept one.
TEST(RowEmitTest, WrittenF32SumsAccumulateInDouble) {
  Chain stats = row_test::RowStats(DType::kF32, -4096, 1024);
  Chain twin = row_test::SumNormalized(DType::kF32, -4096, 1024);
  for (const Chain* c : {&stats, &twin}) {
    const KernelGroup g = PartitionChain(*c)->kernels[0];
    Variant v = RowHeuristic(*c, g);
    ASSERT_EQ(v.Get("resident"), 1) << v.ToString();
    absl::StatusOr<KernelSpec> k = EmitRow(*c, g, v);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_THAT(k->source, HasSubstr("  double a")) << v.ToString();
  }
  const Chain softmax = row_test::Softmax(DType::kF32, -4096, 1024);
  const KernelGroup g = PartitionChain(softmax)->kernels[0];
  absl::StatusOr<KernelSpec> k = EmitRow(softmax, g, RowHeuristic(softmax, g));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_THAT(k->source, ::testing::Not(HasSubstr("  double a")));
}

// A sum an output adds or subtracts (x.sum(-1) + x.mean(-1) - x.amax(-1),
// the last kernel of a total over stored row sums) accumulates in double
// too: there the output's error is the sum's own, and float partials were
// 4.3x eager's error on a GPU (run214). A sum that only scales (its
// reciprocal times the row) keeps float partials.
TEST(RowEmitTest, SumsAnOutputAddsAccumulateInDouble) {
  auto chain = [](bool scaled) {
    Chain c;
    const Dim r = row_test::Rows(&c, -4096);
    const int32_t x = c.AddInput(TensorType{DType::kF32, {r, Dim::Static(1024)}});
    const int32_t sum = row_test::Reduce(&c, OpKind::kReduceSum, x, 1, false);
    const int32_t mean = row_test::Reduce(&c, OpKind::kReduceMean, x, 1, false);
    const int32_t mx = row_test::Reduce(&c, OpKind::kReduceMax, x, 1, false);
    const int32_t total = c.AddOp(OpKind::kAdd, {sum, mean});
    c.outputs = {scaled ? c.AddOp(OpKind::kDiv, {mx, total}) : c.AddOp(OpKind::kSub, {total, mx})};
    return row_test::Finish(std::move(c));
  };
  for (bool scaled : {false, true}) {
    SCOPED_TRACE(scaled ? "max / (sum + mean)" : "sum + mean - max");
    const Chain c = chain(scaled);
    const KernelGroup g = PartitionChain(c)->kernels[0];
    const Variant v = RowHeuristic(c, g);
    ASSERT_EQ(v.Get("resident"), 1) << v.ToString();
    absl::StatusOr<KernelSpec> k = EmitRow(c, g, v);
    ASSERT_TRUE(k.ok()) << k.status();
    if (scaled) {
      EXPECT_THAT(k->source, ::testing::Not(HasSubstr("  double a")));
    } else {
      EXPECT_THAT(k->source, HasSubstr("  double a")) << v.ToString();
    }
  }
}

// A grid no launch takes: refused for static rows, a precondition for
// symbolic ones unless their declared max keeps it in bounds.
TEST(RowEmitTest, AGridPastTheLaunchLimitIsRefusedOrAPrecondition) {
  const Chain huge = row_test::RowStats(DType::kF32, int64_t{1} << 37, 2);
  const KernelGroup g = PartitionChain(huge)->kernels[0];
  absl::StatusOr<KernelSpec> k = EmitFamily(huge, g, FamilyHeuristic(huge, g));
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(k.status().message()), HasSubstr("blocks along x, past a grid's 2147483647"));

  Chain sym = row_test::RowStats(DType::kF32, -4096, 2);
  const KernelGroup gs = PartitionChain(sym)->kernels[0];
  const auto grid_bound = [](const KernelSpec& spec) {
    return std::count_if(spec.preconditions.begin(), spec.preconditions.end(), [](const Precondition& c) {
      return c.description == "the grid is at most 2147483647 blocks along x";
    });
  };
  k = EmitFamily(sym, gs, FamilyHeuristic(sym, gs));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(grid_bound(*k), 1);
  absl::StatusOr<int64_t> blocks = k->grid.x.Eval({int64_t{1} << 37});
  ASSERT_TRUE(blocks.ok());
  EXPECT_GT(*blocks, kMaxGridDims[0]);  // What the precondition stops at launch.
  sym.symbols[0].max = int64_t{1} << 20;
  k = EmitFamily(sym, gs, FamilyHeuristic(sym, gs));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(grid_bound(*k), 0);
}

// An i32 row sum adds as unsigned (it wraps; no signed overflow) in each
// thread, across its lanes and across the team.
TEST(RowEmitTest, IntegerSumsAddAsUnsigned) {
  const Chain c = row_test::IntRowSum(-4096, 1000);
  const KernelGroup g = PartitionChain(c)->kernels[0];
  for (const Variant& v : RowSpace(c, g)) {
    absl::StatusOr<KernelSpec> k = EmitRow(c, g, v);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_THAT(k->source, HasSubstr("(int)((unsigned)a")) << v.ToString();
    EXPECT_THAT(k->source, ::testing::Not(::testing::ContainsRegex("a[0-9]+(\\[kf_e\\])? \\+= kf_y"))) << v.ToString();
    EXPECT_THAT(k->source, HasSubstr("int operator()(int a, int b) const { return (int)((unsigned)a + (unsigned)b); }"));
  }
}

}  // namespace
}  // namespace kfuse
