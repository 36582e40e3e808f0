#include "codegen/reduce.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "codegen/generators.h"
#include "codegen/partition.h"
#include "codegen/pointwise.h"
#include "codegen/reduce_test_chains.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Partition Part(const Chain& c) {
  absl::StatusOr<Partition> p = PartitionChain(c);
  KFUSE_CHECK(p.ok());
  return *p;
}

int32_t NodeOf(const Chain& c, OpKind k) {
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    if (c.nodes[id].kind == k) return id;
  }
  return -1;
}

KernelParam Workspace() {
  KernelParam p;
  p.kind = KernelParam::Kind::kWorkspace;
  return p;
}

KernelParam Buf(BufferRef::Kind k, int32_t index) {
  return KernelParam::Buffer(BufferRef{k, static_cast<uint32_t>(index)});
}

void ExpectParams(const KernelSpec& spec, const std::vector<KernelParam>& want) {
  ASSERT_EQ(spec.params.size(), want.size()) << spec.source;
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(spec.params[i].kind, want[i].kind);
    if (want[i].kind == KernelParam::Kind::kBuffer) {
      EXPECT_EQ(spec.params[i].buffer, want[i].buffer);
    } else if (want[i].kind == KernelParam::Kind::kScalar) {
      EXPECT_EQ(spec.params[i].value, want[i].value);
      EXPECT_EQ(spec.params[i].scalar_dtype, DType::kI64);
    }
  }
}

TEST(ReduceTest, FamilyNameVersionHeuristicAndSpace) {
  Chain c = reduce_test::ColumnSum(DType::kF32, 4096, 1000);
  KernelGroup g = Part(c).kernels[0];
  EXPECT_EQ(FamilyName(Family::kReduction), "reduction");
  EXPECT_EQ(GeneratorVersion(Family::kReduction), "reduce/7");
  // 250 threads of four columns each: rows of 32 threads split the 4096
  // rows eight ways, and 16 slices of 256 rows leave each thread 32.
  EXPECT_EQ(ReduceHeuristic(c, g),
            (Variant{Family::kReduction,
                     {{"block", 256}, {"split", 8}, {"slices", 16}, {"vec", 4}}}));
  EXPECT_EQ(FamilyHeuristic(c, g), ReduceHeuristic(c, g));
  std::vector<Variant> space = ReduceSpace(c, g);
  ASSERT_GE(space.size(), 6u);
  EXPECT_EQ(space[0], ReduceHeuristic(c, g));
  for (size_t i = 0; i < space.size(); ++i) {
    EXPECT_TRUE(CanGenerateReduce(c, g, space[i]).ok()) << space[i].ToString();
    for (size_t j = 0; j < i; ++j) EXPECT_NE(space[i], space[j]);
  }
  EXPECT_NE(std::find(space.begin(), space.end(),
                      Variant{Family::kReduction, {{"block", 256}, {"split", 8}, {"slices", 16}}}),
            space.end());  // The heuristic's twin without vectors.
  EXPECT_NE(std::find(space.begin(), space.end(), Variant{Family::kReduction, {{"block", 256}}}),
            space.end());  // A thread an output.
  EXPECT_EQ(FamilySpace(c, g), space);
}

TEST(ReduceTest, ManyOutputsKeepAThreadEach) {
  // Two million columns fill the device without splitting the rows.
  Chain c = reduce_test::ColumnSum(DType::kF32, 16, int64_t{1} << 21);
  KernelGroup g = Part(c).kernels[0];
  EXPECT_EQ(ReduceHeuristic(c, g), (Variant{Family::kReduction, {{"block", 256}, {"vec", 4}}}));
  absl::StatusOr<KernelSpec> k = EmitReduce(c, g, ReduceHeuristic(c, g));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_THAT(k->source, HasSubstr("if (kf_o >= kf_n) return;"));
  EXPECT_THAT(k->source, Not(HasSubstr("__syncthreads")));
  EXPECT_EQ(k->grid.y, SizeExpr::Const(1));
}

