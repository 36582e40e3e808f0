#include "codegen/validate.h"

#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/canonicalize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

TensorType T(DType t, std::vector<Dim> shape) { return TensorType{t, std::move(shape)}; }
std::vector<Dim> S(std::initializer_list<int64_t> dims) {
  std::vector<Dim> out;
  for (int64_t d : dims) out.push_back(Dim::Static(d));
  return out;
}

// An operand description for the promotion table: a tensor of a dtype and
// rank, or a weak constant.
struct Operand {
  DType dtype;
  int rank;  // 0: zero-dim tensor; -1: weak scalar with `value`.
  double value = 0;
};

int32_t Add(Chain& c, const Operand& o) {
  if (o.rank < 0) return c.AddConstant(o.value);
  std::vector<Dim> shape(o.rank, Dim::Static(4));
  return c.AddInput(T(o.dtype, shape));
}

TEST(ValidateTest, BinaryPromotionTable) {
  const Operand kWeakInt{DType::kInvalid, -1, 2}, kWeakFloat{DType::kInvalid, -1, 2.5};
  const Operand kWideInt{DType::kInvalid, -1, 2147483648.0};  // A Python int past i32.
  struct Case {
    OpKind op;
    Operand a, b;
    DType want;
  } cases[] = {
      {OpKind::kAdd, {DType::kF32, 1}, {DType::kI32, 1}, DType::kF32},
      {OpKind::kAdd, {DType::kBF16, 1}, {DType::kF16, 1}, DType::kF32},
      {OpKind::kAdd, {DType::kI32, 1}, {DType::kBool, 1}, DType::kI32},
      {OpKind::kAdd, {DType::kBool, 1}, {DType::kBool, 1}, DType::kBool},
      {OpKind::kMul, {DType::kBF16, 2}, kWeakInt, DType::kBF16},
      {OpKind::kMul, {DType::kBF16, 2}, kWeakFloat, DType::kBF16},
      {OpKind::kMul, {DType::kI32, 2}, kWeakFloat, DType::kF32},
      {OpKind::kMul, {DType::kI32, 2}, kWeakInt, DType::kI32},
      {OpKind::kAdd, {DType::kBool, 1}, kWeakInt, DType::kI32},
      {OpKind::kAdd, {DType::kF16, 1}, {DType::kF32, 0}, DType::kF16},
      {OpKind::kAdd, {DType::kI32, 1}, {DType::kF32, 0}, DType::kF32},
      {OpKind::kAdd, {DType::kF32, 0}, {DType::kBF16, 0}, DType::kF32},
      {OpKind::kDiv, {DType::kI32, 1}, {DType::kI32, 1}, DType::kF32},
      {OpKind::kDiv, {DType::kBF16, 1}, {DType::kBF16, 1}, DType::kBF16},
      {OpKind::kDiv, {DType::kI32, 1}, kWeakInt, DType::kF32},
      {OpKind::kPow, {DType::kI32, 1}, kWeakInt, DType::kI32},
      {OpKind::kPow, {DType::kF16, 1}, kWeakFloat, DType::kF16},
      {OpKind::kEq, {DType::kF32, 1}, {DType::kI32, 1}, DType::kBool},
      {OpKind::kLt, {DType::kBF16, 1}, kWeakFloat, DType::kBool},
      {OpKind::kLogicalAnd, {DType::kF32, 1}, {DType::kI32, 1}, DType::kBool},
      {OpKind::kMaximum, {DType::kF16, 1}, {DType::kBF16, 1}, DType::kF32},
      {OpKind::kAdd, kWeakInt, kWeakFloat, DType::kF32},
      {OpKind::kAdd, {DType::kBF16, 1}, kWideInt, DType::kBF16},
      {OpKind::kAdd, {DType::kF32, 1}, {DType::kInvalid, -1, 1e300}, DType::kF32},  // inf, as in PyTorch.
      {OpKind::kNe, {DType::kF32, 1}, kWideInt, DType::kBool},
      {OpKind::kDiv, {DType::kI32, 1}, kWideInt, DType::kF32},
      {OpKind::kMul, {DType::kI32, 1}, {DType::kF32, 0}, DType::kF32},
  };
  for (const Case& k : cases) {
    // Inputs must come first: tensors, then weak constants.
    Chain d;
    std::vector<int32_t> ids(2);
    const Operand* ops[2] = {&k.a, &k.b};
    for (int i = 0; i < 2; ++i) {
      if (ops[i]->rank >= 0) ids[i] = Add(d, *ops[i]);
    }
    for (int i = 0; i < 2; ++i) {
      if (ops[i]->rank < 0) ids[i] = Add(d, *ops[i]);
    }
    d.outputs.push_back(d.AddOp(k.op, {ids[0], ids[1]}));
    auto v = Validate(d);
    ASSERT_TRUE(v.ok()) << OpName(k.op) << ": " << v.status();
    EXPECT_EQ(v->nodes[d.outputs[0]].type.dtype, k.want)
        << OpName(k.op) << " " << DTypeName(k.a.dtype) << "/" << k.a.rank << " with "
        << DTypeName(k.b.dtype) << "/" << k.b.rank << ": got "
        << DTypeName(v->nodes[d.outputs[0]].type.dtype);
  }
}

TEST(ValidateTest, UnaryWhereCastAndConstantTypes) {
  struct Case {
    std::function<int32_t(Chain&)> build;
    DType want;
  } cases[] = {
      {[](Chain& c) { return c.AddOp(OpKind::kExp, {c.AddInput(T(DType::kI32, S({3})))}); },
       DType::kF32},
      {[](Chain& c) { return c.AddOp(OpKind::kSigmoid, {c.AddInput(T(DType::kBool, S({3})))}); },
       DType::kF32},
      {[](Chain& c) { return c.AddOp(OpKind::kAbs, {c.AddInput(T(DType::kI32, S({3})))}); },
       DType::kI32},
      {[](Chain& c) { return c.AddOp(OpKind::kGeluTanh, {c.AddInput(T(DType::kBF16, S({3})))}); },
       DType::kBF16},
      {[](Chain& c) { return c.AddOp(OpKind::kLogicalNot, {c.AddInput(T(DType::kF32, S({3})))}); },
       DType::kBool},
      {[](Chain& c) {
         int cond = c.AddInput(T(DType::kBool, S({3})));
         int a = c.AddInput(T(DType::kI32, S({3})));
         int b = c.AddInput(T(DType::kF16, S({3})));
         return c.AddOp(OpKind::kWhere, {cond, a, b});
       },
       DType::kF16},
      {[](Chain& c) {
         int cond = c.AddInput(T(DType::kBool, S({3})));
         return c.AddOp(OpKind::kWhere, {cond, c.AddConstant(1.5), c.AddConstant(0)});
       },
       DType::kF32},
      {[](Chain& c) { return c.AddCast(c.AddInput(T(DType::kF32, S({3}))), DType::kBF16); },
       DType::kBF16},
      {[](Chain& c) { return c.AddConstant(3, DType::kF16); }, DType::kF16},
      {[](Chain& c) { return c.AddConstant(0.1); }, DType::kF32},
      {[](Chain& c) { return c.AddConstant(-7); }, DType::kI32},
  };
  for (size_t i = 0; i < std::size(cases); ++i) {
    Chain c;
    int32_t out = cases[i].build(c);
    c.outputs.push_back(out);
    auto v = Validate(c);
    ASSERT_TRUE(v.ok()) << i << ": " << v.status();
    EXPECT_EQ(v->nodes[out].type.dtype, cases[i].want) << "case " << i;
  }
}

