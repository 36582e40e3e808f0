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
  EXPECT_FALSE(chain.ops(0).weak_float());                 // Whole: an int, as Python's 2.
  EXPECT_THAT(chain.ops(1).args(),
              ElementsAre(RefIs(InputRef(0)), RefIs(OpRef(0))));
  EXPECT_EQ(chain.ops(2).dtype(), v1::DTYPE_BF16);
  EXPECT_THAT(chain.ops(3).reduce().axes(), ElementsAre(0));
  EXPECT_FALSE(chain.ops(3).reduce().keepdim());
  ASSERT_EQ(chain.outputs_size(), 2);
  EXPECT_EQ(chain.outputs(1).name(), "s");
  EXPECT_THAT(chain.outputs(1).value(), RefIs(OpRef(3)));
}

TEST_F(ChainBuilderTest, FloatScalarIsAWeakFloatWhateverItsValue) {
  b_.Output("y", b_.Mul(b_.Input("x", v1::DTYPE_I32, {StaticDim(8)}), b_.FloatScalar(2.0)));
  v1::Chain chain = Built();
  EXPECT_EQ(chain.ops(0).value(), 2.0);
  EXPECT_EQ(chain.ops(0).dtype(), v1::DTYPE_UNSPECIFIED);
  EXPECT_TRUE(chain.ops(0).weak_float());
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

// F.cross_entropy with i64 labels, as the Python client expands it: the
// pick, the log-sum-exp, the rows kept, the mean over them.
TEST_F(ChainBuilderTest, CrossEntropy) {
  const std::vector<v1::Dim> shape = {SymbolDim("rows", 8192), StaticDim(4096)};
  ShapedValue x{b_.Input("x", v1::DTYPE_BF16, shape), shape};
  Labels labels{b_.Input("labels", v1::DTYPE_I64, {SymbolDim("rows", 8192)})};
  b_.Output("loss", CrossEntropy(b_, x, v1::DTYPE_BF16, labels));
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c),
              ElementsAre(v1::OP_CAST, v1::OP_RESHAPE, v1::OP_IOTA, v1::OP_EQ,
                          v1::OP_CONSTANT, v1::OP_WHERE, v1::OP_REDUCE_SUM,
                          v1::OP_REDUCE_MAX, v1::OP_SUB, v1::OP_EXP,
                          v1::OP_REDUCE_SUM, v1::OP_LOG, v1::OP_REDUCE_MAX,
                          v1::OP_ADD, v1::OP_CONSTANT, v1::OP_NE, v1::OP_SUB,
                          v1::OP_CONSTANT, v1::OP_WHERE, v1::OP_CAST,
                          v1::OP_REDUCE_SUM, v1::OP_CAST, v1::OP_REDUCE_SUM,
                          v1::OP_DIV, v1::OP_CAST));
  // The label's column [rows, 1], the row's class index along 4096.
  EXPECT_EQ(c.ops(1).shape().shape(0).symbol(), "rows");
  EXPECT_EQ(c.ops(1).shape().shape(1).size(), 1);
  EXPECT_EQ(c.ops(2).shape().shape(0).size(), 4096);
  EXPECT_THAT(c.ops(3).args(), ElementsAre(RefIs(OpRef(2)), RefIs(OpRef(1))));
  // logsumexp - pick where the label is not -100; the losses' sum over the
  // count of rows kept.
  EXPECT_EQ(c.ops(14).value(), -100);
  EXPECT_THAT(c.ops(16).args(), ElementsAre(RefIs(OpRef(13)), RefIs(OpRef(6))));
  EXPECT_THAT(c.ops(20).reduce().axes(), ElementsAre(0));
  EXPECT_FALSE(c.ops(20).reduce().keepdim());
  EXPECT_EQ(c.ops(24).dtype(), v1::DTYPE_BF16);
}