// Hints are the client's guesses: huge ones must not overflow the
// heuristic's counts (codegen_fuzz, 2026-12-02).
// Validation holds the hints' product to the element limit (2^40), so the
// largest hints a reduction sees are there.
TEST(ReduceTest, HintsAtTheElementLimitKeepTheHeuristicDefined) {
  Chain c;
  c.symbols.push_back(SymbolInfo{"Zq9_n", int64_t{1} << 33, 0});
  c.symbols.push_back(SymbolInfo{"Zq9_m", int64_t{1} << 1, 0});
  int32_t x = c.AddInput(TensorType{DType::kF32, {Dim::Sym(0), Dim::Sym(1), Dim::Static(64)}});
  c.outputs = {reduce_test::Reduce(&c, OpKind::kReduceSum, x, {1}, false)};
  c = reduce_test::Finish(std::move(c));
  KernelGroup g = Part(c).kernels[0];
  const Variant v = ReduceHeuristic(c, g);
  EXPECT_TRUE(CanGenerateReduce(c, g, v).ok()) << v.ToString();
  EXPECT_FALSE(ReduceSpace(c, g).empty());
}

TEST(ReduceTest, SlicesMeetInTheWorkspaceInOrder) {
  Chain c = reduce_test::ColumnSum(DType::kBF16, 32768, 4096);
  KernelGroup g = Part(c).kernels[0];
  const Variant v = ReduceHeuristic(c, g);
  EXPECT_EQ(v, (Variant{Family::kReduction,
                        {{"block", 256}, {"split", 8}, {"slices", 32}, {"vec", 8}}}));
  absl::StatusOr<KernelSpec> k = EmitReduce(c, g, v);
  ASSERT_TRUE(k.ok()) << k.status();
  ASSERT_EQ(k->params.size(), 4u);
  EXPECT_EQ(k->params[2].kind, KernelParam::Kind::kWorkspace);
  EXPECT_EQ(k->params[2].workspace_bytes,
            SizeExpr::Mul(SizeExpr::Const(4096), SizeExpr::Const(32 * 4)));
  EXPECT_FALSE(k->params[2].workspace_zeroed);
  EXPECT_EQ(k->params[3].kind, KernelParam::Kind::kWorkspace);
  EXPECT_TRUE(k->params[3].workspace_zeroed);  // The counters.
  EXPECT_EQ(k->grid.x, SizeExpr::CeilDiv(SizeExpr::Const(4096), SizeExpr::Const(256)));
  EXPECT_EQ(k->grid.y, SizeExpr::Const(32));
  ASSERT_EQ(k->preconditions.size(), 1u);
  EXPECT_EQ(k->preconditions[0].kind, Precondition::Kind::kAligned);
  EXPECT_EQ(k->preconditions[0].value, 16);
  EXPECT_EQ(k->preconditions[0].description, "input 0 is 16-byte aligned (vector loads)");
  EXPECT_THAT(k->source, HasSubstr("kf_vec<__kf_bf16, 8>"));
  EXPECT_THAT(k->source, HasSubstr("atomicAdd(kf_cnt + blockIdx.x, 1u) == 31u"));
  // The block's 256 outputs go one a thread: each adds its output's eight
  // rows in order, and in the column's last block its 32 slices in order.
  EXPECT_THAT(k->source, HasSubstr("for (int kf_j = threadIdx.x; kf_j < 256; kf_j += 256)"));
  EXPECT_THAT(k->source, HasSubstr("for (int kf_y = 1; kf_y < 8; ++kf_y)"));
  EXPECT_THAT(k->source, HasSubstr("kf_ws[(long long)blockIdx.y * kf_n + kf_q] = kf_a;"));
  // The 32 slices' loads all go out at once.
  EXPECT_THAT(k->source,
              HasSubstr("    #pragma unroll\n    for (int kf_y = 0; kf_y < 32; ++kf_y)"));
  EXPECT_THAT(k->source, HasSubstr("__ldcg(kf_ws + kf_y * kf_n + kf_q)"));
  EXPECT_THAT(k->source, HasSubstr("out0[kf_q] = kf_f2bf(kf_a);"));
  EXPECT_THAT(k->source, Not(HasSubstr("kf_ty == 0")));
  // A plain sum by split rows: 40 registers a thread.
  EXPECT_THAT(k->source, HasSubstr("__launch_bounds__(256, 6)"));
}

