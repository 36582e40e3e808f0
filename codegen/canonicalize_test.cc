#include "codegen/canonicalize.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "codegen/validate.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

// Builds, validates and canonicalises; returns the canonical chain.
Chain Canon(const std::function<void(Chain&)>& build) {
  Chain c;
  build(c);
  auto v = Validate(c);
  EXPECT_TRUE(v.ok()) << v.status();
  if (!v.ok()) return Chain{};
  return Canonicalize(*v);
}

std::string Hash(const std::function<void(Chain&)>& build) { return ChainHash(Canon(build)); }

// x: f32[N,64], b: f32[64].
void Inputs(Chain& c, const char* n = "N", DType t = DType::kF32, int64_t width = 64) {
  c.symbols = {{n, 0, 0}};
  c.input_names = {"x", "b"};
  c.output_names = {"y"};
  c.AddInput(TensorType{t, {Dim::Sym(0), Dim::Static(width)}});
  c.AddInput(TensorType{t, {Dim::Static(width)}});
}

// y = relu(x + b) * 2.
void Base(Chain& c) {
  Inputs(c);
  int s = c.AddOp(OpKind::kAdd, {0, 1});
  int r = c.AddOp(OpKind::kRelu, {s});
  c.outputs.push_back(c.AddOp(OpKind::kMul, {r, c.AddConstant(2)}));
}

TEST(CanonicalizeTest, EquivalentChainsHashAlike) {
  const std::string base = Hash(Base);
  EXPECT_EQ(base.size(), 64u);
  struct Case {
    const char* name;
    std::function<void(Chain&)> build;
  } cases[] = {
      {"dead ops",
       [](Chain& c) {
         Inputs(c);
         c.AddOp(OpKind::kExp, {0});
         int s = c.AddOp(OpKind::kAdd, {0, 1});
         int r = c.AddOp(OpKind::kRelu, {s});
         c.AddOp(OpKind::kLog, {r});
         c.outputs.push_back(c.AddOp(OpKind::kMul, {r, c.AddConstant(2)}));
       }},
      {"commutative order",
       [](Chain& c) {
         Inputs(c);
         int two = c.AddConstant(2);
         int s = c.AddOp(OpKind::kAdd, {1, 0});
         int r = c.AddOp(OpKind::kRelu, {s});
         c.outputs.push_back(c.AddOp(OpKind::kMul, {two, r}));
       }},
      {"names",
       [](Chain& c) {
         Inputs(c, "rows");
         c.input_names = {"activations", "bias"};
         c.output_names = {"out"};
         int s = c.AddOp(OpKind::kAdd, {0, 1});
         int r = c.AddOp(OpKind::kRelu, {s});
         c.outputs.push_back(c.AddOp(OpKind::kMul, {r, c.AddConstant(2)}));
       }},
      {"exact folding",
       [](Chain& c) {
         Inputs(c);
         int s = c.AddOp(OpKind::kAdd, {0, 1});
         int r = c.AddOp(OpKind::kRelu, {s});
         int k = c.AddOp(OpKind::kSub, {c.AddConstant(5), c.AddConstant(3)});
         c.outputs.push_back(c.AddOp(OpKind::kMul, {r, k}));
       }},
  };
  for (const Case& k : cases) EXPECT_EQ(Hash(k.build), base) << k.name;
}

TEST(CanonicalizeTest, DuplicatesAndIndependentOrderMerge) {
  auto once = [](Chain& c) {
    Inputs(c);
    int e = c.AddOp(OpKind::kExp, {0});
    int l = c.AddOp(OpKind::kLog, {1});
    int s = c.AddOp(OpKind::kAdd, {e, l});
    c.outputs.push_back(c.AddOp(OpKind::kMul, {s, s}));
  };
  auto twice = [](Chain& c) {
    Inputs(c);
    int l = c.AddOp(OpKind::kLog, {1});
    int e = c.AddOp(OpKind::kExp, {0});
    int s1 = c.AddOp(OpKind::kAdd, {e, l});
    int e2 = c.AddOp(OpKind::kExp, {0});
    int s2 = c.AddOp(OpKind::kAdd, {l, e2});
    c.outputs.push_back(c.AddOp(OpKind::kMul, {s2, s1}));
  };
  Chain a = Canon(once), b = Canon(twice);
  EXPECT_EQ(ToString(a), ToString(b));
  EXPECT_EQ(ChainHash(a), ChainHash(b));
  EXPECT_EQ(a.nodes.size(), 6u);  // 2 inputs, exp, log, add, mul.
}