// nll_loss of log-probabilities with i32 labels (no cast), labels over two
// dims (one reduction over both), summed; one row (rank-0 labels) reduces
// nothing.
TEST_F(ChainBuilderTest, NllLossSumOverEveryLabelDim) {
  const std::vector<v1::Dim> shape = {StaticDim(4), StaticDim(128), StaticDim(1000)};
  ShapedValue logp{b_.Input("logp", v1::DTYPE_F32, shape), shape};
  Labels labels{b_.Input("labels", v1::DTYPE_I32, {StaticDim(4), StaticDim(128)}),
                v1::DTYPE_I32};
  ClassLossOptions o;
  o.reduction = LossReduction::kSum;
  o.ignore_index = 0;
  b_.Output("loss", NllLoss(b_, logp, v1::DTYPE_F32, labels, o));
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c),
              ElementsAre(v1::OP_RESHAPE, v1::OP_IOTA, v1::OP_EQ, v1::OP_CONSTANT,
                          v1::OP_WHERE, v1::OP_REDUCE_SUM, v1::OP_CONSTANT,
                          v1::OP_NE, v1::OP_NEG, v1::OP_CONSTANT, v1::OP_WHERE,
                          v1::OP_CAST, v1::OP_REDUCE_SUM, v1::OP_CAST));
  EXPECT_EQ(c.ops(0).shape().shape_size(), 3);
  EXPECT_EQ(c.ops(6).value(), 0);
  EXPECT_THAT(c.ops(12).reduce().axes(), ElementsAre(0, 1));

  ChainBuilder one;
  const std::vector<v1::Dim> row = {StaticDim(1000)};
  ShapedValue x{one.Input("x", v1::DTYPE_F32, row), row};
  Labels label{one.Input("label", v1::DTYPE_I64, {})};
  one.Output("loss", CrossEntropy(one, x, v1::DTYPE_F32, label));
  absl::StatusOr<v1::Chain> c1 = one.Build();
  ASSERT_TRUE(c1.ok()) << c1.status();
  EXPECT_EQ(c1->ops(1).shape().shape_size(), 1);  // The column [1].
  EXPECT_EQ(Kinds(*c1).back(), v1::OP_CAST);
  EXPECT_EQ(Kinds(*c1)[Kinds(*c1).size() - 2], v1::OP_DIV);
  for (const v1::Op& op : c1->ops()) {
    if (op.kind() == v1::OP_REDUCE_SUM) {
      EXPECT_THAT(op.reduce().axes(), ElementsAre(-1));
    }
  }

  ChainBuilder bad;
  ShapedValue scalar{bad.Input("x", v1::DTYPE_F32, {}), {}};
  Labels none{bad.Input("label", v1::DTYPE_I32, {}), v1::DTYPE_I32};
  bad.Output("loss", CrossEntropy(bad, scalar, v1::DTYPE_F32, none));
  EXPECT_THAT(std::string(bad.Build().status().message()), HasSubstr("no class axis"));

  ChainBuilder floats;
  ShapedValue logits{floats.Input("x", v1::DTYPE_F32, row), row};
  Labels probs{floats.Input("p", v1::DTYPE_F32, {}), v1::DTYPE_F32};
  floats.Output("loss", NllLoss(floats, logits, v1::DTYPE_F32, probs));
  EXPECT_THAT(std::string(floats.Build().status().message()),
              HasSubstr("labels.dtype DTYPE_F32: class labels are DTYPE_I32 or DTYPE_I64"));

  ChainBuilder wide;
  ShapedValue wx{wide.Input("x", v1::DTYPE_F32, row), row};
  Labels wl{wide.Input("label", v1::DTYPE_I64, {})};
  ClassLossOptions far;
  far.ignore_index = int64_t{1} << 32;
  wide.Output("loss", CrossEntropy(wide, wx, v1::DTYPE_F32, wl, far));
  EXPECT_THAT(std::string(wide.Build().status().message()),
              HasSubstr("ignore_index 4294967296 is outside i32 (labels are compared as i32)"));
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

TEST_F(ChainBuilderTest, ReshapeAndIota) {
  Value x = Row("x");
  Value r = b_.Reshape(x, {SymbolDim("rows"), StaticDim(64), StaticDim(64)});
  Value i = b_.Iota({StaticDim(2), SymbolDim("n", 8)}, -1, v1::DTYPE_I64);
  b_.Output("r", r);
  b_.Output("i", i);
  v1::Chain c = Built();
  EXPECT_THAT(Kinds(c), ElementsAre(v1::OP_RESHAPE, v1::OP_IOTA));
  ASSERT_EQ(c.ops(0).shape().shape_size(), 3);
  EXPECT_EQ(c.ops(0).shape().shape(0).symbol(), "rows");
  EXPECT_EQ(c.ops(0).shape().shape(2).size(), 64);
  EXPECT_THAT(c.ops(0).args(), ElementsAre(RefIs(InputRef(0))));
  EXPECT_EQ(c.ops(1).args_size(), 0);
  EXPECT_EQ(c.ops(1).dtype(), v1::DTYPE_I64);
  EXPECT_TRUE(c.ops(1).has_axis());
  EXPECT_EQ(c.ops(1).axis().axis(), 1);            // -1 written non-negative.
  EXPECT_EQ(c.ops(1).shape().shape(1).hint(), 8);  // As given.
}