// Without split rows there is nothing to meet: each thread writes its own
// outputs' slice values and, in the last block, adds its own outputs'.
TEST(ReduceTest, WithoutSplitRowsEachThreadFinishesItsOwnOutputs) {
  Chain c = reduce_test::ColumnSum(DType::kF32, 4096, 1024);
  KernelGroup g = Part(c).kernels[0];
  const Variant v{Family::kReduction, {{"block", 256}, {"slices", 4}, {"vec", 4}}};
  ASSERT_TRUE(CanGenerateReduce(c, g, v).ok());
  absl::StatusOr<KernelSpec> k = EmitReduce(c, g, v);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_THAT(k->source, HasSubstr("kf_ws[(long long)blockIdx.y * kf_n + kf_o + kf_e] = "));
  EXPECT_THAT(k->source,
              HasSubstr("    #pragma unroll 4\n    for (int kf_y = 0; kf_y < 4; ++kf_y)"));
  EXPECT_THAT(k->source, HasSubstr("__ldcg(kf_ws + kf_y * kf_n + kf_o + kf_e)"));
  EXPECT_THAT(k->source, HasSubstr("out0[kf_o + kf_e] = kf_acc[kf_e];"));
  EXPECT_THAT(k->source, Not(HasSubstr("kf_part")));
  EXPECT_THAT(k->source, Not(HasSubstr("kf_j")));
  EXPECT_THAT(k->source, HasSubstr("__launch_bounds__(256, 4)"));
}

TEST(ReduceTest, TheLongestReducedDimIsSplit) {
  Chain c;
  int32_t x = c.AddInput(
      TensorType{DType::kF32, {Dim::Static(4), Dim::Static(1024), Dim::Static(64)}});
  c.outputs = {reduce_test::Reduce(&c, OpKind::kReduceSum, x, {0, 1}, false)};
  c = reduce_test::Finish(std::move(c));
  KernelGroup g = Part(c).kernels[0];
  absl::StatusOr<KernelSpec> k = EmitReduce(c, g, ReduceHeuristic(c, g));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_THAT(k->source, HasSubstr("for (long long kf_c0 = 0; kf_c0 < 4LL; ++kf_c0)"));
  EXPECT_THAT(k->source, HasSubstr("kf_r1 = (long long)blockIdx.y * kf_chunk + kf_ty"));
  // Batches of eight of the split's rows (one vector leaf), then the rest.
  EXPECT_THAT(k->source, HasSubstr("for (; kf_r1 + 56 < kf_hi; kf_r1 += 64)"));
  EXPECT_THAT(k->source, HasSubstr("const long long kf_c1 = kf_r1 + kf_u * 8;"));
  EXPECT_THAT(k->source, HasSubstr("for (; kf_r1 < kf_hi; kf_r1 += 8)"));
}