TEST(ValidateTest, WeakFloatConstantIsHeldInF32) {
  Chain c;
  c.outputs.push_back(c.AddConstant(0.1));
  auto v = Validate(c);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->nodes[0].value, static_cast<double>(0.1f));
  EXPECT_TRUE(IsWeakScalar(*v, 0));
}

TEST(ValidateTest, ComputeDType) {
  Chain c;
  int x = c.AddInput(T(DType::kBF16, S({4})));
  int i = c.AddInput(T(DType::kI32, S({4})));
  int lt = c.AddOp(OpKind::kLt, {i, c.AddConstant(2.5)});
  int dv = c.AddOp(OpKind::kDiv, {i, i});
  int ex = c.AddOp(OpKind::kExp, {i});
  int cast = c.AddCast(x, DType::kF32);
  c.outputs = {lt, dv, ex, cast};
  auto v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(ComputeDType(*v, lt), DType::kF32);
  EXPECT_EQ(ComputeDType(*v, dv), DType::kF32);
  EXPECT_EQ(ComputeDType(*v, ex), DType::kF32);
  EXPECT_EQ(ComputeDType(*v, cast), DType::kBF16);
}

TEST(ValidateTest, Broadcasting) {
  struct Case {
    std::vector<Dim> a, b, want;
  } cases[] = {
      {S({4, 1}), S({3}), S({4, 3})},
      {{Dim::Sym(0), Dim::Static(4)}, S({4}), {Dim::Sym(0), Dim::Static(4)}},
      {{Dim::Sym(0), Dim::Static(1)}, {Dim::Static(1), Dim::Sym(1)}, {Dim::Sym(0), Dim::Sym(1)}},
      {S({1}), {Dim::Sym(0)}, {Dim::Sym(0)}},
      {{Dim::Sym(0)}, {Dim::Sym(0)}, {Dim::Sym(0)}},
      {{}, S({2, 3}), S({2, 3})},
  };
  for (const Case& k : cases) {
    Chain c;
    c.symbols = {{"N", 0, 0}, {"M", 0, 0}};
    int a = c.AddInput(T(DType::kF32, k.a));
    int b = c.AddInput(T(DType::kF32, k.b));
    c.outputs.push_back(c.AddOp(OpKind::kAdd, {a, b}));
    auto v = Validate(c);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->nodes[2].type.shape, k.want);
  }
}

TEST(ValidateTest, LayoutReductionAndMatmulShapes) {
  Chain c;
  c.symbols = {{"B", 0, 0}};
  int x = c.AddInput(T(DType::kF32, {Dim::Sym(0), Dim::Static(6), Dim::Static(4)}));
  int w = c.AddInput(T(DType::kF32, S({4, 5})));
  int sum = c.AddOp(OpKind::kReduceSum, {x});
  c.nodes[sum].axes = {-1, 1};
  c.nodes[sum].keepdim = true;
  int perm = c.AddOp(OpKind::kPermute, {x});
  c.nodes[perm].axes = {2, 0, 1};
  int slice = c.AddOp(OpKind::kSlice, {x});
  c.nodes[slice].axis = 1;
  c.nodes[slice].start = -5;
  c.nodes[slice].stop = 100;
  c.nodes[slice].step = 2;
  int rs = c.AddOp(OpKind::kReshape, {x});
  c.nodes[rs].shape = {Dim::Sym(0), Dim::Static(24)};
  int mm = c.AddOp(OpKind::kMatmul, {x, w});
  int cat = c.AddOp(OpKind::kConcat, {x, x});
  c.nodes[cat].axis = -1;
  c.outputs = {sum, perm, slice, rs, mm, cat};
  auto v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->nodes[sum].axes, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(v->nodes[sum].type.shape,
            (std::vector<Dim>{Dim::Sym(0), Dim::Static(1), Dim::Static(1)}));
  EXPECT_EQ(v->nodes[perm].type.shape,
            (std::vector<Dim>{Dim::Static(4), Dim::Sym(0), Dim::Static(6)}));
  EXPECT_EQ(v->nodes[slice].start, 1);
  EXPECT_EQ(v->nodes[slice].stop, 6);
  EXPECT_EQ(v->nodes[slice].type.shape[1], Dim::Static(3));  // 1, 3, 5.
  EXPECT_EQ(v->nodes[mm].type.shape,
            (std::vector<Dim>{Dim::Sym(0), Dim::Static(6), Dim::Static(5)}));
  EXPECT_EQ(v->nodes[cat].type.shape[2], Dim::Static(8));
}

