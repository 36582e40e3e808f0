// The builder's wire output, op for op, and its errors. That the chains are
// valid and form one kernel is tests/chain_builder_cross_test.cc's job
// (the server's validator is not a dependency of clients/).
#include "clients/chain_builder.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<v1::OpKind> Kinds(const v1::Chain& c) {
  std::vector<v1::OpKind> kinds;
  for (const v1::Op& op : c.ops()) kinds.push_back(op.kind());
  return kinds;
}

// Every reduction reduces the last axis and keeps it.
void ExpectRowReductions(const v1::Chain& c, int count) {
  int n = 0;
  for (const v1::Op& op : c.ops()) {
    if (op.kind() < v1::OP_REDUCE_SUM || op.kind() > v1::OP_REDUCE_MEAN) {
      continue;
    }
    ++n;
    EXPECT_THAT(op.reduce().axes(), ElementsAre(-1));
    EXPECT_TRUE(op.reduce().keepdim());
  }
  EXPECT_EQ(n, count);
}

v1::Ref OpRef(uint32_t j) {
  v1::Ref r;
  r.set_op(j);
  return r;
}

v1::Ref InputRef(uint32_t i) {
  v1::Ref r;
  r.set_input(i);
  return r;
}

MATCHER_P(RefIs, expected, "") {
  return arg.SerializeAsString() == expected.SerializeAsString();
}

class ChainBuilderTest : public ::testing::Test {
 protected:
  Value Row(const char* name, v1::DType t = v1::DTYPE_BF16) {
    return b_.Input(name, t, {SymbolDim("rows", 8192), StaticDim(4096)});
  }
  Value Vec(const char* name) {
    return b_.Input(name, v1::DTYPE_BF16, {StaticDim(4096)});
  }
  v1::Chain Built() {
    absl::StatusOr<v1::Chain> c = b_.Build();
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : v1::Chain();
  }
  ChainBuilder b_;
};

TEST_F(ChainBuilderTest, InputsAndPrimitives) {
  Value x = b_.Input("x", v1::DTYPE_F32,
                     {SymbolDim("m", /*hint=*/64, /*max=*/1024), StaticDim(8)});
  Value two = b_.Constant(2.0);
  Value y = b_.Mul(x, two);
  Value c = b_.Cast(y, v1::DTYPE_BF16);
  Value s = b_.ReduceSum(c, 0);
  b_.Output("y", y);
  b_.Output("s", s);
  v1::Chain chain = Built();
  ASSERT_EQ(chain.inputs_size(), 1);
  const v1::TensorSpec& in = chain.inputs(0);
  EXPECT_EQ(in.name(), "x");
  EXPECT_EQ(in.dtype(), v1::DTYPE_F32);
  ASSERT_EQ(in.shape_size(), 2);
  EXPECT_EQ(in.shape(0).symbol(), "m");
  EXPECT_EQ(in.shape(0).hint(), 64);
  EXPECT_EQ(in.shape(0).max(), 1024);
  EXPECT_EQ(in.shape(1).size(), 8);
  EXPECT_THAT(Kinds(chain), ElementsAre(v1::OP_CONSTANT, v1::OP_MUL,
                                        v1::OP_CAST, v1::OP_REDUCE_SUM));
  EXPECT_EQ(chain.ops(0).value(), 2.0);
  EXPECT_EQ(chain.ops(0).dtype(), v1::DTYPE_UNSPECIFIED);  // A weak scalar.
  EXPECT_THAT(chain.ops(1).args(),
              ElementsAre(RefIs(InputRef(0)), RefIs(OpRef(0))));
  EXPECT_EQ(chain.ops(2).dtype(), v1::DTYPE_BF16);
  EXPECT_THAT(chain.ops(3).reduce().axes(), ElementsAre(0));
  EXPECT_FALSE(chain.ops(3).reduce().keepdim());
  ASSERT_EQ(chain.outputs_size(), 2);
  EXPECT_EQ(chain.outputs(1).name(), "s");
  EXPECT_THAT(chain.outputs(1).value(), RefIs(OpRef(3)));
}

TEST_F(ChainBuilderTest, Softmax) {
  b_.Output("y", Softmax(b_, Row("x")));
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c), ElementsAre(v1::OP_REDUCE_MAX, v1::OP_SUB, v1::OP_EXP,
                                    v1::OP_REDUCE_SUM, v1::OP_DIV));
  ExpectRowReductions(c, 2);
  // exp(x - max) / sum(exp(x - max)): the exp is shared.
  EXPECT_THAT(c.ops(4).args(), ElementsAre(RefIs(OpRef(2)), RefIs(OpRef(3))));
}