TEST_F(ChainBuilderTest, ReshapeToAScalarSetsTheShape) {
  Value x = b_.Input("x", v1::DTYPE_F32, {StaticDim(1)});
  b_.Output("y", b_.Reshape(x, {}));
  v1::Chain c = Built();
  EXPECT_TRUE(c.ops(0).has_shape());
  EXPECT_EQ(c.ops(0).shape().shape_size(), 0);
}

// Dims of a shape attribute as text: "8", "S"; a hint or max shows as
// "S~2048" (the expansion writes symbols by name alone, as Python's).
std::vector<std::string> DimsOf(const v1::Op& op) {
  std::vector<std::string> dims;
  for (const v1::Dim& d : op.shape().shape()) {
    if (d.kind_case() == v1::Dim::kSize) {
      dims.push_back(std::to_string(d.size()));
    } else {
      dims.push_back(d.hint() || d.max()
                         ? d.symbol() + "~" + std::to_string(d.hint())
                         : d.symbol());
    }
  }
  return dims;
}

std::vector<v1::Dim> Shape4(v1::Dim a, int64_t h, v1::Dim l, int64_t d) {
  return {std::move(a), StaticDim(h), std::move(l), StaticDim(d)};
}

class AttentionTest : public ChainBuilderTest {
 protected:
  // q [batch, heads, seq, head_dim], k and v [batch, kv_heads, seq, dims].
  void Qkv(int64_t heads, int64_t kv_heads, v1::Dim seq, int64_t head_dim,
           int64_t value_dim) {
    q_ = b_.Input("q", v1::DTYPE_BF16, Shape4(batch_, heads, seq, head_dim));
    k_ = b_.Input("k", v1::DTYPE_BF16, Shape4(batch_, kv_heads, seq, head_dim));
    v_ =
        b_.Input("v", v1::DTYPE_BF16, Shape4(batch_, kv_heads, seq, value_dim));
    o_.batch = {batch_};
    o_.heads = heads;
    if (kv_heads != heads) o_.kv_heads = kv_heads;
    o_.seq_q = seq;
    o_.seq_k = seq;
    o_.head_dim = head_dim;
    if (value_dim != head_dim) o_.value_dim = value_dim;
  }
  ShapedValue Operand(const char* name, v1::DType t,
                      std::vector<v1::Dim> shape) {
    return ShapedValue{b_.Input(name, t, shape), shape};
  }
  v1::Chain Build() {
    AttentionResult r = Attention(b_, q_, k_, v_, o_);
    b_.Output("out", r.out);
    EXPECT_EQ(r.lse.has_value(), o_.return_lse);
    if (r.lse.has_value()) b_.Output("lse", *r.lse);
    return Built();
  }

  v1::Dim batch_ = StaticDim(2);
  Value q_, k_, v_;
  AttentionOptions o_;
};

TEST_F(AttentionTest, CausalHeads) {
  Qkv(8, 8, StaticDim(1024), 64, 64);
  o_.causal = true;
  v1::Chain c = Build();
  EXPECT_THAT(
      Kinds(c),
      ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL, v1::OP_CONSTANT, v1::OP_MUL,
                  v1::OP_IOTA, v1::OP_IOTA, v1::OP_LE, v1::OP_CONSTANT,
                  v1::OP_WHERE, v1::OP_REDUCE_MAX, v1::OP_SUB, v1::OP_EXP,
                  v1::OP_REDUCE_SUM, v1::OP_DIV, v1::OP_MATMUL));
  ExpectRowReductions(c, 2);
  EXPECT_THAT(c.ops(0).permute().perm(), ElementsAre(0, 1, 3, 2));
  EXPECT_THAT(c.ops(0).args(), ElementsAre(RefIs(InputRef(1))));
  EXPECT_THAT(c.ops(1).args(),
              ElementsAre(RefIs(InputRef(0)), RefIs(OpRef(0))));
  EXPECT_EQ(c.ops(2).value(), 0.125);  // 1/sqrt(64).
  EXPECT_EQ(c.ops(2).dtype(), v1::DTYPE_UNSPECIFIED);
  // Columns (keys) and rows (queries) of the scores; key j <= query i.
  for (int j : {4, 5}) {
    EXPECT_THAT(DimsOf(c.ops(j)), ElementsAre("2", "8", "1024", "1024"));
    EXPECT_EQ(c.ops(j).dtype(), v1::DTYPE_I32);
  }
  EXPECT_EQ(c.ops(4).axis().axis(), 3);
  EXPECT_EQ(c.ops(5).axis().axis(), 2);
  EXPECT_THAT(c.ops(6).args(), ElementsAre(RefIs(OpRef(4)), RefIs(OpRef(5))));
  EXPECT_TRUE(std::isinf(c.ops(7).value()) && c.ops(7).value() < 0);
  EXPECT_THAT(c.ops(8).args(),
              ElementsAre(RefIs(OpRef(6)), RefIs(OpRef(3)), RefIs(OpRef(7))));
  EXPECT_THAT(c.ops(14).args(),
              ElementsAre(RefIs(OpRef(13)), RefIs(InputRef(2))));
  EXPECT_THAT(c.outputs(0).value(), RefIs(OpRef(14)));
}