// Each bad chain, the code and a piece of the message.
TEST(ValidateTest, RejectsBadChains) {
  using Build = std::function<void(Chain&)>;
  auto in = [](Chain& c, DType t, std::vector<Dim> s) { return c.AddInput(T(t, std::move(s))); };
  struct Case {
    const char* name;
    Build build;
    absl::StatusCode code;
    const char* message;
  } cases[] = {
      {"empty", [](Chain&) {}, absl::StatusCode::kInvalidArgument, "ops, outputs: the chain is empty"},
      {"no outputs", [&](Chain& c) { c.AddOp(OpKind::kRelu, {in(c, DType::kF32, S({2}))}); },
       absl::StatusCode::kInvalidArgument, "outputs: the chain has none"},
      {"dangling output",
       [&](Chain& c) {
         in(c, DType::kF32, S({2}));
         c.outputs.push_back(7);
       },
       absl::StatusCode::kInvalidArgument, "outputs[0]: refers to no value (7)"},
      {"forward ref",
       [&](Chain& c) {
         int x = in(c, DType::kF32, S({2}));
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, 2}));
         c.AddOp(OpKind::kRelu, {x});
       },
       absl::StatusCode::kInvalidArgument, "op 0 (add): args[1]: forward reference"},
      {"dangling arg",
       [&](Chain& c) {
         int x = in(c, DType::kF32, S({2}));
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, -3}));
       },
       absl::StatusCode::kInvalidArgument, "op 0 (add): args[1]: refers to no value"},
      {"arity",
       [&](Chain& c) { c.outputs.push_back(c.AddOp(OpKind::kAdd, {in(c, DType::kF32, S({2}))})); },
       absl::StatusCode::kInvalidArgument, "op 0 (add): args: takes 2 operands, got 1"},
      {"unknown kind",
       [&](Chain& c) {
         c.outputs.push_back(c.AddOp(static_cast<OpKind>(999), {in(c, DType::kF32, S({2}))}));
       },
       absl::StatusCode::kInvalidArgument, "op 0 (kind 999): kind: unknown op kind 999"},
      {"where cond",
       [&](Chain& c) {
         int x = in(c, DType::kF32, S({2}));
         c.outputs.push_back(c.AddOp(OpKind::kWhere, {x, x, x}));
       },
       absl::StatusCode::kInvalidArgument, "args[0]: condition must be bool, got f32"},
      {"broadcast",
       [&](Chain& c) {
         int a = in(c, DType::kF32, S({4, 3}));
         int b = in(c, DType::kF32, S({5}));
         c.AddOp(OpKind::kRelu, {a});
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {a, b}));
       },
       absl::StatusCode::kInvalidArgument,
       "op 1 (add): args[1]: shapes [4,3] and [5] do not broadcast"},
      {"symbols do not broadcast",
       [&](Chain& c) {
         c.symbols = {{"N", 0, 0}, {"M", 0, 0}};
         int a = in(c, DType::kF32, {Dim::Sym(0)});
         int b = in(c, DType::kF32, {Dim::Sym(1)});
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {a, b}));
       },
       absl::StatusCode::kInvalidArgument, "shapes [\"N\"] and [\"M\"] do not broadcast"},
      {"symbol vs static",
       [&](Chain& c) {
         c.symbols = {{"N", 0, 0}};
         int a = in(c, DType::kF32, {Dim::Sym(0)});
         int b = in(c, DType::kF32, S({3}));
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {a, b}));
       },
       absl::StatusCode::kInvalidArgument, "do not broadcast"},
      {"zero size",
       [&](Chain& c) {
         c.input_names = {"x", "y", "z"};
         in(c, DType::kF32, S({2}));
         in(c, DType::kF32, S({2}));
         c.outputs.push_back(in(c, DType::kF32, S({2, 0})));
       },
       absl::StatusCode::kInvalidArgument, "inputs[2] (\"z\"): shape[1]: size must be positive"},
      {"rank 9",
       [&](Chain& c) {
         c.outputs.push_back(in(c, DType::kF32, std::vector<Dim>(9, Dim::Static(1))));
       },
       absl::StatusCode::kInvalidArgument, "rank 9 exceeds the limit of 8"},
      {"2^41 elements",
       [&](Chain& c) {
         c.outputs.push_back(in(c, DType::kF32, S({1 << 21, 1 << 20})));
       },
       absl::StatusCode::kInvalidArgument, "elements"},
      {"symbol max counts",
       [&](Chain& c) {
         c.symbols = {{"N", 0, int64_t{1} << 40}};
         c.outputs.push_back(in(c, DType::kF32, {Dim::Sym(0), Dim::Static(2)}));
       },
       absl::StatusCode::kInvalidArgument, "elements"},
      {"strides length",
       [&](Chain& c) {
         c.outputs.push_back(c.AddInput(T(DType::kF32, S({2, 2})), {1}));
       },
       absl::StatusCode::kInvalidArgument, "strides: has 1 entry for rank 2"},
      {"negative stride",
       [&](Chain& c) { c.outputs.push_back(c.AddInput(T(DType::kF32, S({2})), {-1})); },
       absl::StatusCode::kInvalidArgument, "strides[0]: must not be negative"},
      {"stride reaching past the element limit",
       [&](Chain& c) {
         c.outputs.push_back(c.AddInput(T(DType::kF32, S({4, 2})), {int64_t{1} << 62, 1}));
       },
       absl::StatusCode::kInvalidArgument, "strides[0]: reaches past"},
      {"stride spanning one element past the element limit",
       [&](Chain& c) {
         c.outputs.push_back(c.AddInput(T(DType::kF32, S({1, 2})), {8, int64_t{1} << 40}));
       },
       absl::StatusCode::kInvalidArgument, "strides[1]: reaches past"},
      {"stride over a symbol reaching past the element limit at its hint",
       [&](Chain& c) {
         c.symbols = {{"N", int64_t{1} << 20, 0}};
         c.outputs.push_back(c.AddInput(T(DType::kF32, {Dim::Sym(0)}), {int64_t{1} << 21}));
       },
       absl::StatusCode::kInvalidArgument, "strides[0]: reaches past"},
      {"i64 averaged",
       [&](Chain& c) {
         int r = c.AddOp(OpKind::kReduceMean, {in(c, DType::kI64, S({2}))});
         c.nodes[r].axes = {0};
         c.outputs.push_back(r);
       },
       absl::StatusCode::kInvalidArgument, "op 0 (reduce_mean): args[0]: reduce_mean needs a float operand, got i64"},
      {"an i64 constant past 2^53",
       [&](Chain& c) {
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {in(c, DType::kI64, S({2})), c.AddConstant(9007199254740994.0, DType::kI64)}));
       },
       absl::StatusCode::kInvalidArgument,
       "op 0 (constant): value: 9007199254740994 is past 2^53, beyond which an i64 constant is not sent exactly"},
      {"a whole number past 2^53 beside i64",
       [&](Chain& c) {
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {in(c, DType::kI64, S({2})), c.AddConstant(9007199254740994.0)}));
       },
       absl::StatusCode::kInvalidArgument,
       "op 1 (add): args[1]: 9007199254740994 is past 2^53, beyond which an integer scalar is not sent exactly"},
      {"f64 cast",
       [&](Chain& c) { c.outputs.push_back(c.AddCast(in(c, DType::kF32, S({2})), DType::kF64)); },
       absl::StatusCode::kUnimplemented, "op 0 (cast): dtype: dtype f64 not supported"},
      {"a whole number past i32 beside i32",
       [&](Chain& c) {
         int x = in(c, DType::kI32, S({2}));
         c.outputs.push_back(c.AddOp(OpKind::kNe, {x, c.AddConstant(2147483648.0)}));
       },
       absl::StatusCode::kInvalidArgument,
       "op 1 (ne): args[1]: 2147483648 is a whole number outside i32, so the op would compute in i32, which cannot "
       "hold it"},
      {"a whole number past i32 in an integer where",
       [&](Chain& c) {
         int cond = in(c, DType::kBool, S({2}));
         int x = in(c, DType::kI32, S({2}));
         c.outputs.push_back(c.AddOp(OpKind::kWhere, {cond, c.AddConstant(-1e12), x}));
       },
       absl::StatusCode::kInvalidArgument, "op 1 (where): args[1]: -1000000000000 is a whole number outside i32"},
      {"a whole number past i32 beside bool",
       [&](Chain& c) {
         int x = in(c, DType::kBool, S({2}));
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, c.AddConstant(-2147483649.0)}));
       },
       absl::StatusCode::kInvalidArgument,
       "args[1]: -2147483649 is a whole number outside i32, so the op would compute in i64 (an integer scalar alone, "
       "or beside bool"},
      // An integer function keeps it an integer (held in f32, it would have
      // made x + neg(2 ** 40) an f32 sum, x's low bits lost), refused where
      // the i32 tensor takes it, as torch refuses it; a float function is a
      // float, as in torch.
      {"an integer function of a whole number past i32",
       [&](Chain& c) {
         int x = in(c, DType::kI32, S({2}));
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, c.AddOp(OpKind::kNeg, {c.AddConstant(1099511627776.0)})}));
       },
       absl::StatusCode::kInvalidArgument,
       "op 2 (add): args[1]: -1099511627776 is a whole number outside i32, so the op would compute in i32, which "
       "cannot hold it"},
      // Past 2^53 doubles are not exact: (2**60 + 3) - (2**60 - 2**40) is
      // not taken for 2**40.
      {"weak arithmetic on whole numbers past 2^53",
       [&](Chain& c) {
         int x = in(c, DType::kI64, S({2}));
         int d = c.AddOp(OpKind::kSub, {c.AddConstant(1152921504606846979.0), c.AddConstant(1152920405095219200.0)});
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, d}));
       },
       absl::StatusCode::kInvalidArgument, "op 2 (sub): args[0]: 1.152921504606847e+18 is a whole number outside i32"},
      {"weak arithmetic on a whole number past i32 that comes back inside it",
       [&](Chain& c) {
         int x = in(c, DType::kF32, S({2}));
         int big = c.AddConstant(1099511627776.0);
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, c.AddOp(OpKind::kSub, {big, big})}));
       },
       absl::StatusCode::kInvalidArgument,
       "op 1 (sub): args[0]: 1099511627776 is a whole number outside i32, so the op would compute in i64"},
      // Python computes 2147483647 + 1 exactly; an op of weak integers
      // computes in i32 in the kernel, where it would wrap.
      {"weak integers whose sum passes i32",
       [&](Chain& c) {
         int x = in(c, DType::kF32, S({2}));
         int sum = c.AddOp(OpKind::kAdd, {c.AddConstant(2147483647), c.AddConstant(1)});
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, sum}));
       },
       absl::StatusCode::kInvalidArgument,
       "op 2 (add): args: its weak integers make 2147483648, outside i32, where this op computes"},
      {"weak integers whose product passes i32",
       [&](Chain& c) { c.outputs.push_back(c.AddOp(OpKind::kMul, {c.AddConstant(65536), c.AddConstant(65536)})); },
       absl::StatusCode::kInvalidArgument, "its weak integers make 4294967296, outside i32"},
      {"the negation of i32's least",
       [&](Chain& c) { c.outputs.push_back(c.AddOp(OpKind::kNeg, {c.AddConstant(-2147483648.0)})); },
       absl::StatusCode::kInvalidArgument, "its weak integers make 2147483648, outside i32"},
      {"a weak power past i32",
       [&](Chain& c) { c.outputs.push_back(c.AddOp(OpKind::kPow, {c.AddConstant(2), c.AddConstant(31)})); },
       absl::StatusCode::kInvalidArgument, "its weak integers make 2147483648, outside i32"},
      {"a comparison's 1 beside weak integers",
       [&](Chain& c) {
         int x = in(c, DType::kF32, S({2}));
         int one = c.AddOp(OpKind::kGt, {c.AddConstant(1), c.AddConstant(0)});
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, c.AddOp(OpKind::kAdd, {one, c.AddConstant(2147483647)})}));
       },
       absl::StatusCode::kInvalidArgument, "op 4 (add): args: its weak integers make 2147483648, outside i32"},
      {"a weak where's pick beside weak integers",
       [&](Chain& c) {
         int cond = c.AddOp(OpKind::kLogicalNot, {c.AddConstant(0)});
         int pick = c.AddOp(OpKind::kWhere, {cond, c.AddConstant(2147483647), c.AddConstant(0)});
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {pick, c.AddConstant(1)}));
       },
       absl::StatusCode::kInvalidArgument, "(add): args: its weak integers make 2147483648, outside i32"},
      // Folding makes 1/2 a weak 0.5, so the division is evaluated too, or
      // the canonical chain would be refused where the original was not.
      {"a weak quotient compared beside weak integers",
       [&](Chain& c) {
         int half = c.AddOp(OpKind::kDiv, {c.AddConstant(1), c.AddConstant(2)});
         int one = c.AddOp(OpKind::kGt, {half, c.AddConstant(0)});
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {one, c.AddConstant(2147483647)}));
       },
       absl::StatusCode::kInvalidArgument, "its weak integers make 2147483648, outside i32"},
      // Compared in f32, as the kernel compares: 16777217 == 16777216.5 holds.
      {"a weak comparison in f32",
       [&](Chain& c) {
         int eq = c.AddOp(OpKind::kEq, {c.AddConstant(16777217), c.AddConstant(16777216.5)});
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {eq, c.AddConstant(2147483647)}));
       },
       absl::StatusCode::kInvalidArgument, "its weak integers make 2147483648, outside i32"},
      {"a weak integer to a negative power",
       [&](Chain& c) {
         int x = in(c, DType::kF32, S({2}));
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, c.AddOp(OpKind::kPow, {c.AddConstant(2), c.AddConstant(-1)})}));
       },
       absl::StatusCode::kInvalidArgument,
       "op 2 (pow): args[1]: a weak integer to the power -1 is a float in Python"},
      // As torch.pow refuses an integer tensor to a negative Python int.
      {"an integer tensor to a negative power",
       [&](Chain& c) {
         c.outputs.push_back(c.AddOp(OpKind::kPow, {in(c, DType::kI32, S({2})), c.AddConstant(-1)}));
       },
       absl::StatusCode::kInvalidArgument, "op 1 (pow): args[1]: an integer to the power -1 is refused"},
      {"an integer tensor to weak arithmetic that makes a negative power",
       [&](Chain& c) {
         int x = in(c, DType::kI32, S({2}));
         int e = c.AddOp(OpKind::kSub, {c.AddConstant(1), c.AddConstant(3)});
         c.outputs.push_back(c.AddOp(OpKind::kPow, {x, e}));
       },
       absl::StatusCode::kInvalidArgument, "op 3 (pow): args[1]: an integer to the power -2 is refused"},
      {"a weak DAG that doubles 40 times (each node valued once)",
       [&](Chain& c) {
         int y = c.AddConstant(1);
         for (int i = 0; i < 40; ++i) y = c.AddOp(OpKind::kAdd, {y, y});
         c.outputs.push_back(y);
       },
       absl::StatusCode::kInvalidArgument, "op 31 (add): args: its weak integers make 2147483648, outside i32"},
      // PyTorch computes a bool beside a Python int in i64; the kernel in
      // i32, so a value the bools' 0 and 1 can push past i32 is refused.
      {"a bool tensor beside a weak integer that passes i32",
       [&](Chain& c) { c.outputs.push_back(c.AddOp(OpKind::kAdd, {in(c, DType::kBool, S({2})), c.AddConstant(2147483647)})); },
       absl::StatusCode::kInvalidArgument,
       "op 1 (add): args: can reach 2147483648 (bools taken as 0 and 1, Python ints as sent), outside i32, where this "
       "op computes; PyTorch computes it in i64"},
      {"a weak comparison of a float function beside a weak integer",
       [&](Chain& c) {
         int root = c.AddOp(OpKind::kSqrt, {c.AddConstant(4)});
         int gt = c.AddOp(OpKind::kGt, {root, c.AddConstant(1)});
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {gt, c.AddConstant(2147483647)}));
       },
       absl::StatusCode::kInvalidArgument, "op 5 (add): args: can reach 2147483648"},
      {"a product of bools and weak integers below i32",
       [&](Chain& c) {
         int b = in(c, DType::kBool, S({2}));
         int scaled = c.AddOp(OpKind::kMul, {c.AddOp(OpKind::kSub, {c.AddConstant(-1), b}), c.AddConstant(65536)});
         c.outputs.push_back(c.AddOp(OpKind::kMul, {scaled, c.AddConstant(32769)}));
       },
       absl::StatusCode::kInvalidArgument, "op 5 (mul): args: can reach -4295098368"},
      {"a where of weak integers beside one more",
       [&](Chain& c) {
         int pick = c.AddOp(OpKind::kWhere, {in(c, DType::kBool, S({2})), c.AddConstant(2147483647), c.AddConstant(0)});
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {pick, c.AddConstant(1)}));
       },
       absl::StatusCode::kInvalidArgument, "op 4 (add): args: can reach 2147483648"},
      {"a bool to a weak power",
       [&](Chain& c) {
         int base = c.AddOp(OpKind::kAdd, {in(c, DType::kBool, S({2})), c.AddConstant(1)});
         c.outputs.push_back(c.AddOp(OpKind::kPow, {base, c.AddConstant(31)}));
       },
       absl::StatusCode::kInvalidArgument, "op 3 (pow): args: can reach 2147483648"},
      {"a count of bools past i32",
       [&](Chain& c) {
         c.outputs.push_back(c.AddOp(OpKind::kReduceSum, {in(c, DType::kBool, S({65536, 32768}))}));
       },
       absl::StatusCode::kInvalidArgument, "op 0 (reduce_sum): args[0]: can reach 2147483648"},
      {"a count of bools beside a weak integer",
       [&](Chain& c) {
         int count = c.AddOp(OpKind::kReduceSum, {in(c, DType::kBool, S({4, 8}))});
         c.nodes[count].axes = {1};
         c.outputs.push_back(c.AddOp(OpKind::kAdd, {count, c.AddConstant(2147483640)}));
       },
       absl::StatusCode::kInvalidArgument, "op 2 (add): args: can reach 2147483648"},
      {"0.1 as i32", [&](Chain& c) { c.outputs.push_back(c.AddConstant(0.1, DType::kI32)); },
       absl::StatusCode::kInvalidArgument,
       "op 0 (constant): value: 0.1 is not exactly representable in i32"},
      {"70000 as f16", [&](Chain& c) { c.outputs.push_back(c.AddConstant(70000, DType::kF16)); },
       absl::StatusCode::kInvalidArgument, "not exactly representable in f16"},
      {"0.1 as f32", [&](Chain& c) { c.outputs.push_back(c.AddConstant(0.1, DType::kF32)); },
       absl::StatusCode::kInvalidArgument, "not exactly representable in f32"},
      // Every digit needed to tell it from a representable neighbour.
      {"2^24 + 1 as f32", [&](Chain& c) { c.outputs.push_back(c.AddConstant(16777217, DType::kF32)); },
       absl::StatusCode::kInvalidArgument, "value: 16777217 is not exactly representable in f32"},
      {"2 as bool", [&](Chain& c) { c.outputs.push_back(c.AddConstant(2, DType::kBool)); },
       absl::StatusCode::kInvalidArgument, "not exactly representable in bool"},
      {"unknown dtype",
       [&](Chain& c) { c.outputs.push_back(in(c, static_cast<DType>(42), S({2}))); },
       absl::StatusCode::kInvalidArgument, "unknown dtype 42"},
      {"sub of bools",
       [&](Chain& c) {
         int b = in(c, DType::kBool, S({2}));
         c.outputs.push_back(c.AddOp(OpKind::kSub, {b, b}));
       },
       absl::StatusCode::kInvalidArgument, "sub of bool is not supported"},
      {"reduce axis",
       [&](Chain& c) {
         int r = c.AddOp(OpKind::kReduceSum, {in(c, DType::kF32, S({2, 3}))});
         c.nodes[r].axes = {2};
         c.outputs.push_back(r);
       },
       absl::StatusCode::kInvalidArgument,
       "op 0 (reduce_sum): axes[0]: axis 2 out of range for rank 2"},
      {"reduce duplicate axis",
       [&](Chain& c) {
         int r = c.AddOp(OpKind::kReduceMax, {in(c, DType::kF32, S({2, 3}))});
         c.nodes[r].axes = {1, -1};
         c.outputs.push_back(r);
       },
       absl::StatusCode::kInvalidArgument, "axes[1]: axis 1 repeated"},
      {"reshape count",
       [&](Chain& c) {
         int r = c.AddOp(OpKind::kReshape, {in(c, DType::kF32, S({2, 3}))});
         c.nodes[r].shape = S({5});
         c.outputs.push_back(r);
       },
       absl::StatusCode::kInvalidArgument, "cannot reshape [2,3] to [5]"},
      {"reshape count past 2^127",  // Fuzz finding: the product overflowed.
       [&](Chain& c) {
         int r = c.AddOp(OpKind::kReshape, {in(c, DType::kF32, S({2, 3}))});
         c.nodes[r].shape = S({int64_t{1} << 62, int64_t{1} << 62, int64_t{1} << 62});
         c.outputs.push_back(r);
       },
       absl::StatusCode::kInvalidArgument, "element counts differ"},
      {"reshape to a rank past the limit",  // Refused before the counts are compared.
       [&](Chain& c) {
         int r = c.AddOp(OpKind::kReshape, {in(c, DType::kF32, S({16}))});
         c.nodes[r].shape = std::vector<Dim>(10000, Dim::Static(1));
         c.outputs.push_back(r);
       },
       absl::StatusCode::kInvalidArgument, "op 0 (reshape): shape: rank 10000 exceeds the limit of 8"},
      {"a shape of the largest rank is printed whole",
       [&](Chain& c) {
         int r = c.AddOp(OpKind::kReshape, {in(c, DType::kF32, S({2, 3}))});
         c.nodes[r].shape = S({1, 1, 1, 1, 1, 1, 1, 5});
         c.outputs.push_back(r);
       },
       absl::StatusCode::kInvalidArgument, "cannot reshape [2,3] to [1,1,1,1,1,1,1,5]"},
      {"permute",
       [&](Chain& c) {
         int r = c.AddOp(OpKind::kPermute, {in(c, DType::kF32, S({2, 3}))});
         c.nodes[r].axes = {0, 0};
         c.outputs.push_back(r);
       },
       absl::StatusCode::kInvalidArgument, "not a permutation"},
      {"expand",
       [&](Chain& c) {
         int r = c.AddOp(OpKind::kExpand, {in(c, DType::kF32, S({2, 3}))});
         c.nodes[r].shape = S({4, 3});
         c.outputs.push_back(r);
       },
       absl::StatusCode::kInvalidArgument, "cannot expand [2,3] to [4,3]"},
      {"slice step",
       [&](Chain& c) {
         int r = c.AddOp(OpKind::kSlice, {in(c, DType::kF32, S({4}))});
         c.nodes[r].step = 0;
         c.nodes[r].stop = 4;
         c.outputs.push_back(r);
       },
       absl::StatusCode::kInvalidArgument, "step: must be positive"},
      {"slice empty",
       [&](Chain& c) {
         int r = c.AddOp(OpKind::kSlice, {in(c, DType::kF32, S({4}))});
         c.nodes[r].start = 3;
         c.nodes[r].stop = 1;
         c.outputs.push_back(r);
       },
       absl::StatusCode::kInvalidArgument, "the slice is empty"},
      {"slice of a symbolic dim",  // A valid chain: not generated yet.
       [&](Chain& c) {
         c.symbols = {{"N", 0, 0}};
         int r = c.AddOp(OpKind::kSlice, {in(c, DType::kF32, {Dim::Sym(0)})});
         c.nodes[r].stop = 2;
         c.outputs.push_back(r);
       },
       absl::StatusCode::kUnimplemented, "op 0 (slice): axis: slicing a symbolic dim is not generated yet"},
      {"concat along a symbolic dim",
       [&](Chain& c) {
         c.symbols = {{"N", 0, 0}};
         int x = in(c, DType::kF32, {Dim::Sym(0)});
         int r = c.AddOp(OpKind::kConcat, {x, x});
         c.outputs.push_back(r);
       },
       absl::StatusCode::kUnimplemented, "args[0]: concatenating along a symbolic dim is not generated yet"},
      {"concat dims",
       [&](Chain& c) {
         int r = c.AddOp(OpKind::kConcat,
                         {in(c, DType::kF32, S({2, 3})), in(c, DType::kF32, S({3, 3}))});
         c.nodes[r].axis = 1;
         c.outputs.push_back(r);
       },
       absl::StatusCode::kInvalidArgument, "differs from [2,3] outside axis 1"},
      {"matmul inner",
       [&](Chain& c) {
         c.outputs.push_back(c.AddOp(
             OpKind::kMatmul, {in(c, DType::kBF16, S({2, 3})), in(c, DType::kBF16, S({4, 5}))}));
       },
       absl::StatusCode::kInvalidArgument, "inner dims differ"},
      {"matmul dtype",
       [&](Chain& c) {
         c.outputs.push_back(c.AddOp(
             OpKind::kMatmul, {in(c, DType::kBF16, S({2, 3})), in(c, DType::kF16, S({3, 5}))}));
       },
       absl::StatusCode::kInvalidArgument, "dtype f16 differs from bf16"},
      {"matmul int",
       [&](Chain& c) {
         c.outputs.push_back(c.AddOp(
             OpKind::kMatmul, {in(c, DType::kI32, S({2, 3})), in(c, DType::kI32, S({3, 5}))}));
       },
       absl::StatusCode::kInvalidArgument, "matmul needs f16, bf16 or f32"},
      {"input after op",
       [&](Chain& c) {
         c.AddConstant(1);
         c.outputs.push_back(in(c, DType::kF32, S({2})));
       },
       absl::StatusCode::kInvalidArgument, "inputs must be the first nodes"},
      {"hint over max",
       [&](Chain& c) {
         c.symbols = {{"N", 100, 10}};
         c.outputs.push_back(in(c, DType::kF32, {Dim::Sym(0)}));
       },
       absl::StatusCode::kInvalidArgument, "symbols[0] (\"N\"): hint 100 exceeds max 10"},
      {"client name escaped",
       [&](Chain& c) {
         c.input_names = {std::string("a\nb\"") + std::string(100, 'x')};
         c.outputs.push_back(in(c, DType::kF32, S({-1})));
       },
       absl::StatusCode::kInvalidArgument, "inputs[0] (\"a\\x0ab\\\"xxx"},
      {"bool iota",
       [&](Chain& c) {
         in(c, DType::kF32, S({4}));
         int i = c.AddOp(OpKind::kIota, {});
         c.nodes[i].shape = S({4});
         c.nodes[i].dtype = DType::kBool;
         c.outputs.push_back(i);
       },
       absl::StatusCode::kInvalidArgument, "op 0 (iota): dtype: an iota of bool"},
  };
  for (const Case& k : cases) {
    Chain c;
    k.build(c);
    auto v = Validate(c);
    ASSERT_FALSE(v.ok()) << k.name;
    EXPECT_EQ(v.status().code(), k.code) << k.name << ": " << v.status();
    EXPECT_THAT(std::string(v.status().message()), HasSubstr(k.message)) << k.name;
  }
}