TEST_F(ChainBuilderTest, SoftmaxScaleBiasMask) {
  Value x = Row("x");
  SoftmaxOptions o;
  o.scale = 0.125;
  o.bias = Row("bias");
  o.mask = Row("mask", v1::DTYPE_BOOL);
  b_.Output("y", Softmax(b_, x, o));
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c), ElementsAre(v1::OP_CONSTANT, v1::OP_MUL, v1::OP_ADD,
                                    v1::OP_CONSTANT, v1::OP_WHERE,
                                    v1::OP_REDUCE_MAX, v1::OP_SUB, v1::OP_EXP,
                                    v1::OP_REDUCE_SUM, v1::OP_DIV));
  ExpectRowReductions(c, 2);
  EXPECT_EQ(c.ops(0).value(), 0.125);
  EXPECT_THAT(c.ops(2).args(),
              ElementsAre(RefIs(OpRef(1)), RefIs(InputRef(1))));
  EXPECT_TRUE(std::isinf(c.ops(3).value()) && c.ops(3).value() < 0);
  EXPECT_THAT(c.ops(4).args(), ElementsAre(RefIs(InputRef(2)), RefIs(OpRef(2)),
                                           RefIs(OpRef(3))));
}

TEST_F(ChainBuilderTest, SoftmaxAxis) {
  SoftmaxOptions o;
  o.axis = 0;
  b_.Output("y", Softmax(b_, Row("x"), o));
  v1::Chain c = Built();
  EXPECT_THAT(c.ops(0).reduce().axes(), ElementsAre(0));
  EXPECT_THAT(c.ops(3).reduce().axes(), ElementsAre(0));
}

TEST_F(ChainBuilderTest, LogSoftmax) {
  b_.Output("y", LogSoftmax(b_, Row("x")));
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c), ElementsAre(v1::OP_REDUCE_MAX, v1::OP_SUB, v1::OP_EXP,
                                    v1::OP_REDUCE_SUM, v1::OP_LOG, v1::OP_SUB));
  ExpectRowReductions(c, 2);
  EXPECT_THAT(c.ops(5).args(), ElementsAre(RefIs(OpRef(1)), RefIs(OpRef(4))));
}

TEST_F(ChainBuilderTest, LayerNorm) {
  Value x = Row("x");
  Value w = Vec("weight");
  Value bias = Vec("bias");
  b_.Output("y", LayerNorm(b_, x, w, bias, 1e-5));
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c),
              ElementsAre(v1::OP_REDUCE_MEAN, v1::OP_SUB, v1::OP_SQUARE,
                          v1::OP_REDUCE_MEAN, v1::OP_CONSTANT, v1::OP_ADD,
                          v1::OP_RSQRT, v1::OP_MUL, v1::OP_MUL, v1::OP_ADD));
  ExpectRowReductions(c, 2);
  EXPECT_EQ(c.ops(4).value(), 1e-5);
  EXPECT_THAT(c.ops(8).args(),
              ElementsAre(RefIs(OpRef(7)), RefIs(InputRef(1))));
  EXPECT_THAT(c.ops(9).args(),
              ElementsAre(RefIs(OpRef(8)), RefIs(InputRef(2))));
}

TEST_F(ChainBuilderTest, LayerNormWithoutAffine) {
  b_.Output("y", LayerNorm(b_, Row("x")));
  v1::Chain c = Built();
  EXPECT_EQ(c.ops_size(), 8);
  EXPECT_EQ(c.ops(7).kind(), v1::OP_MUL);
}

TEST_F(ChainBuilderTest, RmsNorm) {
  Value x = Row("x");
  Value w = Vec("weight");
  b_.Output("y", RmsNorm(b_, x, w, 1e-6));
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c),
              ElementsAre(v1::OP_SQUARE, v1::OP_REDUCE_MEAN, v1::OP_CONSTANT,
                          v1::OP_ADD, v1::OP_RSQRT, v1::OP_MUL, v1::OP_MUL));
  ExpectRowReductions(c, 1);
  EXPECT_EQ(c.ops(2).value(), 1e-6);
}

