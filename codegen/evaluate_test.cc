#include "codegen/evaluate.h"

#include <cmath>
#include <functional>
#include <limits>

#include "codegen/validate.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

TensorType F32(std::vector<Dim> shape) { return TensorType{DType::kF32, std::move(shape)}; }

// Validates `c` and evaluates its outputs.
std::vector<std::vector<double>> Eval(Chain c, const std::vector<std::vector<double>>& inputs,
                                      EvalMode mode = EvalMode::kExact64,
                                      std::vector<int64_t> symbols = {}) {
  auto v = Validate(std::move(c));
  EXPECT_TRUE(v.ok()) << v.status();
  if (!v.ok()) return {};
  auto out = Evaluate(*v, inputs, symbols, mode);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<std::vector<double>>{};
}

void ExpectSame(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << ": " << got[i];
    } else {
      EXPECT_DOUBLE_EQ(got[i], want[i]) << "element " << i;
    }
  }
}

TEST(RoundToTest, Table) {
  struct Case {
    DType t;
    double x, want;
  } cases[] = {
      {DType::kBF16, 1 + std::ldexp(1, -8), 1},                          // Tie to even.
      {DType::kBF16, 1 + 3 * std::ldexp(1, -8), 1 + std::ldexp(1, -6)},  // Tie to even.
      {DType::kBF16, 1 + std::ldexp(1, -8) + std::ldexp(1, -20), 1 + std::ldexp(1, -7)},
      {DType::kF16, 65519, 65504},
      {DType::kF16, 65520, HUGE_VAL},
      {DType::kF16, std::ldexp(1, -24), std::ldexp(1, -24)},  // Smallest subnormal.
      {DType::kF16, std::ldexp(1, -25), 0},                   // Tie to even: zero.
      {DType::kF16, 0.1, 0.0999755859375},
      {DType::kF32, 0.1, static_cast<double>(0.1f)},
      {DType::kF32, 1e39, HUGE_VAL},
      {DType::kI32, -2.7, -2},
      {DType::kI32, 3e9, 2147483647},
      {DType::kI32, kNaN, 0},
      {DType::kBool, 0.5, 1},
      {DType::kBool, kNaN, 1},
      {DType::kBool, -0.0, 0},
  };
  for (const Case& k : cases) {
    EXPECT_EQ(RoundTo(k.t, k.x), k.want) << DTypeName(k.t) << " " << k.x;
  }
  EXPECT_TRUE(std::isnan(RoundTo(DType::kBF16, kNaN)));
  EXPECT_TRUE(IsExactIn(DType::kF16, 65504));
  EXPECT_FALSE(IsExactIn(DType::kF16, 70000));
  EXPECT_FALSE(IsExactIn(DType::kI32, kNaN));
}

TEST(EvaluateTest, NaNPropagationOfMaximumMinimumAndRelu) {
  Chain c;
  int x = c.AddInput(F32({Dim::Static(4)}));
  int zero = c.AddConstant(0);
  c.outputs = {c.AddOp(OpKind::kMaximum, {x, zero}), c.AddOp(OpKind::kMinimum, {x, zero}),
               c.AddOp(OpKind::kRelu, {x})};
  for (EvalMode mode : {EvalMode::kExact64, EvalMode::kEager}) {
    auto out = Eval(c, {{1, kNaN, -2, 0}}, mode);
    ASSERT_EQ(out.size(), 3u);
    ExpectSame(out[0], {1, kNaN, 0, 0});
    ExpectSame(out[1], {0, kNaN, -2, 0});
    ExpectSame(out[2], {1, kNaN, 0, 0});
  }
}