// A typed exponent is a tensor's: an integer tensor to a negative one
// computes (torch gives 1 and -1 their powers and 0 elsewhere), unrefused,
// whether the exponent is a constant or typed arithmetic on one.
TEST(ValidateTest, AnIntegerToATypedNegativePowerComputes) {
  for (bool through_neg : {false, true}) {
    Chain c;
    int x = c.AddInput(T(DType::kI32, S({3})));
    int e = through_neg ? c.AddOp(OpKind::kNeg, {c.AddConstant(1, DType::kI32)}) : c.AddConstant(-1, DType::kI32);
    c.outputs.push_back(c.AddOp(OpKind::kPow, {x, e}));
    auto v = Validate(c);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->nodes[c.outputs[0]].type.dtype, DType::kI32);
  }
}

// i64 values (an input, a cast, a typed constant) compute element-wise as
// PyTorch types them: i64 beside integers, bools and Python ints, a float
// beside floats, a float for true division and float functions.
TEST(ValidateTest, I64ComputesAsPyTorchTypesIt) {
  Chain c;
  int x = c.AddInput(T(DType::kI64, S({8})));
  int i = c.AddInput(T(DType::kI32, S({8})));
  int b = c.AddInput(T(DType::kBool, S({8})));
  int h = c.AddInput(T(DType::kF16, S({8})));
  c.outputs = {c.AddCast(x, DType::kI32),
               c.AddCast(x, DType::kF32),
               c.AddOp(OpKind::kAdd, {x, i}),
               c.AddOp(OpKind::kMul, {b, x}),
               c.AddOp(OpKind::kSub, {x, c.AddConstant(7)}),
               c.AddOp(OpKind::kAdd, {x, h}),
               c.AddOp(OpKind::kDiv, {x, c.AddConstant(2)}),
               c.AddOp(OpKind::kExp, {x}),
               c.AddOp(OpKind::kMaximum, {c.AddCast(i, DType::kI64), c.AddConstant(-3, DType::kI64)}),
               c.AddOp(OpKind::kLt, {x, i}),
               c.AddOp(OpKind::kWhere, {b, x, c.AddConstant(0)})};
  auto v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  std::vector<DType> got;
  for (int32_t o : v->outputs) got.push_back(v->nodes[o].type.dtype);
  EXPECT_EQ(got, (std::vector<DType>{DType::kI32, DType::kF32, DType::kI64, DType::kI64, DType::kI64, DType::kF16,
                                     DType::kF32, DType::kF32, DType::kI64, DType::kBool, DType::kI64}));
}