TEST_F(ChainBuilderTest, AddRmsNorm) {
  Value x = Row("x");
  Value r = Row("residual");
  Value w = Vec("weight");
  AddNorm y = AddRmsNorm(b_, x, r, w);
  b_.Output("sum", y.sum);
  b_.Output("normed", y.normed);
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c),
              ElementsAre(v1::OP_ADD, v1::OP_SQUARE, v1::OP_REDUCE_MEAN,
                          v1::OP_CONSTANT, v1::OP_ADD, v1::OP_RSQRT, v1::OP_MUL,
                          v1::OP_MUL));
  ExpectRowReductions(c, 1);
  EXPECT_THAT(c.ops(1).args(), ElementsAre(RefIs(OpRef(0))));
  EXPECT_THAT(c.outputs(0).value(), RefIs(OpRef(0)));
  EXPECT_THAT(c.outputs(1).value(), RefIs(OpRef(7)));
}

TEST_F(ChainBuilderTest, AddLayerNorm) {
  Value x = Row("x");
  Value r = Row("residual");
  AddNorm y = AddLayerNorm(b_, x, r, /*weight=*/std::nullopt,
                           /*bias=*/Vec("bias"), 1e-5);
  b_.Output("sum", y.sum);
  b_.Output("normed", y.normed);
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c),
              ElementsAre(v1::OP_ADD, v1::OP_REDUCE_MEAN, v1::OP_SUB,
                          v1::OP_SQUARE, v1::OP_REDUCE_MEAN, v1::OP_CONSTANT,
                          v1::OP_ADD, v1::OP_RSQRT, v1::OP_MUL, v1::OP_ADD));
  ExpectRowReductions(c, 2);
  EXPECT_THAT(c.ops(1).args(), ElementsAre(RefIs(OpRef(0))));
}

TEST_F(ChainBuilderTest, MatmulAndPermute) {
  Value a = Row("a");
  Value w = b_.Input("w", v1::DTYPE_BF16,
                     {StaticDim(2), StaticDim(4096), StaticDim(64)});
  Value wt = b_.Permute(w, {0, -1, 1});
  b_.Output("y", b_.Matmul(a, wt));
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c), ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL));
  EXPECT_TRUE(c.ops(0).has_permute());
  EXPECT_THAT(c.ops(0).permute().perm(), ElementsAre(0, -1, 1));  // As given.
  EXPECT_THAT(c.ops(0).args(), ElementsAre(RefIs(InputRef(1))));
  EXPECT_THAT(c.ops(1).args(),
              ElementsAre(RefIs(InputRef(0)), RefIs(OpRef(0))));
}

// The weight is [out, in]: x @ weight^T is PERMUTE {1, 0} then MATMUL(x, it).
void ExpectLinearProduct(const v1::Chain& c) {
  ASSERT_GE(c.ops_size(), 2);
  EXPECT_EQ(c.ops(0).kind(), v1::OP_PERMUTE);
  EXPECT_THAT(c.ops(0).permute().perm(), ElementsAre(1, 0));
  EXPECT_THAT(c.ops(0).args(), ElementsAre(RefIs(InputRef(1))));
  EXPECT_EQ(c.ops(1).kind(), v1::OP_MATMUL);
  EXPECT_THAT(c.ops(1).args(),
              ElementsAre(RefIs(InputRef(0)), RefIs(OpRef(0))));
}

TEST_F(ChainBuilderTest, LinearBiasGeluTanh) {
  Value x = Row("x");
  Value w =
      b_.Input("weight", v1::DTYPE_BF16, {StaticDim(11008), StaticDim(4096)});
  Value bias = b_.Input("bias", v1::DTYPE_BF16, {StaticDim(11008)});
  b_.Output("y", Linear(b_, x, w, bias, Activation::kGeluTanh));
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c), ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL, v1::OP_ADD,
                                    v1::OP_GELU_TANH));
  ExpectLinearProduct(c);
  EXPECT_THAT(c.ops(2).args(),
              ElementsAre(RefIs(OpRef(1)), RefIs(InputRef(2))));
  EXPECT_THAT(c.ops(3).args(), ElementsAre(RefIs(OpRef(2))));
  EXPECT_THAT(c.outputs(0).value(), RefIs(OpRef(3)));
}

