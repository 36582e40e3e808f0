#include "codegen/attention.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codegen/attention_test_chains.h"
#include "codegen/generators.h"
#include "codegen/golden_test_util.h"
#include "codegen/matmul_test_chains.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using attention_test::Attention;
using attention_test::Options;
using golden::CheckGolden;

KernelGroup OnlyKernel(const Chain& c) {
  absl::StatusOr<Partition> p = PartitionChain(c);
  EXPECT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->kernels.size(), 1u);
  return p->kernels[0];
}

Options Opts(bool causal, bool mask, bool lengths, bool lse, int64_t kv_heads = 4) {
  Options o;
  o.causal = causal;
  o.mask = mask;
  o.lengths = lengths;
  o.lse = lse;
  o.kv_heads = kv_heads;
  return o;
}

TEST(AttentionMatchTest, TheCompositeIsOneAttentionKernel) {
  struct Case {
    std::string name;
    Options o;
  };
  std::vector<Case> cases = {{"plain", Opts(false, false, false, false)},
                             {"causal", Opts(true, false, false, false)},
                             {"mask_lengths", Opts(false, true, true, false)},
                             {"causal_lengths_lse", Opts(true, false, true, true)},
                             {"gqa_mask_lse", Opts(false, true, false, true, 2)}};
  Options bias;
  bias.bias = true;
  bias.symbolic_seq = true;
  cases.push_back({"bias_symbolic", bias});
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    const Chain c = Attention(tc.o);
    std::optional<AttentionMatch> m = MatchAttention(c);
    ASSERT_TRUE(m.has_value()) << ToString(c);
    EXPECT_EQ(m->causal, tc.o.causal);
    EXPECT_EQ(m->safe, tc.o.mask || tc.o.lengths || tc.o.bias);
    EXPECT_EQ(m->lse >= 0, tc.o.lse);
    const KernelGroup g = OnlyKernel(c);
    EXPECT_EQ(g.family, Family::kAttention);
    EXPECT_TRUE(absl::StrContains(g.reason, "online softmax")) << g.reason;
    // The report names what the score takes in, as fused.
    EXPECT_EQ(absl::StrContains(g.reason, "the causal mask"), tc.o.causal) << g.reason;
    EXPECT_EQ(absl::StrContains(g.reason, "a mask"), tc.o.mask) << g.reason;
    EXPECT_EQ(absl::StrContains(g.reason, "the lengths"), tc.o.lengths) << g.reason;
    EXPECT_EQ(absl::StrContains(g.reason, "a bias"), tc.o.bias) << g.reason;
    EXPECT_EQ(g.results.size(), c.outputs.size());
  }
}

TEST(AttentionMatchTest, AMaskOfTheIndicesIsNamedInTheReport) {
  // The causal composite with its comparison turned around (key j >= query
  // i): not the causal mask, but a mask all the same.
  Chain c = Attention(Opts(true, false, false, false));
  for (Node& n : c.nodes) {
    if (n.kind == OpKind::kLe) n.kind = OpKind::kGe;
  }
  std::optional<AttentionMatch> m = MatchAttention(c);
  ASSERT_TRUE(m.has_value()) << ToString(c);
  EXPECT_FALSE(m->causal);
  const KernelGroup g = OnlyKernel(c);
  EXPECT_TRUE(absl::StrContains(g.reason, "QK^T, a mask of the indices, softmax and PV")) << g.reason;
}

TEST(AttentionMatchTest, OtherChainsWithTwoProductsAreLeftToTheMatmulPartition) {
  // An MLP and a softmax of one product are not attention.
  EXPECT_FALSE(MatchAttention(matmul_test::Mlp(DType::kBF16, 64, 128, 256)).has_value());
  EXPECT_FALSE(MatchAttention(matmul_test::SoftmaxOfProduct(DType::kBF16, 64, 128, 256)).has_value());
  // The probabilities as an output too: they must reach memory, so the
  // chain is split: the scores' rows are short enough for a CTA's tile, so
  // the softmax runs in the first product's epilogue, which stores the
  // probabilities for the second product.
  Chain c = Attention(Opts(false, false, false, false));
  int32_t probs = -1;
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    if (c.nodes[id].kind == OpKind::kDiv) probs = id;
  }
  ASSERT_GE(probs, 0);
  c.outputs.push_back(probs);
  EXPECT_FALSE(MatchAttention(c).has_value());
  absl::StatusOr<Partition> p = PartitionChain(c);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 2u);
  EXPECT_EQ(p->kernels[0].family, Family::kMatmul);
  EXPECT_EQ(p->kernels[1].family, Family::kMatmul);
  EXPECT_THAT(p->kernels[0].results, ::testing::Contains(probs));
}

