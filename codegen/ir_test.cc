#include "codegen/ir.h"

#include <string>

#include "gtest/gtest.h"

namespace kfuse {
namespace {

TEST(IrTest, EveryKnownKindHasANameAndArity) {
  struct Case {
    OpKind kind;
    const char* name;
    int arity;
  } cases[] = {
      {OpKind::kConstant, "constant", 0},
      {OpKind::kInput, "input", 0},
      {OpKind::kNeg, "neg", 1},
      {OpKind::kLogicalNot, "logical_not", 1},
      {OpKind::kAdd, "add", 2},
      {OpKind::kLogicalOr, "logical_or", 2},
      {OpKind::kWhere, "where", 3},
      {OpKind::kCast, "cast", 1},
      {OpKind::kReduceMean, "reduce_mean", 1},
      {OpKind::kConcat, "concat", -1},
      {OpKind::kIota, "iota", 0},
      {OpKind::kMatmul, "matmul", 2},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(OpName(c.kind), c.name);
    EXPECT_EQ(Arity(c.kind), c.arity) << c.name;
    EXPECT_TRUE(IsKnownOp(c.kind)) << c.name;
  }
  EXPECT_FALSE(IsKnownOp(OpKind::kInvalid));
  EXPECT_FALSE(IsKnownOp(static_cast<OpKind>(999)));
  EXPECT_FALSE(IsKnownOp(static_cast<OpKind>(33)));
}

TEST(IrTest, Predicates) {
  EXPECT_TRUE(IsUnary(OpKind::kSoftplus));
  EXPECT_FALSE(IsUnary(OpKind::kAdd));
  EXPECT_TRUE(IsBinary(OpKind::kPow));
  EXPECT_TRUE(IsElementwise(OpKind::kCast));
  EXPECT_TRUE(IsElementwise(OpKind::kWhere));
  EXPECT_FALSE(IsElementwise(OpKind::kReduceSum));
  EXPECT_FALSE(IsElementwise(OpKind::kInput));
  EXPECT_TRUE(IsReduction(OpKind::kReduceMax));
  EXPECT_TRUE(IsLayout(OpKind::kSlice));
  EXPECT_TRUE(IsCommutative(OpKind::kMaximum));
  EXPECT_FALSE(IsCommutative(OpKind::kSub));
  EXPECT_TRUE(IsComparison(OpKind::kGe));
  EXPECT_FALSE(IsComparison(OpKind::kLogicalAnd));
}

TEST(IrTest, BuildersAndToString) {
  Chain c;
  c.symbols.push_back({"N", 0, 0});
  int x = c.AddInput(TensorType{DType::kBF16, {Dim::Sym(0), Dim::Static(4096)}});
  int two = c.AddConstant(2);
  int y = c.AddOp(OpKind::kMul, {x, two});
  int z = c.AddCast(y, DType::kF32);
  c.outputs.push_back(z);
  EXPECT_EQ(c.num_inputs(), 1);
  EXPECT_EQ(c.nodes[x].input_index, 0);
  EXPECT_EQ(c.nodes[z].dtype, DType::kF32);
  EXPECT_EQ(ToString(c),
            "%0 = input(#0) : bf16[N,4096]\n"
            "%1 = constant(2 weak)\n"
            "%2 = mul(%0, %1)\n"
            "%3 = cast(%2, f32)\n"
            "outputs(%3)\n");
}

}  // namespace
}  // namespace kfuse