TEST(CanonicalizeTest, DifferentChainsHashDifferently) {
  const std::string base = Hash(Base);
  struct Case {
    const char* name;
    std::function<void(Chain&)> build;
  } cases[] = {
      {"constant",
       [](Chain& c) {
         Inputs(c);
         int r = c.AddOp(OpKind::kRelu, {c.AddOp(OpKind::kAdd, {0, 1})});
         c.outputs.push_back(c.AddOp(OpKind::kMul, {r, c.AddConstant(3)}));
       }},
      {"float constant of the same value",
       [](Chain& c) {
         Inputs(c);
         int r = c.AddOp(OpKind::kRelu, {c.AddOp(OpKind::kAdd, {0, 1})});
         c.outputs.push_back(c.AddOp(OpKind::kMul, {r, c.AddConstant(2, DType::kF32)}));
       }},
      {"cast",
       [](Chain& c) {
         Inputs(c);
         int r = c.AddOp(OpKind::kRelu, {c.AddOp(OpKind::kAdd, {0, 1})});
         r = c.AddCast(c.AddCast(r, DType::kBF16), DType::kF32);
         c.outputs.push_back(c.AddOp(OpKind::kMul, {r, c.AddConstant(2)}));
       }},
      {"dtype",
       [](Chain& c) {
         Inputs(c, "N", DType::kBF16);
         int r = c.AddOp(OpKind::kRelu, {c.AddOp(OpKind::kAdd, {0, 1})});
         c.outputs.push_back(c.AddOp(OpKind::kMul, {r, c.AddConstant(2)}));
       }},
      {"shape",
       [](Chain& c) {
         Inputs(c, "N", DType::kF32, 32);
         int r = c.AddOp(OpKind::kRelu, {c.AddOp(OpKind::kAdd, {0, 1})});
         c.outputs.push_back(c.AddOp(OpKind::kMul, {r, c.AddConstant(2)}));
       }},
      {"operand order of sub",
       [](Chain& c) {
         Inputs(c);
         int r = c.AddOp(OpKind::kRelu, {c.AddOp(OpKind::kSub, {0, 1})});
         c.outputs.push_back(c.AddOp(OpKind::kMul, {r, c.AddConstant(2)}));
       }},
      {"strides",
       [](Chain& c) {
         Inputs(c);
         c.nodes[1].strides = {0};
         int r = c.AddOp(OpKind::kRelu, {c.AddOp(OpKind::kAdd, {0, 1})});
         c.outputs.push_back(c.AddOp(OpKind::kMul, {r, c.AddConstant(2)}));
       }},
      {"two outputs",
       [](Chain& c) {
         Base(c);
         c.outputs.push_back(c.outputs[0]);
       }},
  };
  for (const Case& k : cases) EXPECT_NE(Hash(k.build), base) << k.name;
}

TEST(CanonicalizeTest, SymbolIdentityCounts) {
  auto build = [](bool same) {
    return [same](Chain& c) {
      c.symbols = {{"N", 0, 0}, {"M", 0, 0}};
      int x = c.AddInput(TensorType{DType::kF32, {Dim::Sym(0)}});
      int y = c.AddInput(TensorType{DType::kF32, {Dim::Sym(same ? 0 : 1)}});
      c.outputs = {c.AddOp(OpKind::kNeg, {x}), c.AddOp(OpKind::kNeg, {y})};
    };
  };
  EXPECT_NE(Hash(build(true)), Hash(build(false)));
}