TEST_F(ChainBuilderTest, LinearAlone) {
  Value x = Row("x");
  Value w =
      b_.Input("weight", v1::DTYPE_BF16, {StaticDim(1024), StaticDim(4096)});
  b_.Output("y", Linear(b_, x, w));
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c), ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL));
  ExpectLinearProduct(c);
  EXPECT_THAT(c.outputs(0).value(), RefIs(OpRef(1)));
}

TEST_F(ChainBuilderTest, LinearBiasOnly) {
  Value x = Row("x");
  Value w =
      b_.Input("weight", v1::DTYPE_BF16, {StaticDim(1024), StaticDim(4096)});
  Value bias = b_.Input("bias", v1::DTYPE_BF16, {StaticDim(1024)});
  b_.Output("y", Linear(b_, x, w, bias));
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c), ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL, v1::OP_ADD));
  ExpectLinearProduct(c);
  EXPECT_THAT(c.ops(2).args(),
              ElementsAre(RefIs(OpRef(1)), RefIs(InputRef(2))));
}

// Each activation is its one op on the product, with or without a bias.
struct ActivationCase {
  const char* name;
  Activation act;
  v1::OpKind kind;
};

class LinearActivationTest
    : public ChainBuilderTest,
      public ::testing::WithParamInterface<ActivationCase> {};

TEST_P(LinearActivationTest, IsTheLastOp) {
  Value x = Row("x");
  Value w =
      b_.Input("weight", v1::DTYPE_BF16, {StaticDim(1024), StaticDim(4096)});
  b_.Output("y", Linear(b_, x, w, /*bias=*/std::nullopt, GetParam().act));
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c),
              ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL, GetParam().kind));
  ExpectLinearProduct(c);
  EXPECT_THAT(c.ops(2).args(), ElementsAre(RefIs(OpRef(1))));
  EXPECT_THAT(c.outputs(0).value(), RefIs(OpRef(2)));
}

INSTANTIATE_TEST_SUITE_P(
    Activations, LinearActivationTest,
    ::testing::Values(
        ActivationCase{"Relu", Activation::kRelu, v1::OP_RELU},
        ActivationCase{"Silu", Activation::kSilu, v1::OP_SILU},
        ActivationCase{"Gelu", Activation::kGelu, v1::OP_GELU_ERF},
        ActivationCase{"GeluTanh", Activation::kGeluTanh, v1::OP_GELU_TANH},
        ActivationCase{"Sigmoid", Activation::kSigmoid, v1::OP_SIGMOID},
        ActivationCase{"Tanh", Activation::kTanh, v1::OP_TANH}),
    [](const ::testing::TestParamInfo<ActivationCase>& info) {
      return std::string(info.param.name);
    });

TEST_F(ChainBuilderTest, ActivateNoneIsTheValueItself) {
  Value x = Row("x");
  b_.Output("y", b_.Activate(x, Activation::kNone));
  v1::Chain c = Built();
  EXPECT_EQ(c.ops_size(), 0);
  EXPECT_THAT(c.outputs(0).value(), RefIs(InputRef(0)));
}

// Misuse: the first error, naming the field, from Build().
struct ErrorCase {
  const char* name;
  void (*build)(ChainBuilder& b);
  const char* message;
};

class ChainBuilderErrorTest : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(ChainBuilderErrorTest, BuildNamesTheField) {
  ChainBuilder b;
  GetParam().build(b);
  absl::StatusOr<v1::Chain> c = b.Build();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(GetParam().message));
}

Value X(ChainBuilder& b) { return b.Input("x", v1::DTYPE_F32, {StaticDim(4)}); }

