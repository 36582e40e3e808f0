// Layout views in pointwise kernels: the CPU evaluator against hand-computed
// values, the kernel's index program (every read's strides, offset and
// guard, every concat choice) run on the CPU against the evaluator, the
// variant rules views impose, the emitted source, and what is refused.
#include "codegen/pointwise_layout.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codegen/evaluate.h"
#include "codegen/partition.h"
#include "codegen/pointwise.h"
#include "codegen/pointwise_views_test_chains.h"
#include "codegen/pointwise_views_test_util.h"
#include "codegen/validate.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using views_test::RunOnCpu;
using views_test::S;

Variant V(int vec, int items = 1, int block = 256, int64_t grid = 0) {
  return Variant{Family::kPointwise,
                 {{"vec", vec}, {"items", items}, {"block", block}, {"grid", grid}}};
}

KernelGroup OnlyGroup(const Chain& c) {
  absl::StatusOr<Partition> p = PartitionChain(c);
  if (!p.ok()) std::fprintf(stderr, "%s\n%s\n", p.status().ToString().c_str(), ToString(c).c_str());
  KFUSE_CHECK(p.ok() && p->kernels.size() == 1);
  return p->kernels[0];
}

std::vector<std::vector<double>> RandomInputs(const Chain& c, const std::vector<int64_t>& syms,
                                              unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-4, 4);
  std::vector<std::vector<double>> in(c.num_inputs());
  for (const Node& n : c.nodes) {
    if (n.kind != OpKind::kInput) continue;
    int64_t count = 1;
    for (const Dim& d : n.type.shape) count *= d.is_static() ? d.size : syms[d.symbol];
    for (int64_t i = 0; i < count; ++i) in[n.input_index].push_back(RoundTo(n.type.dtype, u(rng)));
  }
  return in;
}

bool Same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// The index program of `c` on the CPU equals the evaluator bit for bit.
void ExpectProgramMatchesEvaluator(const std::string& name, const Chain& c,
                                   const std::vector<int64_t>& syms) {
  SCOPED_TRACE(name + "\n" + ToString(c));
  KernelGroup g = OnlyGroup(c);
  auto in = RandomInputs(c, syms, 7);
  auto want = Evaluate(c, in, syms, EvalMode::kExact64);
  ASSERT_TRUE(want.ok()) << want.status();
  auto got = RunOnCpu(c, g, in, syms);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want->size());
  for (size_t j = 0; j < want->size(); ++j) {
    ASSERT_EQ((*got)[j].size(), (*want)[j].size());
    int bad = 0;
    for (size_t i = 0; i < (*want)[j].size() && bad < 5; ++i) {
      if (!Same((*got)[j][i], (*want)[j][i])) {
        ++bad;
        ADD_FAILURE() << "output " << j << " element " << i << ": " << (*got)[j][i] << " vs "
                      << (*want)[j][i];
      }
    }
  }
}

