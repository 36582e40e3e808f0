#include "codegen/pointwise.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "codegen/pointwise_test_chains.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using pointwise_test::Finish;
using pointwise_test::S;
using pointwise_test::T;
using pointwise_test::TestChain;

Variant V(int vec, int items, int block, int64_t grid) {
  return Variant{Family::kPointwise,
                 {{"vec", vec}, {"items", items}, {"block", block}, {"grid", grid}}};
}

KernelSpec Emit(const TestChain& tc, const Variant& v, Numerics n = Numerics::kFast) {
  absl::StatusOr<KernelSpec> k = EmitPointwise(tc.chain, tc.group, v, n);
  EXPECT_TRUE(k.ok()) << k.status();
  return k.ok() ? *k : KernelSpec{};
}

using pointwise_test::NarrowRows;

// x f32 [M, K] + bias f32 [K], both symbolic; M, K bounded when `bounded`.
TestChain SymbolicInner(bool bounded) {
  Chain c;
  c.symbols.push_back(SymbolInfo{"M", 4096, bounded ? 8192 : 0});
  c.symbols.push_back(SymbolInfo{"K", 1024, bounded ? 4096 : 0});
  int x = c.AddInput(T(DType::kF32, {Dim::Sym(0), Dim::Sym(1)}));
  int b = c.AddInput(T(DType::kF32, {Dim::Sym(1)}));
  c.outputs.push_back(c.AddOp(OpKind::kAdd, {x, b}));
  return Finish("symbolic_inner", std::move(c));
}

// x f32 [1000] through `sins` chained sins, then `tanhs` chained tanhs.
TestChain Chained(int sins, int tanhs, DType t = DType::kF32) {
  Chain c;
  int v = c.AddInput(T(t, {S(1000)}));
  for (int i = 0; i < sins; ++i) v = c.AddOp(OpKind::kSin, {v});
  for (int i = 0; i < tanhs; ++i) v = c.AddOp(OpKind::kTanh, {v});
  c.outputs.push_back(v);
  return Finish("chained", std::move(c));
}

TEST(OutOfLineTest, ManyAccurateSinsAreCalledNotInlined) {
  // Eight inline; from nine on, each call site calls kf_sinf_ol (the f32
  // sin out of line), in the fast kernel and as double in the yardstick.
  const std::string eight = Emit(Chained(8, 0), V(4, 1, 256, 0)).source;
  EXPECT_FALSE(absl::StrContains(eight, "_ol(")) << eight;
  EXPECT_TRUE(absl::StrContains(eight, "= sinf(v"));
  const std::string nine = Emit(Chained(9, 0), V(4, 1, 256, 0)).source;
  EXPECT_TRUE(absl::StrContains(nine, "__device__ __noinline__ float kf_sinf_ol(float x)")) << nine;
  EXPECT_TRUE(absl::StrContains(nine, "= kf_sinf_ol(v"));
  EXPECT_FALSE(absl::StrContains(nine, "= sinf("));
  const std::string ref = Emit(Chained(9, 0), V(4, 1, 256, 0), Numerics::kReference64).source;
  EXPECT_TRUE(absl::StrContains(ref, "= kf_sin_ol(v")) << ref;
  // 16-bit sins keep the MUFU path, whose slow path is out of line already.
  EXPECT_FALSE(absl::StrContains(Emit(Chained(9, 0, DType::kBF16), V(8, 1, 256, 0)).source, "_ol("));
}

TEST(OutOfLineTest, ALongElementFunctionIsCalledNotInlined) {
  EXPECT_TRUE(absl::StrContains(Emit(Chained(0, 64), V(4, 1, 256, 0)).source,
                                "__device__ __forceinline__ void kf_elem("));
  EXPECT_TRUE(absl::StrContains(Emit(Chained(0, 65), V(4, 1, 256, 0)).source,
                                "__device__ __noinline__ void kf_elem("));
}

struct BadVariantCase {
  std::string what;
  Variant variant;
  absl::StatusCode code;
  std::string message;
};