TEST(CanonicalizeTest, SymbolsRenumberedByFirstUse) {
  Chain c = Canon([](Chain& c) {
    c.symbols = {{"unused", 0, 0}, {"M", 0, 0}, {"N", 0, 0}};
    int x = c.AddInput(TensorType{DType::kF32, {Dim::Sym(2), Dim::Sym(1)}});
    c.outputs = {c.AddOp(OpKind::kNeg, {x})};
  });
  ASSERT_EQ(c.symbols.size(), 2u);
  EXPECT_EQ(c.symbols[0].name, "N");
  EXPECT_EQ(c.symbols[1].name, "M");
  EXPECT_EQ(c.nodes[0].type.shape, (std::vector<Dim>{Dim::Sym(0), Dim::Sym(1)}));
}

TEST(CanonicalizeTest, FoldsOnlyExactArithmetic) {
  Chain c = Canon([](Chain& c) {
    int x = c.AddInput(TensorType{DType::kF32, {Dim::Static(4)}});
    int six = c.AddOp(OpKind::kMul, {c.AddConstant(2, DType::kF32), c.AddConstant(3, DType::kF32)});
    int e = c.AddOp(OpKind::kExp, {c.AddConstant(1, DType::kF32)});
    int third =
        c.AddOp(OpKind::kDiv, {c.AddConstant(1, DType::kF32), c.AddConstant(3, DType::kF32)});
    int half =
        c.AddOp(OpKind::kDiv, {c.AddConstant(1, DType::kF32), c.AddConstant(2, DType::kF32)});
    int big =
        c.AddOp(OpKind::kMul, {c.AddConstant(65504, DType::kF16), c.AddConstant(2, DType::kF16)});
    int cast = c.AddCast(c.AddConstant(3, DType::kF32), DType::kBF16);
    c.outputs = {c.AddOp(OpKind::kMul, {x, six}), e, third, half, big, cast};
  });
  std::string s = ToString(c);
  EXPECT_NE(s.find("constant(6)"), std::string::npos) << s;
  EXPECT_NE(s.find("constant(0.5)"), std::string::npos) << s;
  EXPECT_NE(s.find("exp("), std::string::npos) << s;
  EXPECT_NE(s.find("div("), std::string::npos) << s;   // 1/3 is not exact.
  EXPECT_NE(s.find("mul(%"), std::string::npos) << s;  // 65504*2 overflows f16.
  EXPECT_NE(s.find("cast("), std::string::npos) << s;  // Casts are never folded.
}

// i64 constants fold where exact and within 2^53, past which a typed i64
// constant does not validate: such a product stays an op.
TEST(CanonicalizeTest, FoldsI64ConstantsWithin2To53) {
  Chain c = Canon([](Chain& c) {
    int x = c.AddInput(TensorType{DType::kI64, {Dim::Static(4)}});
    int small = c.AddOp(OpKind::kMul, {c.AddConstant(4096, DType::kI64), c.AddConstant(3, DType::kI64)});
    int past = c.AddOp(OpKind::kMul, {c.AddConstant(4503599627370496.0, DType::kI64), c.AddConstant(4, DType::kI64)});
    c.outputs = {c.AddOp(OpKind::kAdd, {x, small}), c.AddOp(OpKind::kAdd, {x, past})};
  });
  std::string s = ToString(c);
  EXPECT_NE(s.find("constant(12288)"), std::string::npos) << s;
  EXPECT_NE(s.find("mul(%"), std::string::npos) << s;  // 2^52 * 4 = 2^54.
  EXPECT_TRUE(Validate(c).ok()) << Validate(c).status();
}

TEST(CanonicalizeTest, OutputsKeepOrderAndMayRepeat) {
  Chain c = Canon([](Chain& c) {
    int x = c.AddInput(TensorType{DType::kF32, {Dim::Static(4)}});
    int a = c.AddOp(OpKind::kNeg, {x});
    int b = c.AddOp(OpKind::kAbs, {x});
    int a2 = c.AddOp(OpKind::kNeg, {x});
    c.outputs = {b, a, a2, x};
  });
  ASSERT_EQ(c.outputs.size(), 4u);
  EXPECT_EQ(c.outputs[1], c.outputs[2]);
  EXPECT_EQ(c.nodes[c.outputs[0]].kind, OpKind::kAbs);
  EXPECT_EQ(c.nodes[c.outputs[1]].kind, OpKind::kNeg);
  EXPECT_EQ(c.outputs[3], 0);
}