TEST(ViewsEvaluateTest, HandComputedRotateHalfSliceAndPermute) {
  // x = [[1, 2, 3, 4], [5, 6, 7, 8]] seen through one view per chain.
  const std::vector<std::vector<double>> in = {{1, 2, 3, 4, 5, 6, 7, 8}};
  struct Case {
    const char* name;
    int32_t (*view)(Chain*, int32_t);
    std::vector<double> want;
  } cases[] = {
      {"rotate_half",
       [](Chain* c, int32_t x) {
         return views_test::Concat(c,
                                   {c->AddOp(OpKind::kNeg, {views_test::Slice(c, x, 1, 2, 4)}),
                                    views_test::Slice(c, x, 1, 0, 2)},
                                   1);
       },
       {-3, -4, 1, 2, -7, -8, 5, 6}},
      {"x[:, 1::2]",
       [](Chain* c, int32_t x) { return views_test::Slice(c, x, 1, 1, 4, 2); },
       {2, 4, 6, 8}},
      {"x.T",
       [](Chain* c, int32_t x) {
         return views_test::Permute(c, x, {1, 0});
       },
       {1, 5, 2, 6, 3, 7, 4, 8}},
      {"x.T[1:3]",
       [](Chain* c, int32_t x) {
         return views_test::Slice(c, views_test::Permute(c, x, {1, 0}), 0, 1, 3);
       },
       {2, 6, 3, 7}},
      {"x.reshape(4, 2).T",
       [](Chain* c, int32_t x) {
         return views_test::Permute(c, views_test::Reshape(c, x, {S(4), S(2)}), {1, 0});
       },
       {1, 3, 5, 7, 2, 4, 6, 8}},
      {"concat(x, 10 * x[:1], axis 0)",
       [](Chain* c, int32_t x) {
         return views_test::Concat(
             c, {x, c->AddOp(OpKind::kMul, {views_test::Slice(c, x, 0, 0, 1), c->AddConstant(10)})},
             0);
       },
       {1, 2, 3, 4, 5, 6, 7, 8, 10, 20, 30, 40}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    Chain c;
    int32_t x = c.AddInput(TensorType{DType::kF32, {S(2), S(4)}});
    c.outputs = {k.view(&c, x)};
    Chain v = views_test::Finish(c);
    auto out = Evaluate(v, in, {}, EvalMode::kExact64);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0], k.want);
    // The kernel's index program computes the same from the same memory.
    auto got = RunOnCpu(v, OnlyGroup(v), in, {});
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)[0], k.want);
  }
}

TEST(ViewsProgramTest, MatchesEvaluatorOnEveryChain) {
  for (const views_test::Named& n : views_test::Chains()) {
    std::vector<int64_t> syms(n.chain.symbols.size(), 33);
    ExpectProgramMatchesEvaluator(n.name, n.chain, syms);
  }
  ExpectProgramMatchesEvaluator("rope_symbolic_1_row", views_test::Rope(DType::kF32, -8, 2, 64),
                                {1});
  ExpectProgramMatchesEvaluator("swiglu_symbolic", views_test::Swiglu(DType::kF16, -8, 24), {5});
  ExpectProgramMatchesEvaluator("odd_concat_symbolic", views_test::OddConcat(DType::kF32, -8), {3});
}

// Views of views of computed values, a strided input and broadcasts.
TEST(ViewsProgramTest, NestedViewsOfComputedValues) {
  Chain c;
  int32_t x = c.AddInput(TensorType{DType::kF32, {S(6), S(4)}}, {1, 6});  // A transposed view.
  int32_t b = c.AddInput(TensorType{DType::kBF16, {S(4)}});
  int32_t y = c.AddOp(OpKind::kAdd, {x, b});                                      // [6, 4]
  int32_t r = views_test::Reshape(&c, y, {S(3), S(2), S(4)});                     // Split: a view.
  int32_t p = views_test::Permute(&c, r, {2, 0, 1});                              // [4, 3, 2]
  int32_t s = views_test::Slice(&c, p, 0, 1, 4, 2);                               // [2, 3, 2]
  int32_t k = views_test::Concat(&c, {s, views_test::Slice(&c, p, 0, 0, 1)}, 0);  // [3, 3, 2]
  int32_t k2 = views_test::Concat(&c, {k, c.AddOp(OpKind::kExp, {k})}, 2);        // [3, 3, 4]
  // The second output, [3, 1, 4], is stored once per row of the first.
  c.outputs = {c.AddOp(OpKind::kMul, {k2, c.AddConstant(0.5)}), views_test::Slice(&c, k2, 1, 2, 3)};
  ExpectProgramMatchesEvaluator("nested", views_test::Finish(c), {});
}