// A batch's vector loads are all written before any of its values is used,
// so none waits behind another's bound check or sum.
TEST(ReduceTest, BatchLoadsComeBeforeTheirSums) {
  Chain c;
  int32_t x = c.AddInput(TensorType{DType::kBF16, {Dim::Static(32768), Dim::Static(4096)}});
  c.outputs = {reduce_test::Reduce(&c, OpKind::kReduceSum, x, {0}, true)};
  c = reduce_test::Finish(std::move(c));
  KernelGroup g = Part(c).kernels[0];
  absl::StatusOr<KernelSpec> k = EmitReduce(c, g, ReduceHeuristic(c, g));
  ASSERT_TRUE(k.ok()) << k.status();
  const std::string& src = k->source;
  const size_t load = src.find("kf_v0[kf_u] = *reinterpret_cast<const kf_vec<__kf_bf16, 8>*>");
  const size_t use = src.find("kf_v0[kf_u].v[kf_e]");
  ASSERT_NE(load, std::string::npos) << src;
  ASSERT_NE(use, std::string::npos) << src;
  EXPECT_LT(load, use);
  EXPECT_EQ(src.find("kf_v0[kf_u] =", load + 1), std::string::npos) << "one load site a batch";
  // The fp64 yardstick keeps one plain loop (unrolled, its calls would spill).
  absl::StatusOr<KernelSpec> ref =
      EmitReduce(c, g, ReduceHeuristic(c, g), Numerics::kReference64);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_FALSE(absl::StrContains(ref->source, "kf_u")) << ref->source;
}

TEST(ReduceTest, ColumnSoftmaxLaunchContracts) {
  Chain c = reduce_test::ColumnSoftmax(DType::kBF16, -4096, 1000);
  Partition p = Part(c);
  ASSERT_EQ(p.kernels.size(), 3u);
  const int32_t mx = NodeOf(c, OpKind::kReduceMax), sum = NodeOf(c, OpKind::kReduceSum);
  const KernelParam n = KernelParam::Scalar(SizeExpr::Symbol(0), DType::kI64);
  using K = BufferRef::Kind;

  absl::StatusOr<KernelSpec> k0 =
      EmitFamily(c, p.kernels[0], FamilyHeuristic(c, p.kernels[0]));
  ASSERT_TRUE(k0.ok()) << k0.status();
  // Eight columns a thread, rows of 32 threads, 16 slices: a workspace
  // and its counters after the intermediate.
  const KernelParam ws = Workspace();
  ExpectParams(*k0, {Buf(K::kInput, 0), Buf(K::kIntermediate, mx), ws, ws, n});
  EXPECT_EQ(k0->grid.x, SizeExpr::CeilDiv(SizeExpr::Const(1000), SizeExpr::Const(256)));
  EXPECT_EQ(k0->grid.y, SizeExpr::Const(16));
  EXPECT_EQ(k0->block.x, SizeExpr::Const(256));
  EXPECT_EQ(k0->ops, std::vector<uint32_t>{static_cast<uint32_t>(mx)});
  EXPECT_EQ(k0->partition_reason, p.kernels[0].reason);
  ASSERT_EQ(k0->preconditions.size(), 1u);
  EXPECT_EQ(k0->preconditions[0].buffer, (BufferRef{K::kInput, 0}));
  EXPECT_THAT(k0->entry, ::testing::StartsWith("kf_red_"));
  EXPECT_THAT(k0->source, HasSubstr("kf_max(kf_acc[kf_e], "));

  absl::StatusOr<KernelSpec> k1 =
      EmitFamily(c, p.kernels[1], FamilyHeuristic(c, p.kernels[1]));
  ASSERT_TRUE(k1.ok()) << k1.status();
  ExpectParams(*k1, {Buf(K::kInput, 0), Buf(K::kIntermediate, mx), Buf(K::kIntermediate, sum),
                     ws, ws, n});
  EXPECT_EQ(k1->ops.size(), 3u);  // sub, exp, sum.
  // A bf16 sum: its rounding is far above an f32 sum's error, so the fast
  // kernel does not compensate; the yardsticks do.
  EXPECT_THAT(k1->source, Not(HasSubstr("kf_err")));
  for (Numerics yardstick : {Numerics::kReference64, Numerics::kEager}) {
    absl::StatusOr<KernelSpec> y =
        EmitFamily(c, p.kernels[1], FamilyHeuristic(c, p.kernels[1]), yardstick);
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_THAT(y->source, HasSubstr("kf_err"));
  }

  // The last kernel reads both reductions and writes only the output: the
  // exp(x - max) it shares with the sum's kernel is recomputed, not stored.
  absl::StatusOr<KernelSpec> k2 =
      EmitFamily(c, p.kernels[2], FamilyHeuristic(c, p.kernels[2]));
  ASSERT_TRUE(k2.ok()) << k2.status();
  ExpectParams(*k2, {Buf(K::kInput, 0), Buf(K::kIntermediate, mx), Buf(K::kIntermediate, sum),
                     Buf(K::kOutput, 0), n});
  EXPECT_EQ(k2->variant.family, Family::kPointwise);
  // The pointwise generator alone would also store exp(x - max), which the
  // sum consumes.
  absl::StatusOr<KernelSpec> raw = EmitPointwise(c, p.kernels[2], k2->variant);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->params.size(), k2->params.size() + 1);
}