TEST(CanGenerateTest, RejectsIllegalVariants) {
  TestChain f32 = pointwise_test::ReluFmaF32();
  TestChain narrow = NarrowRows();
  std::vector<std::pair<const TestChain*, BadVariantCase>> cases = {
      {&f32, {"wrong family", Variant{Family::kMatmul, V(4, 1, 256, 0).params},
              absl::StatusCode::kInvalidArgument, "family must be pointwise"}},
      {&f32, {"missing param", Variant{Family::kPointwise, {{"vec", 4}, {"items", 1}, {"block", 256}}},
              absl::StatusCode::kInvalidArgument, "missing grid"}},
      {&f32, {"unknown param", [] { Variant v = V(4, 1, 256, 0); v.params["warps"] = 4; return v; }(),
              absl::StatusCode::kInvalidArgument, "unknown param \"warps\""}},
      {&f32, {"vec 3", V(3, 1, 256, 0), absl::StatusCode::kInvalidArgument, "vec must be"}},
      {&f32, {"32-byte vectors", V(8, 1, 256, 0), absl::StatusCode::kInvalidArgument,
              "exceeds 16-byte accesses"}},
      {&f32, {"items 3", V(4, 3, 256, 0), absl::StatusCode::kInvalidArgument, "items must be"}},
      {&f32, {"block 100", V(4, 1, 100, 0), absl::StatusCode::kInvalidArgument, "block must be"}},
      {&f32, {"negative grid", V(4, 1, 256, -1), absl::StatusCode::kInvalidArgument, "grid must be"}},
      {&narrow, {"vec across rows", V(4, 1, 256, 0), absl::StatusCode::kInvalidArgument,
                 "does not divide the innermost dim (6)"}},
  };
  for (const auto& [tc, c] : cases) {
    absl::Status s = CanGenerate(tc->chain, tc->group, c.variant);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), c.message)) << c.what << ": " << s;
  }
  EXPECT_TRUE(CanGenerate(narrow.chain, narrow.group, V(2, 1, 256, 0)).ok());
  EXPECT_TRUE(CanGenerate(f32.chain, f32.group, V(4, 4, 1024, 1056)).ok());
}

TEST(CanGenerateTest, WrongGroupFamilyAndUnsupportedOps) {
  TestChain f32 = pointwise_test::ReluFmaF32();
  KernelGroup g = f32.group;
  g.family = Family::kRowReduction;
  EXPECT_EQ(CanGenerate(f32.chain, g, V(4, 1, 256, 0)).code(), absl::StatusCode::kInvalidArgument);

  Chain c;
  int x = c.AddInput(T(DType::kF32, {S(64), S(32)}));
  int r = c.AddOp(OpKind::kReduceSum, {x});
  c.nodes[r].axes = {1};
  c.outputs.push_back(r);
  TestChain red = Finish("reduce", std::move(c));
  absl::Status s = CanGenerate(red.chain, red.group, V(1, 1, 256, 0));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "reduce_sum")) << s;
}

TEST(HeuristicTest, SixteenByteVectors) {
  EXPECT_EQ(PointwiseHeuristic(pointwise_test::ReluFmaF32().chain,
                               pointwise_test::ReluFmaF32().group),
            V(4, 2, 256, 0));
  TestChain bf16 = pointwise_test::BiasGeluBf16();
  EXPECT_EQ(PointwiseHeuristic(bf16.chain, bf16.group), V(8, 4, 256, 0));
  // A 6-wide broadcast row allows 2-element vectors only.
  TestChain narrow = NarrowRows();
  EXPECT_EQ(PointwiseHeuristic(narrow.chain, narrow.group).Get("vec"), 2);
  // A symbolic innermost dim under a broadcast: no divisibility to rely on.
  TestChain sym = SymbolicInner(false);
  EXPECT_EQ(PointwiseHeuristic(sym.chain, sym.group).Get("vec"), 1);
}