TEST_F(AttentionTest, PlainHasNoMaskOps) {
  Qkv(4, 4, StaticDim(128), 32, 32);
  o_.scale = 0.5;
  v1::Chain c = Build();
  EXPECT_THAT(Kinds(c),
              ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL, v1::OP_CONSTANT,
                          v1::OP_MUL, v1::OP_REDUCE_MAX, v1::OP_SUB, v1::OP_EXP,
                          v1::OP_REDUCE_SUM, v1::OP_DIV, v1::OP_MATMUL));
  EXPECT_EQ(c.ops(2).value(), 0.5);
}

TEST_F(AttentionTest, GroupedQueriesReshapeAndLse) {
  batch_ = StaticDim(1);
  Qkv(8, 2, StaticDim(512), 128, 96);
  o_.return_lse = true;
  v1::Chain c = Build();
  EXPECT_THAT(
      Kinds(c),
      ElementsAre(v1::OP_RESHAPE, v1::OP_RESHAPE, v1::OP_RESHAPE,
                  v1::OP_PERMUTE, v1::OP_MATMUL, v1::OP_CONSTANT, v1::OP_MUL,
                  v1::OP_REDUCE_MAX, v1::OP_SUB, v1::OP_EXP, v1::OP_REDUCE_SUM,
                  v1::OP_DIV, v1::OP_MATMUL, v1::OP_RESHAPE, v1::OP_LOG,
                  v1::OP_ADD, v1::OP_CAST, v1::OP_RESHAPE));
  // q [1, 8, L, D] as [1, 2, 4, L, D]; k and v gain a group dim of 1.
  EXPECT_THAT(DimsOf(c.ops(0)), ElementsAre("1", "2", "4", "512", "128"));
  EXPECT_THAT(DimsOf(c.ops(1)), ElementsAre("1", "2", "1", "512", "128"));
  EXPECT_THAT(DimsOf(c.ops(2)), ElementsAre("1", "2", "1", "512", "96"));
  for (int j = 0; j < 3; ++j) {
    EXPECT_THAT(c.ops(j).args(), ElementsAre(RefIs(InputRef(j))));
  }
  EXPECT_THAT(c.ops(3).permute().perm(), ElementsAre(0, 1, 2, 4, 3));
  EXPECT_THAT(c.ops(3).args(), ElementsAre(RefIs(OpRef(1))));
  EXPECT_THAT(c.ops(4).args(), ElementsAre(RefIs(OpRef(0)), RefIs(OpRef(3))));
  EXPECT_EQ(c.ops(5).value(), 1.0 / std::sqrt(128.0));
  EXPECT_THAT(c.ops(12).args(), ElementsAre(RefIs(OpRef(11)), RefIs(OpRef(2))));
  // The output back as [1, 8, L, Dv].
  EXPECT_THAT(DimsOf(c.ops(13)), ElementsAre("1", "8", "512", "96"));
  EXPECT_THAT(c.ops(13).args(), ElementsAre(RefIs(OpRef(12))));
  // lse = cast(max + log(sum), f32) as [1, 8, L].
  EXPECT_THAT(c.ops(14).args(), ElementsAre(RefIs(OpRef(10))));
  EXPECT_THAT(c.ops(15).args(), ElementsAre(RefIs(OpRef(7)), RefIs(OpRef(14))));
  EXPECT_EQ(c.ops(16).dtype(), v1::DTYPE_F32);
  EXPECT_THAT(DimsOf(c.ops(17)), ElementsAre("1", "8", "512"));
  EXPECT_THAT(c.outputs(0).value(), RefIs(OpRef(13)));
  EXPECT_THAT(c.outputs(1).value(), RefIs(OpRef(17)));
}

TEST_F(AttentionTest, LseWithoutGroupsIsReshapedToo) {
  Qkv(4, 4, StaticDim(64), 64, 64);
  o_.return_lse = true;
  v1::Chain c = Build();
  ASSERT_EQ(c.ops_size(), 14);
  EXPECT_EQ(c.ops(9).kind(), v1::OP_MATMUL);
  EXPECT_EQ(c.ops(12).kind(), v1::OP_CAST);
  EXPECT_EQ(c.ops(13).kind(), v1::OP_RESHAPE);
  EXPECT_THAT(DimsOf(c.ops(13)), ElementsAre("2", "4", "64"));
  EXPECT_THAT(c.outputs(0).value(), RefIs(OpRef(9)));
}