// A view op of `arg` to `shape` (kReshape or kExpand).
int View(Chain& c, OpKind kind, int arg, std::vector<Dim> shape) {
  int v = c.AddOp(kind, {arg});
  c.nodes[v].shape = std::move(shape);
  return v;
}

std::vector<Dim> Static(std::initializer_list<int64_t> sizes) {
  std::vector<Dim> out;
  for (int64_t s : sizes) out.push_back(Dim::Static(s));
  return out;
}

TEST(CanonicalizeTest, ViewsThatChangeNothingAreTheirOperands) {
  auto direct = [](Chain& c) {
    Inputs(c);
    c.outputs.push_back(c.AddOp(OpKind::kExp, {0}));
  };
  const std::string base = Hash(direct);
  EXPECT_EQ(Hash([](Chain& c) {
              Inputs(c);
              const std::vector<Dim> same = {Dim::Sym(0), Dim::Static(64)};
              int e = View(c, OpKind::kExpand, 0, same);
              c.outputs.push_back(c.AddOp(OpKind::kExp, {View(c, OpKind::kReshape, e, same)}));
            }),
            base);
  // Two reshapes back to where they started.
  EXPECT_EQ(Hash([](Chain& c) {
              Inputs(c);
              int r = View(c, OpKind::kReshape, 0, {Dim::Sym(0), Dim::Static(8), Dim::Static(8)});
              c.outputs.push_back(
                  c.AddOp(OpKind::kExp, {View(c, OpKind::kReshape, r, {Dim::Sym(0), Dim::Static(64)})}));
            }),
            base);
  // A reshape that changes the shape stays.
  EXPECT_NE(Hash([](Chain& c) {
              Inputs(c);
              int r = View(c, OpKind::kReshape, 0, {Dim::Sym(0), Dim::Static(8), Dim::Static(8)});
              c.outputs.push_back(c.AddOp(OpKind::kExp, {r}));
            }),
            base);
}

// q [1, 4, 16, 32] @ k^T [1, 4, 32, 16], as written and as ATen's bmm
// lowering has it: each operand reshaped to [4, ..], the product back.
void Batched(Chain& c, bool lowered, std::vector<Dim> k_batch = Static({1, 4})) {
  c.input_names = {"q", "k"};
  c.output_names = {"s"};
  int q = c.AddInput(TensorType{DType::kBF16, Static({1, 4, 16, 32})});
  std::vector<Dim> kshape = k_batch;
  kshape.insert(kshape.end(), {Dim::Static(16), Dim::Static(32)});
  int k = c.AddInput(TensorType{DType::kBF16, kshape});
  int kt = c.AddOp(OpKind::kPermute, {k});
  c.nodes[kt].axes = {0, 1, 3, 2};
  if (!lowered) {
    c.outputs.push_back(c.AddOp(OpKind::kMatmul, {q, kt}));
    return;
  }
  int a = View(c, OpKind::kReshape, View(c, OpKind::kExpand, q, Static({1, 4, 16, 32})), Static({4, 16, 32}));
  std::vector<Dim> bshape = k_batch;
  bshape.insert(bshape.end(), {Dim::Static(32), Dim::Static(16)});
  int b = View(c, OpKind::kReshape, View(c, OpKind::kExpand, kt, bshape), Static({4, 32, 16}));
  int mm = c.AddOp(OpKind::kMatmul, {a, b});
  c.outputs.push_back(View(c, OpKind::kReshape, mm, Static({1, 4, 16, 16})));
}