TEST(ReduceTest, OutputAndIntermediateTogether) {
  // The mean is a chain output and the pointwise kernel reads it.
  Chain c;
  int32_t x = c.AddInput(TensorType{DType::kF32, {Dim::Static(64), Dim::Static(32)}});
  int32_t mean = reduce_test::Reduce(&c, OpKind::kReduceMean, x, {0}, true);
  c.outputs = {c.AddOp(OpKind::kSub, {x, mean}), mean};
  c = reduce_test::Finish(std::move(c));
  Partition p = Part(c);
  ASSERT_EQ(p.kernels.size(), 2u);
  const int32_t m = NodeOf(c, OpKind::kReduceMean);
  absl::StatusOr<KernelSpec> k = EmitReduce(c, p.kernels[0], ReduceHeuristic(c, p.kernels[0]));
  ASSERT_TRUE(k.ok()) << k.status();
  using K = BufferRef::Kind;
  ExpectParams(*k, {Buf(K::kInput, 0), Buf(K::kOutput, 1), Buf(K::kIntermediate, m)});
  EXPECT_THAT(k->source, HasSubstr("kf_a = kf_a / (float)(64LL);"));
  EXPECT_THAT(k->source, HasSubstr("out1[kf_q] = kf_a;"));
  EXPECT_THAT(k->source, HasSubstr("omid"));
}

TEST(ReduceTest, SymbolicKeptDimSizesTheGrid) {
  Chain c;
  c.symbols.push_back(SymbolInfo{"Zq9_cols", 4096, 0});
  int32_t x = c.AddInput(TensorType{DType::kF16, {Dim::Static(3), Dim::Static(5), Dim::Sym(0)}});
  c.input_names = {"Zq9_x"};
  c.outputs = {reduce_test::Reduce(&c, OpKind::kReduceSum, x, {0, 1}, false)};
  c.output_names = {"Zq9_y"};
  c = reduce_test::Finish(std::move(c));
  KernelGroup g = Part(c).kernels[0];
  for (Numerics n : {Numerics::kFast, Numerics::kReference64, Numerics::kEager}) {
    absl::StatusOr<KernelSpec> k = EmitReduce(c, g, ReduceHeuristic(c, g), n);
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_EQ(k->grid.x, SizeExpr::CeilDiv(SizeExpr::Symbol(0), SizeExpr::Const(256)));
    EXPECT_FALSE(absl::StrContains(k->source, "Zq9")) << "client text in the source";
    EXPECT_FALSE(absl::StrContains(k->source, "#include"));
    EXPECT_THAT(k->source, HasSubstr("for (long long kf_c0 = 0; kf_c0 < 3LL; ++kf_c0)"));
    // The inner loop's five indices in one batch where it is not the
    // yardstick's plain loop.
    EXPECT_THAT(k->source, HasSubstr(n == Numerics::kReference64
                                         ? "for (long long kf_c1 = 0; kf_c1 < 5LL; ++kf_c1)"
                                         : "for (; kf_r1 + 4 < 5LL; kf_r1 += 5)"));
    EXPECT_THAT(k->source, HasSubstr("const long long s0"));
    if (n == Numerics::kReference64) {
      EXPECT_THAT(k->source, HasSubstr("double* __restrict__ out0"));
    } else {
      EXPECT_THAT(k->source, HasSubstr("__kf_half* __restrict__ out0"));
    }
    // The yardsticks compensate their sums; the fast kernel of an f16 sum
    // need not.
    EXPECT_EQ(absl::StrContains(k->source, "kf_err"), n != Numerics::kFast);
    // Same inputs, same bytes.
    EXPECT_EQ(EmitReduce(c, g, ReduceHeuristic(c, g), n)->source, k->source);
  }
}