// Operands read once a vector (a column broadcast along the rows) or
// element by element (strided) do not narrow the vectors of the others: a
// bf16 x masked by an i64 lengths column takes 16-byte vectors of x.
TEST(HeuristicTest, BroadcastAndStridedOperandsDoNotNarrowVectors) {
  Chain c;
  int x = c.AddInput(T(DType::kBF16, {S(64), S(4096)}));
  int lengths = c.AddInput(T(DType::kI64, {S(64), S(1)}));
  int iota = c.AddOp(OpKind::kIota, {});
  c.nodes[iota].shape = {S(4096)};
  c.nodes[iota].dtype = DType::kI64;
  int keep = c.AddOp(OpKind::kLt, {iota, lengths});
  c.outputs.push_back(c.AddOp(OpKind::kWhere, {keep, x, c.AddConstant(0)}));
  TestChain masked = Finish("masked_by_lengths", std::move(c));
  EXPECT_EQ(PointwiseHeuristic(masked.chain, masked.group).Get("vec"), 8);
  KernelSpec k = Emit(masked, V(8, 1, 256, 0));
  EXPECT_TRUE(absl::StrContains(k.source, "const long long l1 = in1[c0];")) << k.source;

  // x bf16 [64, 512] plus the transpose of y i64 [512, 64]: y is read with
  // a stride of 64 along the lanes, element by element.
  Chain t;
  int a = t.AddInput(T(DType::kBF16, {S(64), S(512)}));
  int b = t.AddInput(T(DType::kI64, {S(512), S(64)}));
  int bt = t.AddOp(OpKind::kPermute, {b});
  t.nodes[bt].axes = {1, 0};
  int sum = t.AddOp(OpKind::kAdd, {t.AddCast(a, DType::kF32), t.AddCast(bt, DType::kF32)});
  t.outputs.push_back(t.AddCast(sum, DType::kBF16));
  TestChain strided = Finish("strided_i64", std::move(t));
  EXPECT_EQ(PointwiseHeuristic(strided.chain, strided.group).Get("vec"), 8);
  EXPECT_TRUE(CanGenerate(strided.chain, strided.group, V(8, 1, 256, 0)).ok());
}

TEST(SpaceTest, LegalDistinctBoundedAndSeeded) {
  for (const TestChain& tc : pointwise_test::GoldenChains()) {
    std::vector<Variant> space = PointwiseSpace(tc.chain, tc.group);
    EXPECT_GE(space.size(), 8u) << tc.name;
    EXPECT_LE(space.size(), 48u) << tc.name;
    EXPECT_EQ(space.front(), PointwiseHeuristic(tc.chain, tc.group)) << tc.name;
    std::set<Variant> seen(space.begin(), space.end());
    EXPECT_EQ(seen.size(), space.size()) << tc.name;
    for (const Variant& v : space) {
      EXPECT_TRUE(CanGenerate(tc.chain, tc.group, v).ok()) << tc.name << " " << v.ToString();
      absl::StatusOr<KernelSpec> k = EmitPointwise(tc.chain, tc.group, v);
      ASSERT_TRUE(k.ok()) << k.status();
      for (const Precondition& p : k->preconditions) {
        EXPECT_NE(p.kind, Precondition::Kind::kDivisible) << tc.name << " " << v.ToString();
      }
    }
    EXPECT_EQ(PointwiseSpace(tc.chain, tc.group), space) << tc.name;
  }
}

TEST(ContractTest, DenseChainParamsGridAndAlignment) {
  TestChain tc = pointwise_test::ReluFmaF32();
  KernelSpec k = Emit(tc, V(4, 2, 256, 0));
  ASSERT_EQ(k.params.size(), 4u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(k.params[i].kind, KernelParam::Kind::kBuffer);
    EXPECT_EQ(k.params[i].buffer, (BufferRef{BufferRef::Kind::kInput, i}));
  }
  EXPECT_EQ(k.params[3].buffer, (BufferRef{BufferRef::Kind::kOutput, 0}));
  EXPECT_EQ(k.grid.x.ToString(), "512");  // ceil_div(1048576, 2048), folded.
  EXPECT_EQ(k.block.x, SizeExpr::Const(256));
  ASSERT_EQ(k.preconditions.size(), 4u);
  for (const Precondition& p : k.preconditions) {
    EXPECT_EQ(p.kind, Precondition::Kind::kAligned);
    EXPECT_EQ(p.value, 16);
  }
  EXPECT_TRUE(absl::StrContains(k.source, "typedef int kf_idx;"));
  EXPECT_TRUE(absl::StrContains(k.source, "__launch_bounds__(256) " + k.entry + "("));
  EXPECT_TRUE(absl::StartsWith(k.entry, "kf_pw_"));
  EXPECT_EQ(k.ops, (std::vector<uint32_t>{3, 4, 5}));

  KernelSpec strided = Emit(tc, V(4, 1, 128, 132));
  EXPECT_EQ(strided.grid.x.ToString(), "132");  // min(132, ceil_div(1048576, 512)).
  EXPECT_TRUE(absl::StrContains(strided.source, "base += (kf_idx)gridDim.x * tile"));
}