TEST_F(AttentionTest, MaskLengthsAndCausalCombineThenGuard) {
  Qkv(4, 4, StaticDim(256), 64, 64);
  o_.causal = true;
  o_.mask =
      Operand("mask", v1::DTYPE_BOOL, Shape4(batch_, 1, StaticDim(256), 256));
  o_.lengths = Operand("lengths", v1::DTYPE_I32, {batch_});
  v1::Chain c = Build();
  EXPECT_THAT(
      Kinds(c),
      ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL, v1::OP_CONSTANT, v1::OP_MUL,
                  v1::OP_IOTA, v1::OP_IOTA, v1::OP_LE, v1::OP_LOGICAL_AND,
                  v1::OP_RESHAPE, v1::OP_LT, v1::OP_LOGICAL_AND,
                  v1::OP_CONSTANT, v1::OP_WHERE, v1::OP_REDUCE_MAX, v1::OP_SUB,
                  v1::OP_EXP, v1::OP_REDUCE_SUM, v1::OP_DIV, v1::OP_CONSTANT,
                  v1::OP_EQ, v1::OP_CONSTANT, v1::OP_WHERE, v1::OP_MATMUL));
  // allowed = (mask & causal) & (col < lengths [B, 1, 1, 1]).
  EXPECT_THAT(c.ops(7).args(),
              ElementsAre(RefIs(InputRef(3)), RefIs(OpRef(6))));
  EXPECT_THAT(DimsOf(c.ops(8)), ElementsAre("2", "1", "1", "1"));
  EXPECT_THAT(c.ops(8).args(), ElementsAre(RefIs(InputRef(4))));
  EXPECT_THAT(c.ops(9).args(), ElementsAre(RefIs(OpRef(4)), RefIs(OpRef(8))));
  EXPECT_THAT(c.ops(10).args(), ElementsAre(RefIs(OpRef(7)), RefIs(OpRef(9))));
  EXPECT_THAT(c.ops(12).args(),
              ElementsAre(RefIs(OpRef(10)), RefIs(OpRef(3)), RefIs(OpRef(11))));
  // where(max == -inf, 0, p).
  EXPECT_TRUE(std::isinf(c.ops(18).value()) && c.ops(18).value() < 0);
  EXPECT_THAT(c.ops(19).args(),
              ElementsAre(RefIs(OpRef(13)), RefIs(OpRef(18))));
  EXPECT_EQ(c.ops(20).value(), 0.0);
  EXPECT_EQ(c.ops(20).dtype(), v1::DTYPE_UNSPECIFIED);
  EXPECT_THAT(c.ops(21).args(), ElementsAre(RefIs(OpRef(19)), RefIs(OpRef(20)),
                                            RefIs(OpRef(17))));
  EXPECT_THAT(c.ops(22).args(),
              ElementsAre(RefIs(OpRef(21)), RefIs(InputRef(2))));
}

TEST_F(AttentionTest, MaskAloneIsWhereAndGuard) {
  Qkv(4, 4, StaticDim(256), 64, 64);
  o_.mask = Operand("mask", v1::DTYPE_BOOL, {StaticDim(256), StaticDim(256)});
  v1::Chain c = Build();
  EXPECT_THAT(
      Kinds(c),
      ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL, v1::OP_CONSTANT, v1::OP_MUL,
                  v1::OP_CONSTANT, v1::OP_WHERE, v1::OP_REDUCE_MAX, v1::OP_SUB,
                  v1::OP_EXP, v1::OP_REDUCE_SUM, v1::OP_DIV, v1::OP_CONSTANT,
                  v1::OP_EQ, v1::OP_CONSTANT, v1::OP_WHERE, v1::OP_MATMUL));
  EXPECT_THAT(c.ops(5).args(), ElementsAre(RefIs(InputRef(3)), RefIs(OpRef(3)),
                                           RefIs(OpRef(4))));
}

TEST_F(AttentionTest, LengthsAloneGuardButNoAnd) {
  Qkv(4, 4, StaticDim(256), 64, 64);
  o_.lengths = Operand("lengths", v1::DTYPE_I64, {batch_});
  v1::Chain c = Build();
  EXPECT_THAT(
      Kinds(c),
      ElementsAre(v1::OP_PERMUTE, v1::OP_MATMUL, v1::OP_CONSTANT, v1::OP_MUL,
                  v1::OP_IOTA, v1::OP_RESHAPE, v1::OP_LT, v1::OP_CONSTANT,
                  v1::OP_WHERE, v1::OP_REDUCE_MAX, v1::OP_SUB, v1::OP_EXP,
                  v1::OP_REDUCE_SUM, v1::OP_DIV, v1::OP_CONSTANT, v1::OP_EQ,
                  v1::OP_CONSTANT, v1::OP_WHERE, v1::OP_MATMUL));
}

