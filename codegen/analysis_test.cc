#include "codegen/analysis.h"

#include "codegen/validate.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

TEST(AnalysisTest, WorkOfASmallChain) {
  // y = exp(x + b) / 2 with x: bf16[N,64], b: f32[64]; N = 128.
  Chain c;
  c.symbols = {{"N", 0, 0}};
  int x = c.AddInput(TensorType{DType::kBF16, {Dim::Sym(0), Dim::Static(64)}});
  int b = c.AddInput(TensorType{DType::kF32, {Dim::Static(64)}});
  int s = c.AddOp(OpKind::kAdd, {x, b});
  int e = c.AddOp(OpKind::kExp, {s});
  int y = c.AddOp(OpKind::kDiv, {e, c.AddConstant(2)});
  c.outputs = {y, y};
  auto v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  Work w = AnalyzeWork(*v, {}, {128});
  const double n = 128 * 64;
  // Reads x (2 bytes) and b (4 bytes) once; writes the f32 output twice.
  EXPECT_DOUBLE_EQ(w.bytes, n * 2 + 64 * 4 + 2 * n * 4);
  // add 1 fma; exp 2 fma + 1 special; div 1 fma + 1 special.
  EXPECT_DOUBLE_EQ(w.flops.fma, 4 * n);
  EXPECT_DOUBLE_EQ(w.flops.special, 2 * n);
  EXPECT_DOUBLE_EQ(w.flops.tensor, 0);

  // The same for the kernel of nodes {s, e, y}.
  Work k = AnalyzeWork(*v, {s, e, y}, {128});
  EXPECT_DOUBLE_EQ(k.bytes, w.bytes);
  EXPECT_DOUBLE_EQ(k.flops.fma, w.flops.fma);
}

TEST(AnalysisTest, MatmulAndReductionFlops) {
  Chain c;
  int a = c.AddInput(TensorType{DType::kBF16, {Dim::Static(8), Dim::Static(32)}});
  int b = c.AddInput(TensorType{DType::kBF16, {Dim::Static(32), Dim::Static(16)}});
  int m = c.AddOp(OpKind::kMatmul, {a, b});
  int r = c.AddOp(OpKind::kReduceMean, {m});
  c.nodes[r].axes = {1};
  c.outputs = {r};
  auto v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  Work w = AnalyzeWork(*v, {}, {});
  EXPECT_DOUBLE_EQ(w.flops.tensor, 2.0 * 8 * 16 * 32);
  EXPECT_DOUBLE_EQ(w.flops.fma, 8 * 16 + 8);
  EXPECT_DOUBLE_EQ(w.bytes, (8 * 32 + 32 * 16 + 8) * 2.0);
}

TEST(AnalysisTest, InputDomains) {
  // log(a * b) + sqrt(exp(c)) / (d - e) + f
  Chain ch;
  int in[6];
  for (int& i : in) i = ch.AddInput(TensorType{DType::kF32, {Dim::Static(4)}});
  int l = ch.AddOp(OpKind::kLog, {ch.AddOp(OpKind::kMul, {in[0], in[1]})});
  int q = ch.AddOp(OpKind::kSqrt, {ch.AddOp(OpKind::kExp, {in[2]})});
  int d = ch.AddOp(OpKind::kDiv, {q, ch.AddOp(OpKind::kSub, {in[3], in[4]})});
  ch.outputs = {ch.AddOp(OpKind::kAdd, {ch.AddOp(OpKind::kAdd, {l, d}), in[5]})};
  auto v = Validate(ch);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(InputDomains(*v),
            (std::vector<Domain>{Domain::kPositive, Domain::kPositive, Domain::kAny,
                                 Domain::kPositive, Domain::kAny, Domain::kAny}));
}

// A cross-entropy's labels: cast and reshaped, compared with an iota over
// the classes and with an ignore_index. The labels and every node on their
// way are drawn as classes (the class count at the symbol's tuning value);
// a float input compared with the iota, or an integer never compared, is not.
TEST(AnalysisTest, ClassLabelsAreDrawnAsIndices) {
  Chain ch;
  ch.symbols = {{"classes", 1000, 0}};
  const int logits = ch.AddInput(TensorType{DType::kF32, {Dim::Static(4), Dim::Sym(0)}});
  const int labels = ch.AddInput(TensorType{DType::kI64, {Dim::Static(4)}});
  const int other = ch.AddInput(TensorType{DType::kI32, {Dim::Static(4)}});
  const int classes = ch.AddOp(OpKind::kIota, {});
  ch.nodes[classes].shape = {Dim::Static(1), Dim::Sym(0)};
  ch.nodes[classes].axis = 1;
  ch.nodes[classes].dtype = DType::kI32;
  const int l32 = ch.AddCast(labels, DType::kI32);
  const int column = ch.AddOp(OpKind::kReshape, {l32});
  ch.nodes[column].shape = {Dim::Static(4), Dim::Static(1)};
  const int hit = ch.AddOp(OpKind::kEq, {classes, column});
  const int picked = ch.AddOp(OpKind::kWhere, {hit, logits, ch.AddConstant(0.0)});
  const int kept = ch.AddOp(OpKind::kNe, {l32, ch.AddConstant(-100.0)});
  ch.outputs = {picked, kept, ch.AddOp(OpKind::kAdd, {other, other})};
  auto v = Validate(ch);
  ASSERT_TRUE(v.ok()) << v.status();
  const std::vector<IndexDomain> d = NodeIndexDomains(*v, {1024});
  const IndexDomain label{1024, -100};
  EXPECT_EQ(d[labels], label);
  EXPECT_EQ(d[l32], label);
  EXPECT_EQ(d[column], label);
  EXPECT_EQ(d[other].extent, 0);
  EXPECT_EQ(d[logits].extent, 0);
  EXPECT_EQ(d[classes].extent, 0);

  // A constant no i32 label can equal (an f32 one, past i32) is not drawn.
  ch.nodes[ch.nodes[kept].args[1]].value = 3e9;
  ch.nodes[ch.nodes[kept].args[1]].dtype = DType::kF32;
  auto huge = Validate(ch);
  ASSERT_TRUE(huge.ok()) << huge.status();
  EXPECT_EQ(NodeIndexDomains(*huge, {1024})[labels], (IndexDomain{1024, -1}));
}