// A step near INT64_MAX takes one element; its stride must not overflow.
TEST(ViewsProgramTest, HugeSliceStep) {
  Chain c;
  int32_t x = c.AddInput(TensorType{DType::kF32, {S(4), S(10)}});
  int32_t s = views_test::Slice(&c, x, 1, 3, 10, std::numeric_limits<int64_t>::max());
  c.outputs = {c.AddOp(OpKind::kAdd, {s, x})};
  Chain v = views_test::Finish(c);
  ExpectProgramMatchesEvaluator("huge_step", v, {});
  absl::StatusOr<KernelSpec> k = EmitPointwise(v, OnlyGroup(v), V(1));
  ASSERT_TRUE(k.ok()) << k.status();
}

TEST(ViewsLayoutTest, SliceBecomesOffsetAndStride) {
  Chain c = views_test::Swiglu(DType::kF32, 9, 256);
  absl::StatusOr<IterSpace> s = BuildIterSpace(c, OnlyGroup(c));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->sizes, (std::vector<Mono>{Mono{9, {}}, Mono{256, {}}}));
  ASSERT_EQ(s->inputs.size(), 2u);  // One buffer, two views of it.
  EXPECT_EQ(s->inputs[0].buffer, s->inputs[1].buffer);
  EXPECT_EQ(s->inputs[0].strides, (std::vector<Mono>{Mono{512, {}}, Mono{1, {}}}));
  EXPECT_EQ(s->inputs[1].strides, s->inputs[0].strides);
  EXPECT_TRUE(s->inputs[0].offset.empty() || s->inputs[1].offset.empty());
  const Poly& off = s->inputs[0].offset.empty() ? s->inputs[1].offset : s->inputs[0].offset;
  EXPECT_EQ(off, (Poly{Mono{256, {}}}));
  EXPECT_TRUE(s->conds.empty());

  Chain step = views_test::SliceStep2(DType::kF32, 11, 96);
  s = BuildIterSpace(step, OnlyGroup(step));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->inputs.size(), 2u);
  EXPECT_EQ(s->inputs[0].strides.back(), (Mono{2, {}}));

  Chain perm = views_test::PermuteScale(DType::kF32, 2, 9, 4, 64, 0.125);
  s = BuildIterSpace(perm, OnlyGroup(perm));
  ASSERT_TRUE(s.ok()) << s.status();
  // [B,H,S,D] over [B,S,H,D]: D stays innermost, S and H swap strides.
  EXPECT_EQ(s->inputs[0].strides,
            (std::vector<Mono>{Mono{2304, {}}, Mono{64, {}}, Mono{256, {}}, Mono{1, {}}}));
}

TEST(ViewsLayoutTest, ConcatIsAGuardedChoice) {
  Chain c = views_test::Rope(DType::kF32, 7, 3, 64);
  absl::StatusOr<IterSpace> s = BuildIterSpace(c, OnlyGroup(c));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->conds.size(), 2u);  // Piece 0: c < 32; piece 1: c >= 32.
  EXPECT_TRUE(s->conds[0].has_hi && !s->conds[0].has_lo);
  EXPECT_EQ(s->conds[0].hi, 32);
  EXPECT_TRUE(s->conds[1].has_lo && !s->conds[1].has_hi);
  EXPECT_EQ(s->conds[1].lo, 32);
  int guarded = 0, x_reads = 0;
  for (const Operand& o : s->inputs) {
    if (o.buffer.index != 0) continue;
    ++x_reads;
    guarded += !o.guard.empty();
  }
  EXPECT_EQ(x_reads, 3);  // x, x[..., 32:] shifted left, x[..., :32] shifted right.
  EXPECT_EQ(guarded, 2);
  int selects = 0;
  for (const Term& t : s->terms) selects += t.kind == Term::Kind::kSelect;
  EXPECT_EQ(selects, 1);
}