TEST(AttentionTest, SpaceIsLegalDistinctAndStartsWithTheHeuristic) {
  for (int64_t d : {64, 128, 256}) {
    Options o;
    o.d = o.dv = d;
    const Chain c = Attention(o);
    const KernelGroup g = OnlyKernel(c);
    std::vector<Variant> space = AttentionSpace(c, g);
    ASSERT_GE(space.size(), 3u) << d;
    EXPECT_EQ(space[0], AttentionHeuristic(c, g));
    // FlashAttention-2's tiles: 128 query rows up to D = 128, 64 beyond.
    EXPECT_EQ(space[0].Get("bq"), d > 128 ? 64 : 128);
    // The launch order is searched for causal chains only.
    for (const Variant& v : space) EXPECT_EQ(v.Get("order"), 0);
    o.causal = true;
    const Chain causal = Attention(o);
    int ordered = 0;
    for (const Variant& v : AttentionSpace(causal, OnlyKernel(causal))) ordered += v.Get("order") == 1;
    EXPECT_GE(ordered, 1);
    for (size_t i = 0; i < space.size(); ++i) {
      EXPECT_TRUE(CanGenerateAttention(c, g, space[i]).ok()) << space[i].ToString();
      for (size_t j = 0; j < i; ++j) EXPECT_NE(space[i], space[j]);
    }
  }
}

TEST(AttentionTest, BadParamsAreNamed) {
  Options o;
  o.d = o.dv = 256;
  const Chain c = Attention(o);
  const KernelGroup g = OnlyKernel(c);
  auto with = [](int bq, int bkv, int warps) {
    return Variant{Family::kAttention, {{"bq", bq}, {"bkv", bkv}, {"warps", warps}, {"order", 0}}};
  };
  struct Bad {
    Variant v;
    std::string says;
  };
  for (const Bad& b : {Bad{with(96, 64, 4), "bq must be"}, Bad{with(64, 48, 4), "bkv must be"},
                       Bad{with(64, 64, 8), "bq / warps"}, Bad{with(64, 64, 2), "warps must be"},
                       Bad{with(128, 64, 4), "accumulators"},
                       Bad{with(64, 128, 4), "shared memory"},
                       Bad{Variant{Family::kAttention, {{"bq", 64}, {"bkv", 64}, {"warps", 4}, {"order", 2}}},
                           "order must be"}}) {
    absl::Status s = CanGenerateAttention(c, g, b.v);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << b.v.ToString();
    EXPECT_TRUE(absl::StrContains(s.message(), b.says)) << s.message();
  }
}

// What the fused kernel cannot take is Unimplemented by name. The partition
// then serves the chain with the products' kernels where they can (a head
// dim of 72: QK^T with the softmax in its epilogue, then PV), and answers
// with the fused kernel's reason, and theirs, where they cannot.
TEST(AttentionTest, LayoutsAndHeadDimsItCannotTakeAreUnimplementedByName) {
  auto matched = [](const Chain& c) {
    std::optional<AttentionMatch> m = MatchAttention(c);
    EXPECT_TRUE(m.has_value());
    return m ? AttentionGroup(c, *m) : KernelGroup{};
  };
  Options odd;
  odd.d = odd.dv = 72;
  Chain c = Attention(odd);
  KernelGroup g = matched(c);
  absl::Status s = CanGenerateAttention(c, g, AttentionHeuristic(c, g));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(s.message(), "head dim (72)")) << s.message();
  EXPECT_TRUE(absl::StrContains(s.message(), "(matmul)")) << s.message();
  absl::StatusOr<Partition> apart = PartitionChain(c);
  ASSERT_TRUE(apart.ok()) << apart.status();
  ASSERT_GE(apart->kernels.size(), 2u);
  EXPECT_EQ(apart->kernels[0].family, Family::kMatmul);
  for (const KernelGroup& k : apart->kernels) {
    EXPECT_TRUE(CanGenerateFamily(c, k, FamilyHeuristic(c, k)).ok()) << k.reason;
  }
  Options longer;
  longer.batch = longer.heads = longer.kv_heads = 1;
  longer.sq = 16;
  longer.sk = int64_t{1} << 31;
  c = Attention(longer);
  g = matched(c);
  s = CanGenerateAttention(c, g, AttentionHeuristic(c, g));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(s.message(), "key length (2147483648)")) << s.message();
  Options f16;
  f16.dtype = DType::kF32;
  c = Attention(f16);
  g = matched(c);
  s = CanGenerateAttention(c, g, AttentionHeuristic(c, g));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(s.message(), "operand A")) << s.message();
  apart = PartitionChain(c);
  EXPECT_EQ(apart.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(apart.status().message(), "operand A")) << apart.status();
  // Where neither serves, both reasons: the fused kernel's and the
  // products' (a head dim of 8: 16-byte operand rows are needed).
  Options tiny;
  tiny.d = tiny.dv = 4;
  c = Attention(tiny);
  apart = PartitionChain(c);
  EXPECT_EQ(apart.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(apart.status().message(), "head dim (4)")) << apart.status();
  EXPECT_TRUE(absl::StrContains(apart.status().message(), "; nor as separate kernels: ")) << apart.status();
}