TEST_F(AttentionTest, BiasIsAddedAfterTheScale) {
  Qkv(4, 4, StaticDim(64), 64, 64);
  o_.bias =
      Operand("bias", v1::DTYPE_BF16, Shape4(batch_, 4, StaticDim(64), 64));
  v1::Chain c = Build();
  ASSERT_EQ(c.ops_size(), 15);
  EXPECT_EQ(c.ops(3).kind(), v1::OP_MUL);
  EXPECT_EQ(c.ops(4).kind(), v1::OP_ADD);
  EXPECT_THAT(c.ops(4).args(),
              ElementsAre(RefIs(OpRef(3)), RefIs(InputRef(3))));
  EXPECT_EQ(c.ops(5).kind(), v1::OP_REDUCE_MAX);
  // A -inf bias can empty a row: the guard, as with a mask.
  EXPECT_EQ(c.ops(11).kind(), v1::OP_EQ);
  EXPECT_EQ(c.ops(13).kind(), v1::OP_WHERE);
  EXPECT_EQ(c.ops(14).kind(), v1::OP_MATMUL);
}

TEST_F(AttentionTest, GroupedMaskAndBiasSplitTheirHeads) {
  const v1::Dim seq = SymbolDim("S", /*hint=*/2048, /*max=*/4096);
  Qkv(12, 4, seq, 64, 64);
  o_.causal = true;
  o_.bias = Operand("bias", v1::DTYPE_BF16, Shape4(batch_, 1, seq, 1));
  o_.bias->shape.back() = seq;
  o_.mask = Operand("mask", v1::DTYPE_BOOL, Shape4(batch_, 12, seq, 1));
  o_.mask->shape.back() = seq;
  v1::Chain c = Build();
  ASSERT_GE(c.ops_size(), 12);
  EXPECT_EQ(c.inputs(0).shape(2).hint(), 2048);  // Inputs keep the hint.
  EXPECT_THAT(DimsOf(c.ops(0)), ElementsAre("2", "4", "3", "S", "64"));
  EXPECT_THAT(DimsOf(c.ops(1)), ElementsAre("2", "4", "1", "S", "64"));
  // The bias first, then the mask, as Python's: heads 1 -> [1, 1], 12 -> [4,
  // 3].
  EXPECT_EQ(c.ops(3).kind(), v1::OP_RESHAPE);
  EXPECT_THAT(c.ops(3).args(), ElementsAre(RefIs(InputRef(3))));
  EXPECT_THAT(DimsOf(c.ops(3)), ElementsAre("2", "1", "1", "S", "S"));
  EXPECT_EQ(c.ops(4).kind(), v1::OP_RESHAPE);
  EXPECT_THAT(c.ops(4).args(), ElementsAre(RefIs(InputRef(4))));
  EXPECT_THAT(DimsOf(c.ops(4)), ElementsAre("2", "4", "3", "S", "S"));
  EXPECT_EQ(c.ops(5).kind(), v1::OP_PERMUTE);
  EXPECT_EQ(c.ops(9).kind(), v1::OP_ADD);
  EXPECT_THAT(c.ops(9).args(), ElementsAre(RefIs(OpRef(8)), RefIs(OpRef(3))));
  // The iotas span the grouped scores [2, 4, 3, S, S].
  EXPECT_EQ(c.ops(10).kind(), v1::OP_IOTA);
  EXPECT_THAT(DimsOf(c.ops(10)), ElementsAre("2", "4", "3", "S", "S"));
  EXPECT_EQ(c.ops(10).axis().axis(), 4);
  EXPECT_EQ(c.ops(11).axis().axis(), 3);
  // The split mask is what the causal mask is and-ed with.
  EXPECT_EQ(c.ops(13).kind(), v1::OP_LOGICAL_AND);
  EXPECT_THAT(c.ops(13).args(), ElementsAre(RefIs(OpRef(4)), RefIs(OpRef(12))));
}