TEST(ViewsVariantTest, VectorAccessOnlyWhereViewsKeepItLegal) {
  auto aligned = [](const KernelSpec& k, uint32_t input) {
    int n = 0;
    for (const Precondition& p : k.preconditions) {
      n += p.kind == Precondition::Kind::kAligned && p.buffer.kind == BufferRef::Kind::kInput &&
           p.buffer.index == input;
    }
    return n;
  };
  auto access_of = [&](const KernelSpec& k, uint32_t input) { return aligned(k, input) > 0; };
  // SwiGLU: both halves start at multiples of 4 f32s: vector loads.
  Chain sw = views_test::Swiglu(DType::kF32, 9, 256);
  KernelGroup g = OnlyGroup(sw);
  EXPECT_EQ(PointwiseHeuristic(sw, g).Get("vec"), 4);
  absl::StatusOr<KernelSpec> k = EmitPointwise(sw, g, V(4));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(aligned(*k, 0), 1);  // Two views of one buffer: one precondition.
  EXPECT_TRUE(absl::StrContains(k->source, "(in0 + c0 * 512 + c1 + 256)")) << k->source;

  // A half starting at element 2 (hidden 2): no aligned vector of 4 there.
  Chain narrow = views_test::Swiglu(DType::kF32, 64, 2);
  g = OnlyGroup(narrow);
  EXPECT_EQ(CanGenerate(narrow, g, V(4)).code(), absl::StatusCode::kInvalidArgument);
  k = EmitPointwise(narrow, g, V(2));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(access_of(*k, 0));  // Offset 2 is a multiple of 2.

  // x[:, 1::2] and x[:, ::2]: strided lanes, never a vector load of x.
  Chain step = views_test::SliceStep2(DType::kF32, 11, 96);
  g = OnlyGroup(step);
  k = EmitPointwise(step, g, V(4));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_FALSE(access_of(*k, 0));
  EXPECT_TRUE(absl::StrContains(k->source, "j * 2]")) << k->source;

  // x[:, 1:] of an odd start: consecutive elements off the vectors'
  // alignment, read through a window (two aligned vectors, shifted).
  Chain c;
  int32_t x = c.AddInput(TensorType{DType::kF32, {S(16), S(9)}});
  c.outputs = {c.AddOp(OpKind::kExp, {views_test::Slice(&c, x, 1, 1, 9)})};
  Chain tail = views_test::Finish(c);
  g = OnlyGroup(tail);
  k = EmitPointwise(tail, g, V(4));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_FALSE(access_of(*k, 0));
  EXPECT_TRUE(absl::StrContains(k->source, "kf_ldw<kf_vec<float, 4>>(in0 + c0 * 9 + c1 + 1)"))
      << k->source;
}

TEST(ViewsVariantTest, ConcatBoundariesBoundVec) {
  // Rope with head_dim 64: pieces of 32 along the innermost dim.
  Chain rope = views_test::Rope(DType::kBF16, 7, 3, 64);
  KernelGroup g = OnlyGroup(rope);
  EXPECT_EQ(PointwiseHeuristic(rope, g).Get("vec"), 8);
  absl::StatusOr<KernelSpec> k = EmitPointwise(rope, g, V(8));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_TRUE(absl::StrContains(k->source, "if (k0) l1 = *reinterpret_cast")) << k->source;

  // Pieces of 3, 5 and 8: any vector would straddle a boundary.
  Chain odd = views_test::OddConcat(DType::kF32, 13);
  g = OnlyGroup(odd);
  for (int vec : {2, 4}) {
    absl::Status s = CanGenerate(odd, g, V(vec));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("vec ", vec, " would split vectors")))
        << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "(concat)")) << s;
  }
  EXPECT_TRUE(CanGenerate(odd, g, V(1, 4)).ok());
  EXPECT_EQ(PointwiseHeuristic(odd, g).Get("vec"), 1);
  for (const Variant& v : PointwiseSpace(odd, g)) EXPECT_EQ(v.Get("vec"), 1) << v.ToString();

  // Rope with head_dim 6 (pieces of 3): vec 2 splits, vec 1 does not.
  Chain small = views_test::Rope(DType::kF32, 5, 2, 6);
  g = OnlyGroup(small);
  EXPECT_EQ(CanGenerate(small, g, V(2)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PointwiseHeuristic(small, g).Get("vec"), 1);
}