// Reductions, views and iotas of i64 keep i64 (torch sums every integer
// into int64: its clients cast bools and i32 to i64 first, as a bool sum
// stays an i32 count).
TEST(ValidateTest, I64ReducesAndViewsAsI64) {
  Chain c;
  int x = c.AddInput(T(DType::kI64, S({4, 8})));
  int b = c.AddInput(T(DType::kBool, S({4, 8})));
  auto reduce = [&](OpKind k, int arg) {
    int r = c.AddOp(k, {arg});
    c.nodes[r].axes = {-1};
    return r;
  };
  int iota = c.AddOp(OpKind::kIota, {});
  c.nodes[iota].shape = S({4, 8});
  c.nodes[iota].axis = 1;
  c.nodes[iota].dtype = DType::kI64;
  int view = c.AddOp(OpKind::kReshape, {x});
  c.nodes[view].shape = S({32});
  c.outputs = {reduce(OpKind::kReduceSum, x), reduce(OpKind::kReduceMax, x), reduce(OpKind::kReduceMin, x),
               reduce(OpKind::kReduceSum, b), reduce(OpKind::kReduceSum, c.AddCast(b, DType::kI64)),
               reduce(OpKind::kReduceSum, iota), view};
  auto v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  std::vector<DType> got;
  for (int32_t o : v->outputs) got.push_back(v->nodes[o].type.dtype);
  EXPECT_EQ(got, (std::vector<DType>{DType::kI64, DType::kI64, DType::kI64, DType::kI32, DType::kI64, DType::kI64,
                                     DType::kI64}));
}