TEST_F(AttentionTest, GroupedOperandsBelowRankThreeAreNotSplit) {
  Qkv(8, 4, StaticDim(32), 64, 64);
  o_.mask = Operand("mask", v1::DTYPE_BOOL, {StaticDim(32), StaticDim(32)});
  v1::Chain c = Build();
  EXPECT_THAT(Kinds(c), ::testing::Contains(v1::OP_RESHAPE).Times(4));
  EXPECT_EQ(c.ops(3).kind(), v1::OP_PERMUTE);
  EXPECT_THAT(c.ops(8).args(), ElementsAre(RefIs(InputRef(3)), RefIs(OpRef(6)),
                                           RefIs(OpRef(7))));
}

TEST_F(AttentionTest, BiasBroadcastWidensTheIotaShape) {
  batch_ = StaticDim(1);
  Qkv(2, 2, StaticDim(16), 64, 64);
  o_.causal = true;
  o_.bias = Operand("bias", v1::DTYPE_BF16,
                    Shape4(StaticDim(3), 2, StaticDim(16), 16));
  v1::Chain c = Build();
  ASSERT_EQ(c.ops(5).kind(), v1::OP_IOTA);
  EXPECT_THAT(DimsOf(c.ops(5)), ElementsAre("3", "2", "16", "16"));
}

TEST_F(AttentionTest, NoBatchDimsAndTwoSequences) {
  q_ =
      b_.Input("q", v1::DTYPE_F16, {StaticDim(4), StaticDim(1), StaticDim(64)});
  k_ = b_.Input("k", v1::DTYPE_F16,
                {StaticDim(1), SymbolDim("kv", 4096), StaticDim(64)});
  v_ = b_.Input("v", v1::DTYPE_F16,
                {StaticDim(1), SymbolDim("kv", 4096), StaticDim(64)});
  o_.heads = 4;
  o_.kv_heads = 1;
  o_.seq_q = StaticDim(1);
  o_.seq_k = SymbolDim("kv", 4096);
  o_.head_dim = 64;
  o_.causal = true;
  v1::Chain c = Build();
  EXPECT_THAT(DimsOf(c.ops(0)), ElementsAre("1", "4", "1", "64"));
  EXPECT_THAT(DimsOf(c.ops(1)), ElementsAre("1", "1", "kv", "64"));
  EXPECT_THAT(c.ops(3).permute().perm(), ElementsAre(0, 1, 3, 2));
  EXPECT_THAT(DimsOf(c.ops(7)), ElementsAre("1", "4", "1", "kv"));
  EXPECT_THAT(DimsOf(c.ops(c.ops_size() - 1)), ElementsAre("4", "1", "64"));
}

TEST(AttentionErrorTest, ResultsAreUnset) {
  ChainBuilder b;
  Value x = b.Input("x", v1::DTYPE_BF16, {StaticDim(4)});
  AttentionOptions o;
  o.return_lse = true;
  AttentionResult r = Attention(b, x, x, x, o);
  EXPECT_FALSE(r.out.is_set());
  ASSERT_TRUE(r.lse.has_value());
  EXPECT_FALSE(r.lse->is_set());
  b.Output("x", x);
  absl::StatusOr<v1::Chain> c = b.Build();
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("attention.heads: 0 must be >= 1"));
  EXPECT_EQ(b.Build().status().code(), absl::StatusCode::kInvalidArgument);
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

// Valid options for [1, 8, 128, 64] queries; each case breaks one field.
AttentionOptions GoodAttention() {
  AttentionOptions o;
  o.batch = {StaticDim(1)};
  o.heads = 8;
  o.seq_q = StaticDim(128);
  o.seq_k = StaticDim(128);
  o.head_dim = 64;
  return o;
}