TEST(ViewsSourceTest, EveryNumericsAndVariantEmits) {
  for (const views_test::Named& n : views_test::Chains()) {
    SCOPED_TRACE(n.name);
    KernelGroup g = OnlyGroup(n.chain);
    std::vector<Variant> space = PointwiseSpace(n.chain, g);
    EXPECT_FALSE(space.empty());
    for (const Variant& v : space) {
      absl::StatusOr<KernelSpec> k = EmitPointwise(n.chain, g, v);
      ASSERT_TRUE(k.ok()) << v.ToString() << ": " << k.status();
    }
    for (Numerics num : {Numerics::kReference64, Numerics::kEager}) {
      absl::StatusOr<KernelSpec> k = EmitPointwise(n.chain, g, PointwiseHeuristic(n.chain, g), num);
      ASSERT_TRUE(k.ok()) << k.status();
      EXPECT_FALSE(absl::StrContains(k->source, "#include"));
      if (num == Numerics::kReference64) {
        EXPECT_TRUE(absl::StrContains(k->source, "double* __restrict__ out0")) << k->source;
      }
    }
  }
}

TEST(ViewsPartitionTest, ChainsWithViewsAreOnePointwiseKernel) {
  Chain rope = views_test::Rope(DType::kBF16, 7, 3, 64);
  absl::StatusOr<Partition> p = PartitionChain(rope);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  EXPECT_EQ(p->kernels[0].family, Family::kPointwise);
  EXPECT_EQ(p->kernels[0].reason, "element-wise chain with its layout views fused into one pass");
  int views = 0;
  for (int32_t id : p->kernels[0].nodes) views += IsLayout(rope.nodes[id].kind);
  EXPECT_EQ(views, 3);  // Two slices and the concat.
  absl::StatusOr<KernelSpec> k =
      EmitPointwise(rope, p->kernels[0], PointwiseHeuristic(rope, p->kernels[0]));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->ops.size(), p->kernels[0].nodes.size());
}

// Reshapes that merge dims no view of their operand can merge: the kernel
// iterates over the operand's finer shape, where the merge is undone.
TEST(ViewsLayoutTest, MergesNoViewCanMakeIterateOverTheFinerShape) {
  // A transpose merged into one dim: [6, R] iterated, x read transposed.
  Chain pf = views_test::PermuteThenFlatten(DType::kF32, 5);
  absl::StatusOr<IterSpace> s = BuildIterSpace(pf, OnlyGroup(pf));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->sizes.size(), 2u);
  EXPECT_EQ(s->sizes[0], (Mono{6, {}}));
  EXPECT_EQ(s->sizes[1], (Mono{5, {}}));
  EXPECT_TRUE(s->outputs[0].dense);
  EXPECT_EQ(s->inputs[0].strides, (std::vector<Mono>{Mono{1, {}}, Mono{6, {}}}));

  // A concat's axis merged with another dim: the choice of piece is no
  // affine function of the merged coordinate, but is of the finer ones.
  Chain c;
  int32_t x = c.AddInput(TensorType{DType::kF32, {S(4), S(3)}});
  int32_t y = c.AddInput(TensorType{DType::kF32, {S(4), S(5)}});
  int32_t k = views_test::Concat(&c, {x, y}, 1);
  c.outputs = {views_test::Reshape(&c, k, {S(32)})};
  ExpectProgramMatchesEvaluator("concat_flattened", views_test::Finish(c), {});

  // An expand merged away by a reshape.
  Chain e;
  int32_t b = e.AddInput(TensorType{DType::kF32, {S(1), S(8)}});
  int32_t ex = views_test::Reshape(&e, b, {S(4), S(8)}, OpKind::kExpand);
  e.outputs = {views_test::Reshape(&e, ex, {S(32)})};
  ExpectProgramMatchesEvaluator("expand_flattened", views_test::Finish(e), {});

  // Interleaved rotary: stack(...).flatten(-2), iterated over [.., 64, 2],
  // the pieces chosen by the innermost coordinate, so no vector is wider
  // than a piece.
  Chain rope = views_test::InterleavedRope(DType::kBF16, 7, 3, 128);
  s = BuildIterSpace(rope, OnlyGroup(rope));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->sizes.back(), (Mono{2, {}}));
  for (const Variant& v : PointwiseSpace(rope, OnlyGroup(rope))) EXPECT_EQ(v.Get("vec"), 1);
}