TEST(EvaluateTest, ActivationsMatchTheirFormulas) {
  Chain c;
  int x = c.AddInput(F32({Dim::Static(4)}));
  c.outputs = {c.AddOp(OpKind::kGeluTanh, {x}), c.AddOp(OpKind::kGeluErf, {x}),
               c.AddOp(OpKind::kSilu, {x}), c.AddOp(OpKind::kSoftplus, {x}),
               c.AddOp(OpKind::kSigmoid, {x})};
  std::vector<double> in = {-1, 0, 1.5, 25};
  auto out = Eval(c, {in});
  ASSERT_EQ(out.size(), 5u);
  for (size_t i = 0; i < in.size(); ++i) {
    double v = in[i];
    double k = std::sqrt(2 / M_PI);
    EXPECT_DOUBLE_EQ(out[0][i], 0.5 * v * (1 + std::tanh(k * (v + 0.044715 * v * v * v))));
    EXPECT_DOUBLE_EQ(out[1][i], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    EXPECT_DOUBLE_EQ(out[2][i], v / (1 + std::exp(-v)));
    EXPECT_DOUBLE_EQ(out[4][i], 1 / (1 + std::exp(-v)));
  }
  EXPECT_DOUBLE_EQ(out[3][1], std::log(2.0));
  EXPECT_EQ(out[3][3], 25);  // Above torch's threshold of 20: x itself.
}

TEST(EvaluateTest, EagerRoundsEachBf16Intermediate) {
  // y = (x + 2^-8) + 2^-8 on bf16 x = 1: eager rounds 1 + 2^-8 to 1 (tie to
  // even) twice; exact gives 1 + 2^-7, and a fused kernel would too.
  Chain c;
  int x = c.AddInput(TensorType{DType::kBF16, {Dim::Static(1)}});
  int eps = c.AddConstant(std::ldexp(1, -8));
  int y = c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kAdd, {x, eps}), eps});
  c.outputs = {y};
  EXPECT_EQ(Eval(c, {{1}}, EvalMode::kEager)[0][0], 1);
  EXPECT_EQ(Eval(c, {{1}}, EvalMode::kExact64)[0][0], 1 + std::ldexp(1, -7));
}

TEST(EvaluateTest, EagerComputesInF32) {
  Chain c;
  int x = c.AddInput(F32({Dim::Static(1)}));
  c.outputs = {c.AddOp(OpKind::kExp, {x})};
  EXPECT_EQ(Eval(c, {{1}}, EvalMode::kEager)[0][0], static_cast<double>(std::exp(1.0f)));
  EXPECT_EQ(Eval(c, {{1}}, EvalMode::kExact64)[0][0], std::exp(1.0));
}

TEST(EvaluateTest, BroadcastCastsIntegersAndWhere) {
  Chain c;
  int a = c.AddInput(F32({Dim::Static(2), Dim::Static(1)}));
  int b = c.AddInput(F32({Dim::Static(3)}));
  int i = c.AddInput(TensorType{DType::kI32, {Dim::Static(3)}});
  int sum = c.AddOp(OpKind::kAdd, {a, b});
  int to_int = c.AddCast(sum, DType::kI32);
  int to_bool = c.AddCast(b, DType::kBool);
  int half = c.AddOp(OpKind::kDiv, {i, c.AddConstant(2)});
  int wrap = c.AddOp(OpKind::kAdd, {i, c.AddConstant(1)});
  int pick = c.AddOp(OpKind::kWhere, {to_bool, i, c.AddConstant(-1.5)});
  c.outputs = {sum, to_int, to_bool, half, wrap, pick};
  auto out = Eval(c, {{10, 20}, {0.5, -1.75, 0}, {7, -7, 2147483647}});
  ASSERT_EQ(out.size(), 6u);
  ExpectSame(out[0], {10.5, 8.25, 10, 20.5, 18.25, 20});
  ExpectSame(out[1], {10, 8, 10, 20, 18, 20});
  ExpectSame(out[2], {1, 1, 0});
  ExpectSame(out[3], {3.5, -3.5, 1073741823.5});
  ExpectSame(out[4], {8, -6, -2147483648.0});
  ExpectSame(out[5], {7, -7, -1.5});
}

// An i64 cast to i32 keeps the low 32 bits (torch's .to(torch.int32)); to
// f32 it rounds.
TEST(EvaluateTest, I64CastsWrapToI32AndRoundToF32) {
  Chain c;
  int x = c.AddInput(TensorType{DType::kI64, {Dim::Static(3)}});
  c.outputs = {c.AddCast(x, DType::kI32), c.AddCast(x, DType::kF32)};
  const double big = 4294967296.0 + 5;  // 2^32 + 5.
  auto out = Eval(c, {{-100, big, 16777217}});
  ASSERT_EQ(out.size(), 2u);
  ExpectSame(out[0], {-100, 5, 16777217});
  ExpectSame(out[1], {-100, 4294967296.0, 16777216});
}