TEST(AttentionTest, LaunchContractAndSchedule) {
  Options o = Opts(true, false, false, true);
  o.symbolic_seq = true;
  const Chain c = Attention(o);
  const KernelGroup g = OnlyKernel(c);
  absl::StatusOr<KernelSpec> k = EmitAttention(c, g, AttentionHeuristic(c, g));
  ASSERT_TRUE(k.ok()) << k.status();
  // Three inputs, two outputs, the sequence symbol.
  ASSERT_EQ(k->params.size(), 6u);
  EXPECT_EQ(k->params[3].buffer.kind, BufferRef::Kind::kOutput);
  EXPECT_EQ(k->params[5].kind, KernelParam::Kind::kScalar);
  EXPECT_EQ(k->block.x.value(), 128);
  // (128 x 64 + 2 x 64 x (64 + 64)) x 2 bytes of tiles.
  EXPECT_EQ(k->dynamic_smem_bytes, (128 * 64 + 2 * 64 * 128) * 2u);
  EXPECT_TRUE(absl::StrContains(k->source, "kf_CAUSAL = true"));
  EXPECT_TRUE(absl::StrContains(k->source, "ex2.approx"));
  EXPECT_FALSE(absl::StrContains(k->source, "seq"));  // Client names stay out.
  bool aligned = false;
  for (const Precondition& p : k->preconditions) {
    aligned = aligned || (p.kind == Precondition::Kind::kAligned && p.value == 16);
  }
  EXPECT_TRUE(aligned);
  // The score loops index rows and keys in 32 bits.
  bool bounded = false;
  for (const Precondition& p : k->preconditions) {
    bounded = bounded || (p.kind == Precondition::Kind::kAtMost && p.value == (int64_t{1} << 31) - 256 &&
                          absl::StrContains(p.description, "query length"));
  }
  EXPECT_TRUE(bounded);
  absl::StatusOr<KernelSpec> again = EmitAttention(c, g, AttentionHeuristic(c, g));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->source, k->source);
  // The yardsticks: a block of 128 threads per 8 query rows.
  absl::StatusOr<KernelSpec> ref = EmitAttention(c, g, AttentionHeuristic(c, g), Numerics::kReference64);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->block.x.value(), 128);
  EXPECT_TRUE(absl::StrContains(ref->source, "constexpr int kf_R = 8;"));
  // ceil(300 / 8) blocks of rows for each of the 2 x 4 heads.
  EXPECT_EQ(*ref->grid.x.Eval({300}), 38 * 8);
  // A static query length under 8 is one block of that many rows a head.
  Options few = Opts(false, false, false, false);
  few.sq = 3;
  const Chain fc = Attention(few);
  const KernelGroup fg = OnlyKernel(fc);
  absl::StatusOr<KernelSpec> eager = EmitAttention(fc, fg, AttentionHeuristic(fc, fg), Numerics::kEager);
  ASSERT_TRUE(eager.ok()) << eager.status();
  EXPECT_TRUE(absl::StrContains(eager->source, "constexpr int kf_R = 3;"));
  EXPECT_EQ(*eager->grid.x.Eval({}), few.batch * few.heads);
  few.sq = 9;  // Two blocks of 8 rows a head, the second of one row.
  const Chain nc = Attention(few);
  const KernelGroup ng = OnlyKernel(nc);
  absl::StatusOr<KernelSpec> nine = EmitAttention(nc, ng, AttentionHeuristic(nc, ng), Numerics::kEager);
  ASSERT_TRUE(nine.ok()) << nine.status();
  EXPECT_TRUE(absl::StrContains(nine->source, "constexpr int kf_R = 8;"));
  EXPECT_EQ(*nine->grid.x.Eval({}), 2 * few.batch * few.heads);
  EXPECT_TRUE(absl::StrContains(ref->source, "double"));
}