TEST(ReduceTest, StridedAndBroadcastOperandsIndexByTheirStrides) {
  // sum(x * b, axis=0) of a column-major x [8, 16] and a bias b [1, 16].
  Chain c;
  int32_t x = c.AddInput(TensorType{DType::kF32, {Dim::Static(8), Dim::Static(16)}}, {1, 8});
  int32_t b = c.AddInput(TensorType{DType::kF32, {Dim::Static(1), Dim::Static(16)}});
  c.outputs = {reduce_test::Reduce(&c, OpKind::kReduceSum, c.AddOp(OpKind::kMul, {x, b}), {0},
                                   false)};
  c = reduce_test::Finish(std::move(c));
  KernelGroup g = Part(c).kernels[0];
  absl::StatusOr<KernelSpec> k = EmitReduce(c, g, ReduceHeuristic(c, g));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_THAT(k->source, HasSubstr("const long long kf_b0 = kf_c1 * 8LL;"));
  EXPECT_THAT(k->source, HasSubstr("in0[kf_b0 + kf_c0]"));  // Column-major: rows are adjacent.
  EXPECT_THAT(k->source, HasSubstr("in1[kf_b1]"));          // The bias: once per column.
}

// Rows whose pitch is not a multiple of the vector (a padded tensor's):
// their vectors are read through windows, and need no alignment.
TEST(ReduceTest, PaddedRowsAreReadThroughWindows) {
  Chain c = reduce_test::ColumnSum(DType::kF32, 64, 1000);
  c.nodes[0].strides = {1003, 1};
  KernelGroup g = Part(c).kernels[0];
  absl::StatusOr<KernelSpec> k =
      EmitReduce(c, g, Variant{Family::kReduction, {{"block", 256}, {"vec", 4}}});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_NE(k->source.find("kf_ldw<kf_vec<float, 4>>(in0 + kf_b0"), std::string::npos);
  for (const Precondition& p : k->preconditions) {
    EXPECT_NE(p.kind, Precondition::Kind::kAligned) << p.description;
  }
  // Rows 1004 apart keep the vectors' alignment.
  c.nodes[0].strides = {1004, 1};
  k = EmitReduce(c, g, Variant{Family::kReduction, {{"block", 256}, {"vec", 4}}});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->source.find("kf_ldw<kf_vec"), std::string::npos);
}

TEST(ReduceTest, IntegerSumsWrapAndMaxKeepsNaN) {
  Chain c = reduce_test::CountPositive(DType::kF32, 128, 16);
  Partition p = Part(c);
  ASSERT_EQ(p.kernels.size(), 2u);
  for (const KernelGroup& g : p.kernels) {
    absl::StatusOr<KernelSpec> k = EmitReduce(c, g, ReduceHeuristic(c, g));
    ASSERT_TRUE(k.ok()) << k.status();
    if (c.nodes[g.results[0]].kind == OpKind::kReduceSum) {
      EXPECT_THAT(k->source,
                  HasSubstr("kf_acc[kf_e] = (int)((unsigned int)kf_acc[kf_e] + (unsigned int)"));
      EXPECT_THAT(k->source, HasSubstr("int* __restrict__ out0"));
    } else {
      EXPECT_THAT(k->source, HasSubstr("(a != a || a > b)"));  // The prelude's kf_max.
    }
  }
}