// i64 sums are exact past 2^53 and wrap at 64 bits; max and min keep i64.
TEST(EvaluateTest, I64SumsAreExactAndWrap) {
  Chain c;
  int x = c.AddInput(TensorType{DType::kI64, {Dim::Static(2), Dim::Static(4)}});
  int s = c.AddOp(OpKind::kReduceSum, {x});
  c.nodes[s].axes = {1};
  int m = c.AddOp(OpKind::kReduceMax, {x});
  c.nodes[m].axes = {1};
  c.outputs = {s, m};
  const double two62 = 4611686018427387904.0;     // 2^62: four of them are 2^64, which wraps to 0.
  const double two53 = 9007199254740992.0;        // 2^53 + 1 + 1 is exact in i64, not in doubles.
  auto out = Eval(c, {{two62, two62, two62, two62, two53, 1, 1, -7}});
  ASSERT_EQ(out.size(), 2u);
  ExpectSame(out[0], {0, two53 - 5});
  ExpectSame(out[1], {two62, two53});
}

TEST(EvaluateTest, Reductions) {
  Chain c;
  c.symbols = {{"N", 0, 0}};
  int x = c.AddInput(F32({Dim::Sym(0), Dim::Static(3)}));
  auto reduce = [&](OpKind k, std::vector<int64_t> axes, bool keepdim) {
    int r = c.AddOp(k, {x});
    c.nodes[r].axes = std::move(axes);
    c.nodes[r].keepdim = keepdim;
    return r;
  };
  c.outputs = {reduce(OpKind::kReduceSum, {1}, false), reduce(OpKind::kReduceMax, {0}, true),
               reduce(OpKind::kReduceMin, {-1}, false), reduce(OpKind::kReduceMean, {}, false)};
  auto out = Eval(c, {{1, 2, 3, 4, kNaN, 6}}, EvalMode::kExact64, {2});
  ASSERT_EQ(out.size(), 4u);
  ExpectSame(out[0], {6, kNaN});
  ExpectSame(out[1], {4, kNaN, 6});
  ExpectSame(out[2], {1, kNaN});
  ExpectSame(out[3], {kNaN});
  auto finite = Eval(c, {{1, 2, 3, 4, 5, 6}}, EvalMode::kEager, {2});
  ExpectSame(finite[3], {3.5});
}

TEST(EvaluateTest, LayoutAndMatmul) {
  Chain c;
  int x = c.AddInput(F32({Dim::Static(2), Dim::Static(3)}));
  int p = c.AddOp(OpKind::kPermute, {x});
  c.nodes[p].axes = {1, 0};
  int s = c.AddOp(OpKind::kSlice, {x});
  c.nodes[s].axis = 1;
  c.nodes[s].start = 0;
  c.nodes[s].stop = 3;
  c.nodes[s].step = 2;
  int cat = c.AddOp(OpKind::kConcat, {x, s});
  c.nodes[cat].axis = 1;
  int io = c.AddOp(OpKind::kIota, {});
  c.nodes[io].shape = {Dim::Static(2), Dim::Static(2)};
  c.nodes[io].axis = 1;
  c.nodes[io].dtype = DType::kI32;
  int mm = c.AddOp(OpKind::kMatmul, {x, p});
  int ex = c.AddOp(OpKind::kExpand, {c.AddOp(OpKind::kReshape, {s})});
  c.nodes[ex - 1].shape = {Dim::Static(1), Dim::Static(4)};
  c.nodes[ex].shape = {Dim::Static(2), Dim::Static(4)};
  c.outputs = {p, s, cat, io, mm, ex};
  auto out = Eval(c, {{1, 2, 3, 4, 5, 6}});
  ASSERT_EQ(out.size(), 6u);
  ExpectSame(out[0], {1, 4, 2, 5, 3, 6});
  ExpectSame(out[1], {1, 3, 4, 6});
  ExpectSame(out[2], {1, 2, 3, 1, 3, 4, 5, 6, 4, 6});
  ExpectSame(out[3], {0, 1, 0, 1});
  ExpectSame(out[4], {14, 32, 32, 77});
  ExpectSame(out[5], {1, 3, 4, 6, 1, 3, 4, 6});
}

TEST(EvaluateTest, RejectsBadArguments) {
  Chain c;
  c.symbols = {{"N", 0, 0}};
  int x = c.AddInput(F32({Dim::Sym(0)}));
  c.outputs = {c.AddOp(OpKind::kNeg, {x})};
  auto v = Validate(c);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(Evaluate(*v, {}, {2}, EvalMode::kExact64).ok());
  EXPECT_FALSE(Evaluate(*v, {{1, 2, 3}}, {2}, EvalMode::kExact64).ok());
  EXPECT_FALSE(Evaluate(*v, {{1, 2}}, {}, EvalMode::kExact64).ok());
  EXPECT_TRUE(Evaluate(*v, {{1, 2}}, {2}, EvalMode::kExact64).ok());
}

}  // namespace
}  // namespace kfuse