// A node the group recomputes (for a later node) may be a chain output that
// another kernel of the plan writes: only the group's results are written.
TEST(ContractTest, WritesItsResultsNotEveryOutputItComputes) {
  Chain c;
  int x = c.AddInput(T(DType::kF32, {S(3), S(4096)}));
  int mask = c.AddOp(OpKind::kLogicalAnd, {x, x});
  int y = c.AddOp(OpKind::kSigmoid, {c.AddOp(OpKind::kWhere, {mask, x, c.AddConstant(0.5)})});
  c.outputs = {y, mask, y};
  TestChain tc = Finish("recomputed_output", std::move(c));
  tc.group.results = {y};  // mask is written elsewhere.
  KernelSpec k = Emit(tc, V(4, 1, 256, 0));
  std::vector<BufferRef> written;
  for (const KernelParam& p : k.params) {
    if (p.buffer.kind != BufferRef::Kind::kInput) written.push_back(p.buffer);
  }
  EXPECT_EQ(written, (std::vector<BufferRef>{{BufferRef::Kind::kOutput, 0},
                                             {BufferRef::Kind::kOutput, 2}}));
}

TEST(ContractTest, SymbolsBecomeInt64ScalarsAndPreconditions) {
  TestChain rows = pointwise_test::SymbolicRows();
  KernelSpec k = Emit(rows, V(4, 2, 256, 0));
  ASSERT_EQ(k.params.size(), 4u);
  EXPECT_EQ(k.params[3].kind, KernelParam::Kind::kScalar);
  EXPECT_EQ(k.params[3].value, SizeExpr::Symbol(0));
  EXPECT_EQ(k.params[3].scalar_dtype, DType::kI64);
  EXPECT_EQ(k.grid.x.ToString(), "ceil_div(4096 * s0, 2048)");
  EXPECT_TRUE(absl::StrContains(k.source, "typedef long long kf_idx;"));  // N unbounded.
  EXPECT_EQ(Emit(rows, V(4, 2, 256, 1056)).grid.x.ToString(),
            "min(1056, ceil_div(4096 * s0, 2048))");

  // Bounded symbols: 32-bit indexing, guarded by kAtMost.
  TestChain bounded = SymbolicInner(true);
  KernelSpec b = Emit(bounded, V(1, 1, 256, 0));
  EXPECT_TRUE(absl::StrContains(b.source, "typedef int kf_idx;"));
  int at_most = 0;
  for (const Precondition& p : b.preconditions) at_most += p.kind == Precondition::Kind::kAtMost;
  EXPECT_EQ(at_most, 2);

  // Vectors over a symbolic innermost dim need it divisible.
  KernelSpec v = Emit(SymbolicInner(false), V(4, 1, 256, 0));
  bool divisible = false;
  for (const Precondition& p : v.preconditions) {
    if (p.kind == Precondition::Kind::kDivisible) {
      divisible = true;
      EXPECT_EQ(p.expr, SizeExpr::Symbol(1));
      EXPECT_EQ(p.value, 4);
    }
  }
  EXPECT_TRUE(divisible);
}