// A Python int outside i32 beside i64 is an i64 of its exact value (torch:
// pos + 2**40 is int64); beside a float it stays the f32 it rounds to.
TEST(ValidateTest, AWholeNumberPastI32BesideI64IsAnI64) {
  Chain c;
  int x = c.AddInput(T(DType::kI64, S({8})));
  int f = c.AddInput(T(DType::kF32, S({8})));
  int big = c.AddConstant(1099511627777.0);  // 2^40 + 1: not an f32.
  c.outputs = {c.AddOp(OpKind::kAdd, {f, big}), c.AddOp(OpKind::kAdd, {x, big}),
               c.AddOp(OpKind::kWhere, {c.AddOp(OpKind::kGt, {x, c.AddConstant(0)}), x, c.AddConstant(-4294967296.0)})};
  auto v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->nodes[v->outputs[0]].type.dtype, DType::kF32);
  EXPECT_EQ(v->nodes[v->outputs[1]].type.dtype, DType::kI64);
  EXPECT_EQ(v->nodes[v->outputs[2]].type.dtype, DType::kI64);
  EXPECT_EQ(v->nodes[big].type.dtype, DType::kI64);
  EXPECT_EQ(v->nodes[big].value, 1099511627777.0);
  // The canonical chain validates to the same types (the key's chain).
  auto again = Validate(Canonicalize(*v));
  ASSERT_TRUE(again.ok()) << again.status();
  std::vector<DType> types;
  for (int32_t o : again->outputs) types.push_back(again->nodes[o].type.dtype);
  EXPECT_EQ(types, (std::vector<DType>{DType::kF32, DType::kI64, DType::kI64}));
}