TEST(CanonicalizeTest, AProductOverMergedBatchDimsIsTheProductOverThem) {
  EXPECT_EQ(Hash([](Chain& c) { Batched(c, true); }), Hash([](Chain& c) { Batched(c, false); }));
  Chain lowered = Canon([](Chain& c) { Batched(c, true); });
  EXPECT_EQ(lowered.nodes[lowered.outputs[0]].kind, OpKind::kMatmul) << ToString(lowered);
  // Operands of other batch dims of as many elements ([1, 4] and [4, 1],
  // as repeated grouped-query heads [Hkv, G] beside [H]): the second
  // reshaped to the first's.
  Chain mixed = Canon([](Chain& c) { Batched(c, true, Static({4, 1})); });
  const Node& product = mixed.nodes[mixed.outputs[0]];
  ASSERT_EQ(product.kind, OpKind::kMatmul) << ToString(mixed);
  const Node& k = mixed.nodes[product.args[1]];
  EXPECT_EQ(k.kind, OpKind::kReshape) << ToString(mixed);
  EXPECT_EQ(k.type.shape, Static({1, 4, 32, 16}));
}

TEST(CanonicalizeTest, IsIdempotentAndStillValid) {
  Chain c = Canon([](Chain& c) {
    Base(c);
    c.AddOp(OpKind::kExp, {0});
  });
  auto v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  Chain again = Canonicalize(*v);
  EXPECT_EQ(ToString(again), ToString(c));
  EXPECT_EQ(ChainHash(again), ChainHash(c));
}

TEST(CanonicalizeTest, KeepsAllInputsEvenUnused) {
  Chain c = Canon([](Chain& c) {
    c.AddInput(TensorType{DType::kF32, {Dim::Static(4)}});
    int y = c.AddInput(TensorType{DType::kF32, {Dim::Static(4)}});
    c.outputs = {c.AddOp(OpKind::kNeg, {y})};
  });
  EXPECT_EQ(c.num_inputs(), 2);
  EXPECT_EQ(c.nodes[2].args, (std::vector<int32_t>{1}));
}

}  // namespace
}  // namespace kfuse

namespace kfuse {
namespace {

TEST(CanonicalizeTest, DeepSharedScalarDagFoldsWhole) {
  Chain c = Canon([](Chain& c) {
    int x = c.AddInput(TensorType{DType::kI32, {Dim::Static(2)}});
    int t = c.AddConstant(1);
    for (int i = 0; i < 30; ++i) t = c.AddOp(OpKind::kAdd, {t, t});
    c.outputs = {c.AddOp(OpKind::kMul, {x, t})};
  });
  // 2^30 folds to one constant (2^31 would pass i32, which validation
  // refuses: weak integers do not wrap).
  std::string s = ToString(c);
  EXPECT_NE(s.find("constant(1073741824 weak)"), std::string::npos) << s;
  EXPECT_EQ(c.nodes.size(), 3u);
}

}  // namespace
}  // namespace kfuse