INSTANTIATE_TEST_SUITE_P(
    Errors, ChainBuilderErrorTest,
    ::testing::Values(
        ErrorCase{"NoOutputs", [](ChainBuilder& b) { b.Exp(X(b)); },
                  "outputs: none"},
        ErrorCase{"DuplicateOutput",
                  [](ChainBuilder& b) {
                    Value x = X(b);
                    b.Output("y", x);
                    b.Output("y", b.Exp(x));
                  },
                  "outputs[1].name: 'y' already names outputs[0]"},
        ErrorCase{"EmptyOutputName",
                  [](ChainBuilder& b) { b.Output("", X(b)); },
                  "outputs[0].name: empty"},
        ErrorCase{"OtherBuilder",
                  [](ChainBuilder& b) {
                    ChainBuilder other;
                    Value x = X(b);
                    Value y = X(other);
                    b.Output("z", b.Add(x, y));
                  },
                  "ops[0].args[1] (OP_ADD): a Value of another ChainBuilder"},
        ErrorCase{"OtherBuilderOutput",
                  [](ChainBuilder& b) {
                    ChainBuilder other;
                    X(b);
                    b.Output("z", X(other));
                  },
                  "outputs[0].value: a Value of another ChainBuilder"},
        ErrorCase{"UnsetValue",
                  [](ChainBuilder& b) { b.Output("y", b.Exp(Value())); },
                  "ops[0].args[0] (OP_EXP): an unset Value"},
        ErrorCase{"FirstErrorWins",
                  [](ChainBuilder& b) {
                    Value bad = b.Input("x", v1::DTYPE_UNSPECIFIED, {});
                    b.Output("y", RmsNorm(b, bad));
                  },
                  "inputs[0].dtype: unspecified"},
        ErrorCase{"NegativeDim",
                  [](ChainBuilder& b) {
                    b.Output("x", b.Input("x", v1::DTYPE_F32,
                                          {StaticDim(2), StaticDim(-1)}));
                  },
                  "inputs[0].shape[1].size: -1 is negative"},
        ErrorCase{"EmptySymbol",
                  [](ChainBuilder& b) {
                    b.Output("x", b.Input("x", v1::DTYPE_F32, {SymbolDim("")}));
                  },
                  "inputs[0].shape[0].symbol: empty"},
        ErrorCase{"UnsetDim",
                  [](ChainBuilder& b) {
                    b.Output("x", b.Input("x", v1::DTYPE_F32, {v1::Dim()}));
                  },
                  "inputs[0].shape[0]: neither a size nor a symbol"},
        ErrorCase{"EmptyInputName",
                  [](ChainBuilder& b) {
                    b.Output("x", b.Input("", v1::DTYPE_F32, {}));
                  },
                  "inputs[0].name: empty"},
        ErrorCase{"UnknownCastDType",
                  [](ChainBuilder& b) {
                    b.Output("y", b.Cast(X(b), static_cast<v1::DType>(99)));
                  },
                  "ops[0].dtype (OP_CAST): unknown dtype 99"},
        ErrorCase{
            "UnspecifiedKind",
            [](ChainBuilder& b) { b.Output("y", b.Append(v1::Op(), {X(b)})); },
            "ops[0].kind: unspecified"},
        ErrorCase{"UnknownActivation",
                  [](ChainBuilder& b) {
                    Value x = X(b);
                    b.Output("y", Linear(b, x, X(b), std::nullopt,
                                         static_cast<Activation>(42)));
                  },
                  "ops[2] activation: 42 is not an Activation"},
        ErrorCase{
            "LinearUnsetWeight",
            [](ChainBuilder& b) { b.Output("y", Linear(b, X(b), Value())); },
            "ops[0].args[0] (OP_PERMUTE): an unset Value"},
        ErrorCase{"LinearBiasOfAnotherBuilder",
                  [](ChainBuilder& b) {
                    ChainBuilder other;
                    Value x = X(b);
                    Value w = X(b);
                    b.Output("y", Linear(b, x, w, X(other), Activation::kRelu));
                  },
                  "ops[2].args[1] (OP_ADD): a Value of another ChainBuilder"},
        ErrorCase{"MovedFrom",
                  [](ChainBuilder& b) {
                    Value x = X(b);
                    ChainBuilder taken = std::move(b);
                    b = ChainBuilder();
                    b.Output("y", x);
                  },
                  "outputs[0].value: a Value of another ChainBuilder"}),
    [](const ::testing::TestParamInfo<ErrorCase>& info) {
      return std::string(info.param.name);
    });

TEST(ChainBuilderMoveTest, ValuesFollowTheMove) {
  ChainBuilder a;
  Value x = a.Input("x", v1::DTYPE_F32, {StaticDim(4)});
  ChainBuilder b = std::move(a);
  b.Output("y", b.Exp(x));
  EXPECT_TRUE(b.Build().ok());
}

TEST(ChainBuilderMoveTest, BuildLeavesTheBuilderUsable) {
  ChainBuilder b;
  Value x = b.Input("x", v1::DTYPE_F32, {StaticDim(4)});
  b.Output("x", x);
  ASSERT_TRUE(b.Build().ok());
  b.Output("y", b.Exp(x));
  absl::StatusOr<v1::Chain> c = b.Build();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->outputs_size(), 2);
}

}  // namespace
}  // namespace kfuse::client