TEST(ContractTest, BroadcastInputsAndOutputs) {
  // y = x * s ([N,M]) and z = exp(s) ([N,1]): z is stored once per row.
  Chain c;
  int x = c.AddInput(T(DType::kF32, {S(256), S(64)}));
  int s = c.AddInput(T(DType::kF32, {S(256), S(1)}));
  c.outputs.push_back(c.AddOp(OpKind::kMul, {x, s}));
  c.outputs.push_back(c.AddOp(OpKind::kExp, {s}));
  TestChain tc = Finish("bcast_out", std::move(c));
  KernelSpec k = Emit(tc, V(4, 1, 128, 0));
  EXPECT_TRUE(absl::StrContains(k.source, "const float l1 = in1[c0];")) << k.source;
  EXPECT_TRUE(absl::StrContains(k.source, "if (j == 0 && c1 == 0) out1[c0] = y1;")) << k.source;
  EXPECT_TRUE(absl::StrContains(k.source, "if (c1 == 0) out1[c0] = y1;")) << k.source;
  // Output 1 is never vector-accessed: no alignment asked of it.
  for (const Precondition& p : k.preconditions) {
    EXPECT_FALSE(p.buffer == (BufferRef{BufferRef::Kind::kOutput, 1})) << p.description;
  }
}

TEST(ContractTest, LargeTensorsIndexIn64Bits) {
  Chain c;
  int x = c.AddInput(T(DType::kBF16, {S(65536), S(65536)}));
  c.outputs.push_back(c.AddOp(OpKind::kNeg, {x}));
  KernelSpec k = Emit(Finish("large", std::move(c)), V(8, 1, 256, 0));
  EXPECT_TRUE(absl::StrContains(k.source, "typedef long long kf_idx;"));
  EXPECT_TRUE(absl::StrContains(k.source, "const kf_idx n = 4294967296LL;")) << k.source;
  EXPECT_EQ(k.grid.x.ToString(), "2097152");
}

TEST(ContractTest, ThreeDimsStoreBroadcastOutputOnce) {
  KernelSpec k = Emit(pointwise_test::ThreeDims(), V(4, 1, 256, 0));
  // a's zero stride keeps three dims; output 1 is written where c0 == 0.
  EXPECT_TRUE(absl::StrContains(
      k.source, "if (c0 == 0) *reinterpret_cast<kf_vec<float, 4>*>(out1 + c1 * 48 + c2) = o1;"))
      << k.source;
}

TEST(ContractTest, UnusedInputsKeepTheirParameterButAreNotRead) {
  Chain c;
  int a = c.AddInput(T(DType::kF32, {S(1024)}));
  c.AddInput(T(DType::kBF16, {S(1024)}));
  int d = c.AddInput(T(DType::kF32, {S(1024)}));
  c.outputs.push_back(c.AddOp(OpKind::kSub, {a, d}));
  TestChain tc = Finish("unused", std::move(c));
  KernelSpec k = Emit(tc, V(4, 1, 256, 0));
  ASSERT_EQ(k.params.size(), 4u);
  EXPECT_EQ(k.params[1].buffer, (BufferRef{BufferRef::Kind::kInput, 1}));
  // An unread input is an untyped slot: its storage type needs no prelude
  // (a bf16 type without its definition failed to compile).
  EXPECT_TRUE(absl::StrContains(k.source, "const void* __restrict__ in1"));
  EXPECT_FALSE(absl::StrContains(k.source, "__kf_bf16")) << k.source;
  EXPECT_FALSE(absl::StrContains(k.source, "in1[")) << k.source;
  EXPECT_FALSE(absl::StrContains(k.source, "in1 +")) << k.source;
}