// Weak arithmetic on Python ints outside i32 (neg(2**40), 2**40 + 1): one
// exact integer, as Python computes it, which the tensor beside it takes as
// it would a constant of that value: rounded once to f32, exact in i64.
TEST(ValidateTest, WeakArithmeticOnAWholeNumberPastI32IsOneInteger) {
  Chain c;
  int f = c.AddInput(T(DType::kF32, S({8})));
  int x = c.AddInput(T(DType::kI64, S({8})));
  const double two40 = 1099511627776.0;
  int neg = c.AddOp(OpKind::kNeg, {c.AddConstant(two40)});
  int odd = c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kNeg, {neg}), c.AddConstant(1)});  // 2^40 + 1.
  int weak_float = c.AddConstant(2.0);
  c.nodes[weak_float].type.dtype = DType::kF32;  // As translate types weak_float.
  int half = c.AddOp(OpKind::kAdd, {c.AddConstant(two40), weak_float});
  c.outputs = {c.AddOp(OpKind::kAdd, {f, neg}), c.AddOp(OpKind::kAdd, {x, odd}), c.AddOp(OpKind::kAdd, {x, half})};
  auto v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->nodes[neg].kind, OpKind::kConstant);
  EXPECT_EQ(v->nodes[neg].type.dtype, DType::kF32);
  EXPECT_EQ(v->nodes[neg].value, -two40);
  EXPECT_EQ(v->nodes[odd].kind, OpKind::kConstant);
  EXPECT_EQ(v->nodes[odd].type.dtype, DType::kI64);
  EXPECT_EQ(v->nodes[odd].value, two40 + 1);  // Not f32's 2^40.
  EXPECT_EQ(v->nodes[v->outputs[0]].type.dtype, DType::kF32);
  EXPECT_EQ(v->nodes[v->outputs[1]].type.dtype, DType::kI64);
  // A Python float beside it (2**40 + 2.0) is a float: an f32 sum, as torch
  // gives an i64 tensor and a float.
  EXPECT_EQ(v->nodes[half].kind, OpKind::kAdd);
  EXPECT_EQ(v->nodes[v->outputs[2]].type.dtype, DType::kF32);
  // The canonical chain validates to the same types and values.
  auto again = Validate(Canonicalize(*v));
  ASSERT_TRUE(again.ok()) << again.status();
  std::vector<DType> types;
  for (int32_t o : again->outputs) types.push_back(again->nodes[o].type.dtype);
  EXPECT_EQ(types, (std::vector<DType>{DType::kF32, DType::kI64, DType::kF32}));
  std::vector<double> constants;
  for (const Node& n : again->nodes) {
    if (n.kind == OpKind::kConstant && std::fabs(n.value) > 2147483648.0) constants.push_back(n.value);
  }
  std::sort(constants.begin(), constants.end());
  EXPECT_EQ(constants, (std::vector<double>{-two40, two40, two40 + 1}));

  // Whatever the nodes' order (a review finding: an op an i64 sum had
  // retyped an operand of first computed in i64, else in f32): (2**40 + 1)
  // cast to f32 is the one constant, beside a sum with an i64 tensor or not.
  for (bool sum_first : {true, false}) {
    SCOPED_TRACE(sum_first);
    Chain d;
    int y = d.AddInput(T(DType::kI64, S({8})));
    int p = d.AddConstant(two40);
    int sum = sum_first ? d.AddOp(OpKind::kAdd, {y, p}) : -1;
    int q = d.AddOp(OpKind::kAdd, {p, d.AddConstant(1)});
    int cast = d.AddCast(q, DType::kF32);
    if (!sum_first) sum = d.AddOp(OpKind::kAdd, {y, p});
    d.outputs = {cast, sum};
    auto w = Validate(d);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->nodes[q].kind, OpKind::kConstant);
    EXPECT_EQ(w->nodes[q].type.dtype, DType::kF32);
    EXPECT_EQ(w->nodes[q].wide_whole, std::optional<double>(two40 + 1));
    auto canonical = Validate(Canonicalize(*w));
    ASSERT_TRUE(canonical.ok()) << canonical.status();
    const Node& operand = canonical->nodes[canonical->nodes[canonical->outputs[0]].args[0]];
    EXPECT_EQ(operand.kind, OpKind::kConstant);
    EXPECT_EQ(operand.value, two40);  // 2**40 + 1 held in f32.
  }
}

TEST(ValidateTest, Limits) {
  Limits limits;
  limits.max_ops = 3;
  limits.max_outputs = 1;
  Chain c;
  int x = c.AddInput(T(DType::kF32, S({2})));
  int y = x;
  for (int i = 0; i < 4; ++i) y = c.AddOp(OpKind::kNeg, {y});
  c.outputs = {y};
  EXPECT_THAT(std::string(Validate(c, limits).status().message()),
              HasSubstr("4 ops; the limit is 3"));
  limits.max_ops = 10;
  c.outputs = {y, y};
  EXPECT_THAT(std::string(Validate(c, limits).status().message()),
              HasSubstr("2 outputs; the limit is 1"));

  Chain cat;  // Two concats of 64 operands each: at the default limit; a third operand past it.
  int a = cat.AddInput(T(DType::kF32, S({4})));
  int first = cat.AddOp(OpKind::kConcat, std::vector<int32_t>(64, a));
  int second = cat.AddOp(OpKind::kConcat, std::vector<int32_t>(64, a));
  cat.outputs = {first, second};
  EXPECT_TRUE(Validate(cat).ok()) << Validate(cat).status();
  cat.nodes[second].args.push_back(a);
  EXPECT_THAT(std::string(Validate(cat).status().message()),
              HasSubstr("op 1 (concat): args: the chain's concats take 129 operands up to here; the limit is 128 in all"));
}

