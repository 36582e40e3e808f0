#include "codegen/reduce.h"

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
    } else {
      EXPECT_EQ(spec.params[i].value, want[i].value);
      EXPECT_EQ(spec.params[i].scalar_dtype, DType::kI64);
    }
  }
}

TEST(ReduceTest, FamilyNameVersionHeuristicAndSpace) {
  Chain c = reduce_test::ColumnSum(DType::kF32, 4096, 1000);
  KernelGroup g = Part(c).kernels[0];
  EXPECT_EQ(FamilyName(Family::kReduction), "reduction");
  EXPECT_EQ(GeneratorVersion(Family::kReduction), "reduce/1");
  EXPECT_EQ(ReduceHeuristic(c, g), (Variant{Family::kReduction, {{"block", 256}}}));
  EXPECT_EQ(FamilyHeuristic(c, g), ReduceHeuristic(c, g));
  std::vector<Variant> space = ReduceSpace(c, g);
  ASSERT_EQ(space.size(), 3u);
  EXPECT_EQ(space[0], ReduceHeuristic(c, g));
  EXPECT_EQ(space[1].Get("block"), 128);
  EXPECT_EQ(space[2].Get("block"), 512);
  EXPECT_EQ(FamilySpace(c, g), space);
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
  ExpectParams(*k0, {Buf(K::kInput, 0), Buf(K::kIntermediate, mx), n});
  EXPECT_EQ(k0->grid.x, SizeExpr::CeilDiv(SizeExpr::Const(1000), SizeExpr::Const(256)));
  EXPECT_EQ(k0->block.x, SizeExpr::Const(256));
  EXPECT_EQ(k0->ops, std::vector<uint32_t>{static_cast<uint32_t>(mx)});
  EXPECT_EQ(k0->partition_reason, p.kernels[0].reason);
  EXPECT_TRUE(k0->preconditions.empty());
  EXPECT_THAT(k0->entry, ::testing::StartsWith("kf_red_"));
  EXPECT_THAT(k0->source, HasSubstr("kf_max(kf_acc, "));

  absl::StatusOr<KernelSpec> k1 =
      EmitFamily(c, p.kernels[1], FamilyHeuristic(c, p.kernels[1]));
  ASSERT_TRUE(k1.ok()) << k1.status();
  ExpectParams(*k1, {Buf(K::kInput, 0), Buf(K::kIntermediate, mx), Buf(K::kIntermediate, sum), n});
  EXPECT_EQ(k1->ops.size(), 3u);  // sub, exp, sum.
  EXPECT_THAT(k1->source, HasSubstr("kf_err"));  // Compensated.

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
  EXPECT_THAT(k->source, HasSubstr("kf_acc = kf_acc / (float)(64LL);"));
  EXPECT_THAT(k->source, HasSubstr("out1[kf_o] = kf_acc;"));
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
    EXPECT_THAT(k->source, HasSubstr("for (long long kf_c1 = 0; kf_c1 < 5LL; ++kf_c1)"));
    EXPECT_THAT(k->source, HasSubstr("const long long s0"));
    if (n == Numerics::kReference64) {
      EXPECT_THAT(k->source, HasSubstr("double* __restrict__ out0"));
    } else {
      EXPECT_THAT(k->source, HasSubstr("__kf_half* __restrict__ out0"));
    }
    // Every numerics compensates its sums.
    EXPECT_THAT(k->source, HasSubstr("kf_err"));
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

TEST(ReduceTest, IntegerSumsWrapAndMaxKeepsNaN) {
  Chain c = reduce_test::CountPositive(DType::kF32, 128, 16);
  Partition p = Part(c);
  ASSERT_EQ(p.kernels.size(), 2u);
  for (const KernelGroup& g : p.kernels) {
    absl::StatusOr<KernelSpec> k = EmitReduce(c, g, ReduceHeuristic(c, g));
    ASSERT_TRUE(k.ok()) << k.status();
    if (c.nodes[g.results[0]].kind == OpKind::kReduceSum) {
      EXPECT_THAT(k->source, HasSubstr("kf_acc = (int)((unsigned int)kf_acc + (unsigned int)"));
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
      {Variant{Family::kReduction, {{"block", 256}, {"vec", 4}}}, "unknown param \"vec\""},
      {Variant{Family::kPointwise, {{"block", 256}}}, "family must be reduction"},
  };
  for (const Case& k : cases) {
    absl::Status s = CanGenerateReduce(c, g, k.v);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k.v.ToString();
    EXPECT_THAT(std::string(s.message()), HasSubstr(k.message));
    EXPECT_EQ(EmitReduce(c, g, k.v).status(), s);
  }
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