// Q, K and V sliced from one packed input, the output's heads put back
// between the tokens and the head dim: one kernel, reading the input at
// three offsets and storing its output in the layout asked.
TEST(AttentionTest, PackedHeadsAreReadAndStoredInPlace) {
  Options o = Opts(true, false, false, false);
  o.packed = true;
  const Chain c = Attention(o);
  const KernelGroup g = OnlyKernel(c);
  for (Numerics n : {Numerics::kFast, Numerics::kReference64, Numerics::kEager}) {
    SCOPED_TRACE(NumericsName(n));
    absl::StatusOr<KernelSpec> k = EmitAttention(c, g, AttentionHeuristic(c, g), n);
    ASSERT_TRUE(k.ok()) << k.status();
    // One input, one output; K and V 256 and 512 elements (heads * d) in.
    ASSERT_EQ(k->params.size(), 2u);
    EXPECT_TRUE(absl::StrContains(k->source, "(in0 + 256LL)")) << k->source;
    EXPECT_TRUE(absl::StrContains(k->source, "(in0 + 512LL)"));
    // Output [2, 128, 4 * 64]: head h of token i at i * 256 + h * 64.
    EXPECT_TRUE(absl::StrContains(k->source, "kf_b0 * 32768LL + kf_b1 * 64LL + i * 256LL + d"));
    EXPECT_FALSE(absl::StrContains(k->source, "[kf_o]"));
  }
  // A slice starting off a 16-byte boundary is refused by name.
  Chain odd = c;
  for (Node& n : odd.nodes) {
    if (n.kind == OpKind::kSlice && n.start > 0) n.start += 4, n.stop += 4;
  }
  absl::StatusOr<KernelSpec> refused = EmitAttention(odd, OnlyKernel(c), AttentionHeuristic(c, g));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "not a multiple of 8")) << refused.status();
}

// Grouped-query heads repeated as Hugging Face's repeat_kv writes them (k
// and v expanded over the group and merged into the heads): one kernel,
// head h reading k and v of head h / G.
TEST(AttentionTest, RepeatedKvHeadsAreReadByTheirGroup) {
  Options o = Opts(true, false, false, false, 2);
  o.repeat_kv = true;
  const Chain c = Attention(o);
  const KernelGroup g = OnlyKernel(c);
  for (Numerics n : {Numerics::kFast, Numerics::kReference64}) {
    absl::StatusOr<KernelSpec> k = EmitAttention(c, g, AttentionHeuristic(c, g), n);
    ASSERT_TRUE(k.ok()) << k.status();
    // k [2, 2, 128, 64]: batch 16384 apart, kv head 8192, for head h / 2.
    EXPECT_TRUE(absl::StrContains(k->source, "in1 + kf_b0 * 16384LL + (kf_b1 / 2LL) * 8192LL")) << k->source;
    EXPECT_TRUE(absl::StrContains(k->source, "in2 + kf_b0 * 16384LL + (kf_b1 / 2LL) * 8192LL"));
  }
}

TEST(AttentionGolden, Chains) {
  Options gqa = Opts(false, true, true, true, 2);
  const Chain causal = Attention(Opts(true, false, false, false));
  const Chain masked = Attention(gqa);
  absl::StatusOr<KernelSpec> a = EmitAttention(causal, OnlyKernel(causal),
                                               AttentionHeuristic(causal, OnlyKernel(causal)));
  ASSERT_TRUE(a.ok()) << a.status();
  CheckGolden("attention_causal_bf16", a->source);
  absl::StatusOr<KernelSpec> b = EmitAttention(masked, OnlyKernel(masked),
                                               AttentionHeuristic(masked, OnlyKernel(masked)));
  ASSERT_TRUE(b.ok()) << b.status();
  CheckGolden("attention_gqa_mask_lengths_lse_bf16", b->source);
  absl::StatusOr<KernelSpec> r = EmitAttention(masked, OnlyKernel(masked),
                                               AttentionHeuristic(masked, OnlyKernel(masked)),
                                               Numerics::kEager);
  ASSERT_TRUE(r.ok()) << r.status();
  CheckGolden("attention_gqa_mask_lengths_lse_bf16_eager", r->source);
  Options packed = Opts(true, false, false, false);
  packed.packed = true;
  const Chain p = Attention(packed);
  absl::StatusOr<KernelSpec> k = EmitAttention(p, OnlyKernel(p), AttentionHeuristic(p, OnlyKernel(p)));
  ASSERT_TRUE(k.ok()) << k.status();
  CheckGolden("attention_packed_causal_bf16", k->source);
}

}  // namespace
}  // namespace kfuse