TEST(ViewsUnimplementedTest, RefusalsNameTheOpAndWhy) {
  // A merge no finer iteration undoes: the merged value is sliced before
  // the output, so the reshape's shape is not the kernel's.
  Chain c;
  int32_t x = c.AddInput(TensorType{DType::kF32, {S(4), S(3)}});
  int32_t y = c.AddInput(TensorType{DType::kF32, {S(4), S(5)}});
  int32_t k = views_test::Concat(&c, {x, y}, 1);
  c.outputs = {views_test::Slice(&c, views_test::Reshape(&c, k, {S(32)}), 0, 1, 17)};
  absl::StatusOr<Partition> p = PartitionChain(views_test::Finish(c));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "(reshape): reshape [4,8] to [32]"))
      << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "the pieces of op 0 (concat)")) << p.status();

  // The same reshape of a dense value is a view.
  Chain ok;
  int32_t d = ok.AddInput(TensorType{DType::kF32, {S(4), S(8)}});
  ok.outputs = {views_test::Reshape(&ok, ok.AddOp(OpKind::kExp, {d}), {S(32)})};
  EXPECT_TRUE(PartitionChain(views_test::Finish(ok)).ok());

  // An iota is its coordinate: one pointwise kernel.
  Chain io;
  int32_t i = io.AddOp(OpKind::kIota, {});
  io.nodes[i].shape = {S(8)};
  io.nodes[i].dtype = DType::kF32;
  io.outputs = {io.AddOp(OpKind::kExp, {i})};
  p = PartitionChain(views_test::Finish(io));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->kernels[0].family, Family::kPointwise);
  // Beside a matrix product it is not generated.
  Chain mm;
  int32_t a = mm.AddInput(TensorType{DType::kF32, {S(8), S(8)}});
  int32_t col = mm.AddOp(OpKind::kIota, {});
  mm.nodes[col].shape = {S(8), S(8)};
  mm.nodes[col].axis = 1;
  mm.nodes[col].dtype = DType::kF32;
  mm.outputs = {mm.AddOp(OpKind::kAdd, {mm.AddOp(OpKind::kMatmul, {a, a}), col})};
  p = PartitionChain(views_test::Finish(mm));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "(iota): iota beside a matrix product is not generated yet (it is in element-wise chains and beside reductions)"))
      << p.status();

  // Beside a reduction, a pointwise kernel computes the view and stores it
  // for the reduction (codegen/partition_test.cc's ViewsBesideReductionsTest):
  // every other column. A slice at step 1 the row kernel reads in place.
  Chain r;
  int32_t z = r.AddInput(TensorType{DType::kF32, {S(4), S(8)}});
  int32_t sum = r.AddOp(OpKind::kReduceSum, {views_test::Slice(&r, z, 1, 0, 8, 2)});
  r.nodes[sum].axes = {1};
  r.outputs = {sum};
  p = PartitionChain(views_test::Finish(r));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 2u);
  EXPECT_EQ(p->kernels[0].family, Family::kPointwise);
  EXPECT_EQ(p->kernels[1].family, Family::kRowReduction);
}

}  // namespace
}  // namespace kfuse