// A symbol only an op's shape names has no value at launch; hints are held
// to the element limit as static sizes are.
TEST(ValidateTest, SymbolsComeFromInputsAndTheirHintsStayInTheLimit) {
  {
    Chain c;
    c.symbols.push_back(SymbolInfo{"ghost", 64, 0});
    int x = c.AddInput(T(DType::kF32, S({1, 8})));
    int e = c.AddOp(OpKind::kExpand, {x});
    c.nodes[e].shape = {Dim::Sym(0), Dim::Static(8)};
    c.outputs = {e};
    auto v = Validate(c);
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(v.status().message()),
                HasSubstr("op 0 (expand): shape: symbol \"ghost\" is no dim of any input")) << v.status();
  }
  {
    Chain c;  // The same expand, its symbol a dim of another input: fine.
    c.symbols.push_back(SymbolInfo{"n", 64, 0});
    int x = c.AddInput(T(DType::kF32, S({1, 8})));
    c.AddInput(T(DType::kF32, {Dim::Sym(0)}));
    int e = c.AddOp(OpKind::kExpand, {x});
    c.nodes[e].shape = {Dim::Sym(0), Dim::Static(8)};
    c.outputs = {e};
    EXPECT_TRUE(Validate(c).ok()) << Validate(c).status();
  }
  {
    Chain c;
    for (int i = 0; i < 3; ++i) c.symbols.push_back(SymbolInfo{absl::StrCat("s", i), int64_t{1} << 20, 0});
    c.outputs = {c.AddOp(OpKind::kRelu, {c.AddInput(T(DType::kF32, {Dim::Sym(0), Dim::Sym(1), Dim::Sym(2)}))})};
    auto v = Validate(c);
    ASSERT_FALSE(v.ok());
    EXPECT_THAT(std::string(v.status().message()), HasSubstr("elements in [\"s0\",\"s1\",\"s2\"] at the symbols' hints"))
        << v.status();
    c.symbols[1].hint = 1024;  // 2^60 -> 2^39 elements.
    c.symbols[2].hint = 512;
    EXPECT_TRUE(Validate(c).ok()) << Validate(c).status();
    // A declared max counts too, and the message says which symbol's did.
    c.symbols[0].max = int64_t{1} << 30;  // s2 has none: it counts as 1.
    c.symbols[1].max = int64_t{1} << 20;
    v = Validate(c);
    ASSERT_FALSE(v.ok());
    EXPECT_THAT(std::string(v.status().message()),
                HasSubstr("elements in [\"s0\",\"s1\",\"s2\"] with \"s0\" at its max 1073741824, \"s1\" at its max 1048576"))
        << v.status();
  }
  {
    // A symbol without a hint is not counted here: it is tuned at 2^20, and
    // a tuning task past the GPU's free memory is skipped with its reason.
    // Its kernels index in 64 bits, as for any size not bounded.
    Chain c;
    c.symbols.push_back(SymbolInfo{"n", 0, 0});
    c.outputs = {c.AddOp(OpKind::kRelu, {c.AddInput(T(DType::kF32, {Dim::Sym(0), Dim::Static(int64_t{1} << 21)}))})};
    EXPECT_TRUE(Validate(c).ok()) << Validate(c).status();
  }
}

TEST(ValidateTest, LongNameIsTruncated) {
  Chain c;
  c.input_names = {std::string(200, 'q')};
  c.outputs.push_back(c.AddInput(T(DType::kF32, S({0}))));
  std::string m(Validate(c).status().message());
  EXPECT_THAT(m, HasSubstr(std::string(64, 'q') + "...\""));
  EXPECT_THAT(m, ::testing::Not(HasSubstr(std::string(65, 'q'))));
}

}  // namespace
}  // namespace kfuse

namespace kfuse {
namespace {

// A DAG of shared scalar subexpressions must not take exponential time
// (0 doubled: 1 doubled 500 times would pass i32, and be refused).
TEST(ValidateTest, DeepSharedScalarDagIsLinear) {
  Chain c;
  int x = c.AddInput(TensorType{DType::kF32, {Dim::Static(2)}});
  int t = c.AddConstant(0);
  for (int i = 0; i < 500; ++i) t = c.AddOp(OpKind::kAdd, {t, t});
  c.outputs = {c.AddOp(OpKind::kMul, {x, t})};
  auto v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(IsWeakScalar(*v, t));
  EXPECT_EQ(v->nodes[c.outputs[0]].type.dtype, DType::kF32);
}

}  // namespace
}  // namespace kfuse

namespace kfuse {
namespace {

// A step near INT64_MAX once overflowed the slice length (found by fuzzing).
TEST(ValidateRegressionTest, HugeSliceStepGivesOneElement) {
  Chain c;
  int x = c.AddInput(TensorType{DType::kF32, {Dim::Static(10)}});
  int s = c.AddOp(OpKind::kSlice, {x});
  c.nodes[s].axis = 0;
  c.nodes[s].start = 3;
  c.nodes[s].stop = 10;
  c.nodes[s].step = std::numeric_limits<int64_t>::max();
  c.outputs = {s};
  auto v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->nodes[s].type.shape, (std::vector<Dim>{Dim::Static(1)}));
}

}  // namespace
}  // namespace kfuse

namespace kfuse {
namespace {

// Weak integers that stay inside i32 are still folded as before, and a whole
// literal outside it beside a float tensor is still a float operand.
TEST(ValidateTest, WeakIntegersInsideI32AndWideLiteralsBesideFloatsStayValid) {
  for (const auto& [kind, a, b] : std::vector<std::tuple<OpKind, double, double>>{
           {OpKind::kAdd, 2147483646, 1}, {OpKind::kSub, -2147483647, 1}, {OpKind::kMul, 46340, 46340},
           {OpKind::kPow, 2, 30}, {OpKind::kMaximum, -2147483648.0, 7}}) {
    Chain c;
    int x = c.AddInput(TensorType{DType::kI32, {Dim::Static(2)}});
    c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, c.AddOp(kind, {c.AddConstant(a), c.AddConstant(b)})}));
    EXPECT_TRUE(Validate(c).ok()) << OpName(kind) << " " << Validate(c).status();
  }
  // Bools beside Python ints that stay inside i32, and values PyTorch holds
  // in i32 too (a typed constant, an i32 tensor, a cast), where it wraps as
  // the kernel does.
  for (int variant = 0; variant < 6; ++variant) {
    Chain c;
    c.symbols.push_back(SymbolInfo{"n", 64, 0});
    int b = c.AddInput(TensorType{DType::kBool, {Dim::Static(4), Dim::Sym(0)}});
    int x = c.AddInput(TensorType{DType::kI32, {Dim::Static(4), Dim::Sym(0)}});
    int bump = c.AddOp(OpKind::kAdd, {b, c.AddConstant(1)});
    switch (variant) {
      case 0: c.outputs.push_back(c.AddOp(OpKind::kAdd, {b, c.AddConstant(2147483646)})); break;
      case 1: c.outputs.push_back(c.AddOp(OpKind::kAdd, {b, c.AddConstant(2147483647, DType::kI32)})); break;
      case 2: c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, bump})); break;
      case 3: c.outputs.push_back(c.AddOp(OpKind::kAdd, {c.AddCast(bump, DType::kI32), c.AddConstant(2147483647)})); break;
      case 4: c.outputs.push_back(c.AddOp(OpKind::kPow, {bump, c.AddConstant(30)})); break;
      case 5:  // A runtime size without a bound: its count is not bounded.
        c.outputs.push_back(c.AddOp(OpKind::kAdd, {c.AddOp(OpKind::kReduceSum, {b}), c.AddConstant(2147483647)}));
        break;
    }
    EXPECT_TRUE(Validate(c).ok()) << variant << " " << Validate(c).status();
  }
  Chain c;
  int x = c.AddInput(TensorType{DType::kF32, {Dim::Static(2)}});
  c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, c.AddConstant(2147483648.0)}));
  // A float function of one is a float: exp(2 ** 40) overflows f32 to inf.
  c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, c.AddOp(OpKind::kExp, {c.AddConstant(1099511627776.0)})}));
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).status();
}

}  // namespace
}  // namespace kfuse