TEST(ReduceTest, BadVariantsAndGroupsAreRefused) {
  Chain c = reduce_test::ColumnSum(DType::kF32, 4096, 1000);
  KernelGroup g = Part(c).kernels[0];
  struct Case {
    Variant v;
    const char* message;
  } cases[] = {
      {Variant{Family::kReduction, {{"block", 64}}}, "block must be 128, 256 or 512"},
      {Variant{Family::kReduction, {}}, "missing block"},
      {Variant{Family::kReduction, {{"block", 256}, {"warps", 4}}}, "unknown param \"warps\""},
      {Variant{Family::kReduction, {{"block", 256}, {"split", 3}}}, "split must be a power of two"},
      {Variant{Family::kReduction, {{"block", 256}, {"split", 16}}}, "at most block / 32"},
      {Variant{Family::kReduction, {{"block", 256}, {"slices", 6}}},
       "slices must be a power of two"},
      {Variant{Family::kReduction, {{"block", 256}, {"slices", 2048}}}, "at most 1024"},
      {Variant{Family::kReduction, {{"block", 256}, {"vec", 16}}}, "vec must be 1, 2, 4 or 8"},
      {Variant{Family::kPointwise, {{"block", 256}}}, "family must be reduction"},
  };
  for (const Case& k : cases) {
    absl::Status s = CanGenerateReduce(c, g, k.v);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k.v.ToString();
    EXPECT_THAT(std::string(s.message()), HasSubstr(k.message));
    EXPECT_EQ(EmitReduce(c, g, k.v).status(), s);
  }
  // vec needs a static innermost dim it divides, and no strided operand.
  Chain odd = reduce_test::ColumnSum(DType::kF32, 4096, 1002);
  absl::Status s = CanGenerateReduce(odd, Part(odd).kernels[0],
                                     Variant{Family::kReduction, {{"block", 256}, {"vec", 4}}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("a multiple of it"));
  Chain cm;
  int32_t x = cm.AddInput(TensorType{DType::kF32, {Dim::Static(8), Dim::Static(16)}}, {1, 8});
  cm.outputs = {reduce_test::Reduce(&cm, OpKind::kReduceSum, x, {0}, false)};
  cm = reduce_test::Finish(std::move(cm));
  s = CanGenerateReduce(cm, Part(cm).kernels[0],
                        Variant{Family::kReduction, {{"block", 256}, {"vec", 2}}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("is strided along the innermost dim"));
  KernelGroup row = g;
  row.family = Family::kRowReduction;
  EXPECT_EQ(CanGenerateReduce(c, row, ReduceHeuristic(c, g)).code(),
            absl::StatusCode::kInvalidArgument);
  KernelGroup two = g;
  two.results.push_back(0);
  EXPECT_EQ(CanGenerateReduce(c, two, ReduceHeuristic(c, g)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ReduceTest, UnsupportedReductionsNameTheOp) {
  Chain c;
  int32_t x = c.AddInput(TensorType{DType::kF32, {Dim::Static(8), Dim::Static(16)}});
  int32_t all = reduce_test::Reduce(&c, OpKind::kReduceSum, x, {0, 1}, false);
  int32_t row = reduce_test::Reduce(&c, OpKind::kReduceSum, x, {1}, false);
  c.outputs = {all, row};
  c = reduce_test::Finish(std::move(c));
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    if (!IsReduction(c.nodes[id].kind)) continue;
    absl::Status s = CheckOuterReduction(c, id);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(c.nodes[id].axes.size() == 2 ? "innermost axis and outer axes together"
                                                       : "belongs to the row family"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("(reduce_sum)"));
  }
}

}  // namespace
}  // namespace kfuse