namespace kfuse {
namespace {

// sqrt(4) of a weak constant is an f32 value; folding it to the weak
// constant 2 would re-validate as i32 (found by fuzzing).
TEST(CanonicalizeRegressionTest, FoldingKeepsWeakConstantsTypes) {
  Chain c;
  int x = c.AddInput(TensorType{DType::kI32, {Dim::Static(8)}});
  int four = c.AddConstant(4.0);
  int root = c.AddOp(OpKind::kSqrt, {four});
  c.outputs = {c.AddOp(OpKind::kMul, {x, root})};
  auto v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  Chain canon = Canonicalize(*v);
  auto again = Validate(canon);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ChainHash(Canonicalize(*again)), ChainHash(canon));
  EXPECT_EQ(again->nodes[again->outputs[0]].type.dtype, v->nodes[v->outputs[0]].type.dtype);
}

// The reductions of `c` in node order: kind, axes, keepdim, dtype.
std::vector<std::string> Reductions(const Chain& c) {
  std::vector<std::string> out;
  for (const Node& n : c.nodes) {
    if (n.kind == OpKind::kCast) out.push_back(absl::StrCat("cast ", std::string(DTypeName(n.dtype))));
    if (!IsReduction(n.kind)) continue;
    out.push_back(absl::StrCat(std::string(OpName(n.kind)), " [", absl::StrJoin(n.axes, ","), "]",
                               n.keepdim ? " keep " : " ", std::string(DTypeName(n.type.dtype)),
                               " rank ",
                               n.type.rank()));
  }
  return out;
}

// A reduction over the innermost axis and outer axes together is split into
// one along rows and one over the rest (mixed again without keepdim when the
// rest includes the next innermost axis, and split again); 16-bit sums and
// means go through f32 and are rounded once. The result keeps the client's
// type, validates unchanged, and names the client's op.
TEST(CanonicalizeTest, MixedReductionsSplitAlongRowsThenOverTheRest) {
  struct Case {
    OpKind kind;
    DType dtype;
    std::vector<int64_t> axes;
    bool keepdim;
    std::vector<std::string> want;
  } cases[] = {
      {OpKind::kReduceSum, DType::kBF16, {0, 1, 2}, false,
       {"cast f32", "reduce_sum [2] f32 rank 2", "reduce_sum [1] f32 rank 1",
        "reduce_sum [0] f32 rank 0", "cast bf16"}},
      {OpKind::kReduceMean, DType::kF16, {0, 1, 2}, true,
       {"cast f32", "reduce_mean [2] keep f32 rank 3", "reduce_mean [0,1] keep f32 rank 3",
        "cast f16"}},
      {OpKind::kReduceMax, DType::kBF16, {0, 2}, false,
       {"reduce_max [2] bf16 rank 2", "reduce_max [0] bf16 rank 1"}},
      {OpKind::kReduceSum, DType::kF32, {1, 2}, true,
       {"reduce_sum [2] keep f32 rank 3", "reduce_sum [1] keep f32 rank 3"}},
      {OpKind::kReduceSum, DType::kF32, {2}, false, {"reduce_sum [2] f32 rank 2"}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(absl::StrCat(std::string(OpName(k.kind)), " ", std::string(DTypeName(k.dtype)), " ",
                              absl::StrJoin(k.axes, ","), k.keepdim ? " keep" : ""));
    Chain raw;
    raw.symbols = {{"S", 0, 0}};
    int x = raw.AddInput(TensorType{k.dtype, {Dim::Static(4), Dim::Sym(0), Dim::Static(64)}});
    int r = raw.AddOp(k.kind, {raw.AddOp(OpKind::kAbs, {x})});
    raw.nodes[r].axes = k.axes;
    raw.nodes[r].keepdim = k.keepdim;
    raw.nodes[r].wire_index = 1;
    raw.outputs = {r};
    auto v = Validate(raw);
    ASSERT_TRUE(v.ok()) << v.status();
    Chain c = Canonicalize(*v);
    EXPECT_EQ(Reductions(c), k.want);
    EXPECT_EQ(c.nodes[c.outputs[0]].type, v->nodes[v->outputs[0]].type);
    for (const Node& n : c.nodes) {
      if (IsReduction(n.kind) || n.kind == OpKind::kCast) {
        EXPECT_EQ(n.wire_index, 1);
      }
    }
    auto again = Validate(c);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(ChainHash(Canonicalize(*again)), ChainHash(c));
  }
}

// A weak float stays a float through the split: i32 max * 2.0 is f32, as
// the unsplit product (and torch) has it, and a whole weak float past i32
// is no integer outside i32 to refuse.
TEST(CanonicalizeTest, AWeakFloatBesideASplitReductionStaysAFloat) {
  for (double value : {2.0, 1e30}) {
    SCOPED_TRACE(value);
    Chain raw;
    int x = raw.AddInput(TensorType{DType::kI32, {Dim::Static(4), Dim::Static(8)}});
    int r = raw.AddOp(OpKind::kReduceMax, {x});
    raw.nodes[r].axes = {0, 1};
    int k = raw.AddConstant(value);
    raw.nodes[k].type.dtype = DType::kF32;  // As a weak_float constant is translated.
    raw.outputs = {raw.AddOp(OpKind::kMul, {r, raw.AddOp(OpKind::kSquare, {k})})};
    auto v = Validate(raw);
    ASSERT_TRUE(v.ok()) << v.status();
    ASSERT_EQ(v->nodes[v->outputs[0]].type.dtype, DType::kF32);
    Chain c = Canonicalize(*v);
    EXPECT_EQ(Reductions(c), (std::vector<std::string>{"reduce_max [1] i32 rank 1", "reduce_max [0] i32 rank 0"}));
    EXPECT_EQ(c.nodes[c.outputs[0]].type.dtype, DType::kF32);
  }
}

// Finding 11 (tests/fuzz/regressions/canonical_symbol_order.txtpb): the
// order of commutative operands must not depend on how symbols are
// numbered, which Canonicalize changes (by first use), nor on client names.
// Here the symbols' list order is "a" first or "b" first (each a dim of an
// input, as every symbol must be, and named by an expand); across widths,
// some operand order would flip if the order depended on their numbers.
TEST(CanonicalizeRegressionTest, SymbolNumbersDoNotOrderCommutativeOperands) {
  for (int64_t width = 2; width < 34; ++width) {
    SCOPED_TRACE(width);
    auto build = [&](bool a_first, const std::string& a_name = "a",
                     const std::string& b_name = "b") {
      return [=](Chain& c) {
        c.symbols = {{a_first ? a_name : b_name, 0, 0}, {a_first ? b_name : a_name, 0, 0}};
        const Dim a = Dim::Sym(a_first ? 0 : 1), b = Dim::Sym(a_first ? 1 : 0);
        int x = c.AddInput(TensorType{DType::kF32, {}});
        c.AddInput(TensorType{DType::kF32, {a}});
        c.AddInput(TensorType{DType::kF32, {b}});
        int dead = c.AddOp(OpKind::kExpand, {x});
        c.nodes[dead].shape = {a, Dim::Static(width)};
        int e = c.AddOp(OpKind::kExpand, {x});
        c.nodes[e].shape = {b, Dim::Static(width)};
        int sq = c.AddOp(OpKind::kMul, {x, x});
        c.outputs.push_back(c.AddOp(OpKind::kAdd, {sq, e}));
      };
    };
    const Chain once = Canon(build(true));
    auto again = Validate(once);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(ToString(Canonicalize(*again)), ToString(once));
    EXPECT_EQ(ChainHash(once), Hash(build(false)));
    EXPECT_EQ(ChainHash(once), Hash(build(true, "zz", "q")));  // Names are not the key.
  }
}

// Finding 14 (tests/fuzz/regressions/mixed_reduction_split_after_dead_ops
// .txtpb): a reduction over every axis beside a dead mean of a scalar
// constant was left whole by the first canonicalization (its split did not
// validate beside the dead op) and split by the second, once the dead op
// was gone: canonicalizing twice changed the chain and its hash.
TEST(CanonicalizeRegressionTest, ASplitThatValidatesOnceDeadOpsAreGoneIsMadeTheFirstTime) {
  Chain c;
  const int x = c.AddInput(TensorType{DType::kF32, {Dim::Static(16), Dim::Static(5), Dim::Static(7)}});
  const int k = c.AddConstant(2.1548532870588486e-308);
  const int sum = c.AddOp(OpKind::kReduceSum, {x});
  c.nodes[sum].axes = {0, 1, 2};
  const int dead = c.AddOp(OpKind::kReduceMean, {k});
  (void)dead;
  c.outputs = {c.AddOp(OpKind::kNe, {sum, sum}), c.AddOp(OpKind::kRsqrt, {x})};
  for (size_t i = 0, w = 0; i < c.nodes.size(); ++i) {
    if (c.nodes[i].kind != OpKind::kInput) c.nodes[i].wire_index = static_cast<int32_t>(w++);
  }
  absl::StatusOr<Chain> v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  const Chain once = Canonicalize(*v);
  absl::StatusOr<Chain> again = Validate(once);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(ToString(Canonicalize(*again)), ToString(once));
  for (const Node& n : once.nodes) {
    if (n.kind != OpKind::kReduceSum) continue;
    EXPECT_EQ(n.axes.size(), 1u) << ToString(once);
  }
}

}  // namespace
}  // namespace kfuse