TEST(AnalysisTest, SymbolValuesForTuning) {
  Chain c;
  c.symbols = {{"a", 1000, 0}, {"b", 0, 0}, {"c", 3000, 2048 * 2}, {"d", 0, 500}, {"e", 1024, 0}};
  EXPECT_EQ(SymbolValuesForTuning(c), (std::vector<int64_t>{1024, 1 << 20, 4096, 500, 1024}));
}

// A tensor the symbols' defaults would take past the element limit (a
// tuning task that large cannot run; a fuzzer finding): its largest symbol
// is halved until it fits, and symbols elsewhere keep their buckets.
TEST(AnalysisTest, SymbolValuesForTuningKeepEveryTensorWithinTheElementLimit) {
  Chain c;
  c.symbols = {{"n", 0, 0}, {"m", 3000, 0}, {"k", 0, 0}, {"r", 100, 0}};
  const Dim n = Dim::Sym(0), m = Dim::Sym(1), k = Dim::Sym(2), r = Dim::Sym(3);
  // Within the limit at the hints (n and k count 1), past it at 2^20.
  c.AddInput(TensorType{DType::kF16, {Dim::Static(320'000'000), n}});
  c.AddInput(TensorType{DType::kF16, {m, Dim::Static(int64_t{1} << 28), k}});
  c.AddInput(TensorType{DType::kF16, {r, Dim::Static(4096)}});
  std::vector<int64_t> v = SymbolValuesForTuning(c);
  // n: 2^20 halved to 2048 (320M x 2048 < 2^40); k, without a hint, down
  // to 1 before m leaves its bucket; r keeps its bucket.
  EXPECT_EQ(v, (std::vector<int64_t>{2048, 4096, 1, 128}));
  // Two hinted symbols rounded up past the limit together: the larger is
  // halved, below its hint.
  Chain h;
  h.symbols = {{"a", 600'000, 0}, {"b", 1'500'000, 0}};
  h.AddInput(TensorType{DType::kF16, {Dim::Sym(0), Dim::Sym(1)}});  // 9e11 at the hints.
  EXPECT_EQ(SymbolValuesForTuning(h), (std::vector<int64_t>{1 << 20, 1 << 20}));
  for (const Node& node : c.nodes) {
    double elements = 1;
    for (const Dim& d : node.type.shape) elements *= d.is_static() ? d.size : v[d.symbol];
    EXPECT_LE(elements, std::ldexp(1.0, 40));
  }
}

// A strided input's buffer spans its gaps, so the span is held to the limit
// too (a fuzzer finding: a stride over a symbol without a max or a hint,
// which validation counts at 1): only symbols its strides step over are
// halved.
TEST(AnalysisTest, SymbolValuesForTuningKeepAStridedInputsSpanWithinTheElementLimit) {
  Chain c;
  c.symbols = {{"n", 0, 0}, {"m", 0, 0}};
  const int32_t in = c.AddInput(TensorType{DType::kF32, {Dim::Sym(0), Dim::Sym(1)}}, {int64_t{1} << 30, 0});
  const std::vector<int64_t> v = SymbolValuesForTuning(c);
  EXPECT_EQ(v, (std::vector<int64_t>{1024, 1 << 20}));  // 1023 * 2^30 + 1 elements.
  EXPECT_LE(BufferElements(c.nodes[in], v), std::ldexp(1.0, 40));
}

TEST(AnalysisTest, SymbolValuesForCheckAreOddAndFewBesideTheBucket) {
  using Sizes = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(SymbolValuesForCheck({1024, 1 << 20, 500, 8, 5, 1}),
            (Sizes{{769, 786433, 375, 7, 4, 1}, {3, 3, 3, 3, 3, 1}}));
  // Nothing to check beside the bucket: no symbols, or every one at 1.
  EXPECT_TRUE(SymbolValuesForCheck({}).empty());
  EXPECT_TRUE(SymbolValuesForCheck({1, 1}).empty());
  // A bucket of 2 or 3: the odd size is the few rows; 2 -> 1 once.
  EXPECT_EQ(SymbolValuesForCheck({2}), (Sizes{{1}}));
  EXPECT_EQ(SymbolValuesForCheck({3}), (Sizes{{2}}));
  EXPECT_EQ(SymbolValuesForCheck({4}), (Sizes{{3}}));
}

}  // namespace
}  // namespace kfuse