TEST(SourceTest, NoIncludesNoClientTextHexConstants) {
  TestChain tc = pointwise_test::OuterBroadcast();
  const std::string evil = "\"); system(\"rm -rf /\"); //";
  tc.chain.input_names = {evil, evil + "2"};
  tc.chain.output_names = {evil + "out"};
  TestChain sym = pointwise_test::SymbolicRows();
  sym.chain.symbols[0].name = evil;
  sym.chain.input_names = {evil, evil};
  for (const TestChain* t : {&tc, &sym}) {
    for (Numerics n : {Numerics::kFast, Numerics::kReference64, Numerics::kEager}) {
      for (const Variant& v : PointwiseSpace(t->chain, t->group)) {
        KernelSpec k = Emit(*t, v, n);
        EXPECT_FALSE(absl::StrContains(k.source, "#include"));
        EXPECT_FALSE(absl::StrContains(k.source, "system"));
        EXPECT_FALSE(absl::StrContains(k.source, "rm -rf"));
        EXPECT_FALSE(absl::StrContains(k.entry, "system"));
      }
    }
  }
  KernelSpec fast = Emit(tc, PointwiseHeuristic(tc.chain, tc.group));
  EXPECT_TRUE(absl::StrContains(fast.source, "0x1p-1f")) << fast.source;  // 0.5
  EXPECT_FALSE(absl::StrContains(fast.source, "0.5"));
  KernelSpec ref = Emit(tc, PointwiseHeuristic(tc.chain, tc.group), Numerics::kReference64);
  EXPECT_TRUE(absl::StrContains(ref.source, "= 0x1p-1;")) << ref.source;
  EXPECT_TRUE(absl::StrContains(ref.source, "double* __restrict__ out0"));
  EXPECT_FALSE(absl::StrContains(ref.source, "kf_vec"));
  EXPECT_TRUE(absl::StrContains(ref.source, "numerics reference64"));
}

TEST(SourceTest, DeterministicAndVariantSpecific) {
  TestChain tc = pointwise_test::ThreeOutputs();
  KernelSpec a = Emit(tc, V(4, 2, 256, 0));
  KernelSpec b = Emit(pointwise_test::ThreeOutputs(), V(4, 2, 256, 0));
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.entry, b.entry);
  KernelSpec c = Emit(tc, V(4, 2, 512, 0));
  EXPECT_NE(a.entry, c.entry);
  EXPECT_TRUE(absl::StrContains(a.source, "pointwise/4"));
}

TEST(SourceTest, NumericsDifferWhereTheyShould) {
  TestChain tc = pointwise_test::ThreeOutputs();
  Variant v = V(4, 1, 256, 0);
  KernelSpec fast = Emit(tc, v);
  KernelSpec eager = Emit(tc, v, Numerics::kEager);
  KernelSpec ref = Emit(tc, v, Numerics::kReference64);
  // bf16 silu: kf_exp_fast in the product kernel, expf in eager, exp in double.
  EXPECT_TRUE(absl::StrContains(fast.source, "kf_exp_fast(-x0)"));
  EXPECT_TRUE(absl::StrContains(eager.source, "expf(-x0)"));
  EXPECT_FALSE(absl::StrContains(eager.source, "__expf"));
  EXPECT_TRUE(absl::StrContains(eager.source, "kf_rbf("));  // intermediates rounded
  EXPECT_TRUE(absl::StrContains(ref.source, " exp(-x0)"));
  // NaN-propagating maximum.
  EXPECT_TRUE(absl::StrContains(fast.source, "kf_max("));
  EXPECT_TRUE(absl::StrContains(fast.source, "(a != a || a > b) ? a : b"));
}

TEST(SourceTest, ExplicitCastsRound) {
  // f32 -> bf16 -> f32: the cast must round even though both ends are f32.
  Chain c;
  int x = c.AddInput(T(DType::kF32, {S(4096)}));
  c.outputs.push_back(c.AddCast(c.AddCast(x, DType::kBF16), DType::kF32));
  TestChain tc = Finish("cast", std::move(c));
  KernelSpec k = Emit(tc, V(4, 1, 256, 0));
  EXPECT_TRUE(absl::StrContains(k.source, "kf_rbf(x0)")) << k.source;
  KernelSpec ref = Emit(tc, V(4, 1, 256, 0), Numerics::kReference64);
  EXPECT_TRUE(absl::StrContains(ref.source, "kf_rbf(x0)")) << ref.source;
  EXPECT_TRUE(absl::StrContains(ref.source, "kf_d2f_odd")) << ref.source;
}

}  // namespace
}  // namespace kfuse