void BuildAttention(ChainBuilder& b,
                    void (*edit)(ChainBuilder&, AttentionOptions&)) {
  Value q = X(b);
  AttentionOptions o = GoodAttention();
  edit(b, o);
  AttentionResult r = Attention(b, q, q, q, o);
  b.Output("y", r.out);
}

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
        ErrorCase{"AttentionHeads",
                  [](ChainBuilder& b) {
                    BuildAttention(b, [](ChainBuilder&, AttentionOptions& o) {
                      o.heads = -2;
                    });
                  },
                  "attention.heads: -2 must be >= 1"},
        ErrorCase{"AttentionKvHeadsDoNotDivide",
                  [](ChainBuilder& b) {
                    BuildAttention(b, [](ChainBuilder&, AttentionOptions& o) {
                      o.kv_heads = 3;
                    });
                  },
                  "attention.kv_heads: 3 does not divide heads (8)"},
        ErrorCase{"AttentionKvHeadsAboveHeads",
                  [](ChainBuilder& b) {
                    BuildAttention(b, [](ChainBuilder&, AttentionOptions& o) {
                      o.kv_heads = 16;
                    });
                  },
                  "attention.kv_heads: 16 does not divide heads (8)"},
        ErrorCase{"AttentionKvHeadsZero",
                  [](ChainBuilder& b) {
                    BuildAttention(b, [](ChainBuilder&, AttentionOptions& o) {
                      o.kv_heads = 0;
                    });
                  },
                  "attention.kv_heads: 0 must be >= 1"},
        ErrorCase{"AttentionSeqUnset",
                  [](ChainBuilder& b) {
                    BuildAttention(b, [](ChainBuilder&, AttentionOptions& o) {
                      o.seq_q = v1::Dim();
                    });
                  },
                  "attention.seq_q: neither a size nor a symbol"},
        ErrorCase{"AttentionSeqZero",
                  [](ChainBuilder& b) {
                    BuildAttention(b, [](ChainBuilder&, AttentionOptions& o) {
                      o.seq_k = StaticDim(0);
                    });
                  },
                  "attention.seq_k.size: 0 must be >= 1"},
        ErrorCase{"AttentionHeadDim",
                  [](ChainBuilder& b) {
                    BuildAttention(b, [](ChainBuilder&, AttentionOptions& o) {
                      o.head_dim = 0;
                    });
                  },
                  "attention.head_dim: 0 must be >= 1"},
        ErrorCase{"AttentionValueDim",
                  [](ChainBuilder& b) {
                    BuildAttention(b, [](ChainBuilder&, AttentionOptions& o) {
                      o.value_dim = -1;
                    });
                  },
                  "attention.value_dim: -1 must be >= 1"},
        ErrorCase{"AttentionBatch",
                  [](ChainBuilder& b) {
                    BuildAttention(b, [](ChainBuilder&, AttentionOptions& o) {
                      o.batch.push_back(SymbolDim(""));
                    });
                  },
                  "attention.batch[1].symbol: empty"},
        ErrorCase{"AttentionScale",
                  [](ChainBuilder& b) {
                    BuildAttention(b, [](ChainBuilder&, AttentionOptions& o) {
                      o.scale = std::nan("");
                    });
                  },
                  "attention.scale: nan is not finite"},
        ErrorCase{"AttentionGroupedMaskHeads",
                  [](ChainBuilder& b) {
                    BuildAttention(b, [](ChainBuilder& b, AttentionOptions& o) {
                      o.kv_heads = 2;
                      o.mask = ShapedValue{X(b),
                                           {StaticDim(1), StaticDim(4),
                                            StaticDim(128), StaticDim(128)}};
                    });
                  },
                  "attention.mask.shape[1]: 4 heads do not split"},
        ErrorCase{"AttentionGroupedBiasSymbolHeads",
                  [](ChainBuilder& b) {
                    BuildAttention(b, [](ChainBuilder& b, AttentionOptions& o) {
                      o.kv_heads = 4;
                      o.bias = ShapedValue{
                          X(b),
                          {SymbolDim("H"), StaticDim(128), StaticDim(128)}};
                    });
                  },
                  "attention.bias.shape[0]: 'H' heads do not split"},
        ErrorCase{"AttentionLengthsShape",
                  [](ChainBuilder& b) {
                    BuildAttention(b, [](ChainBuilder& b, AttentionOptions& o) {
                      o.lengths = ShapedValue{X(b), {StaticDim(-1)}};
                    });
                  },
                  "attention.lengths.shape[0].size: -1 is negative"},
        ErrorCase{"AttentionLengthsRank",
                  [](ChainBuilder& b) {
                    BuildAttention(b, [](ChainBuilder& b, AttentionOptions& o) {
                      o.lengths = ShapedValue{
                          X(b), std::vector<v1::Dim>(5, StaticDim(1))};
                    });
                  },
                  "attention.lengths.shape: rank 5 is above the scores' (4)"},
        ErrorCase{"AttentionUnsetQuery",
                  [](ChainBuilder& b) {
                    AttentionOptions o = GoodAttention();
                    Value k = X(b);
                    b.Output("y", Attention(b, Value(), k, k, o).out);
                  },
                  "ops[1].args[0] (OP_MATMUL): an unset Value"},
        ErrorCase{
            "ReshapeNegativeDim",
            [](ChainBuilder& b) {
              b.Output("y", b.Reshape(X(b), {StaticDim(2), StaticDim(-2)}));
            },
            "ops[0].shape.shape[1].size: -2 is negative"},
        ErrorCase{"IotaAxis",
                  [](ChainBuilder& b) {
                    b.Output("y", b.Iota({StaticDim(2), StaticDim(3)}, 2));
                  },
                  "ops[0].axis.axis (OP_IOTA): 2 is out of range for rank 2"},
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
