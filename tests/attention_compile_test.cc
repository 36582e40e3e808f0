// NVRTC compiles every variant of the attention family's space (sm_90a), and
// both yardsticks, for head dims 64, 128 and 256, causal and grouped-query
// chains with masks, lengths and the log-sum-exp, and a symbolic sequence
// length. No GPU needed.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/attention.h"
#include "codegen/attention_test_chains.h"
#include "gtest/gtest.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

struct Case {
  std::string name;
  attention_test::Options o;
};

std::vector<Case> Cases() {
  std::vector<Case> out;
  for (int64_t d : {64, 128, 256}) {
    attention_test::Options o;
    o.d = o.dv = d;
    o.causal = d == 128;
    out.push_back({absl::StrCat("d", d), o});
  }
  attention_test::Options gqa;
  gqa.heads = 8;
  gqa.kv_heads = 2;
  gqa.mask = gqa.lengths = gqa.lse = true;
  gqa.d = gqa.dv = 128;
  out.push_back({"gqa_mask_lengths_lse", gqa});
  attention_test::Options sym;
  sym.symbolic_seq = true;
  sym.bias = true;
  sym.dtype = DType::kF16;
  out.push_back({"f16_bias_symbolic_seq", sym});
  // Fewer query rows than a yardstick block takes; value heads wider and
  // narrower than the query's.
  attention_test::Options few;
  few.sq = 3;
  few.d = 64;
  few.dv = 256;
  out.push_back({"three_queries_d64_dv256", few});
  attention_test::Options one;
  one.sq = 1;
  one.d = 256;
  one.dv = 64;
  one.dtype = DType::kF16;
  out.push_back({"one_query_f16_d256_dv64", one});
  attention_test::Options packed;
  packed.packed = packed.causal = true;
  out.push_back({"packed_causal", packed});
  attention_test::Options rep;
  rep.heads = 8;
  rep.kv_heads = 2;
  rep.repeat_kv = rep.causal = true;
  out.push_back({"repeat_kv_causal", rep});
  return out;
}

TEST(AttentionCompileTest, EverySpaceVariantAndBothYardsticksCompile) {
  NvrtcCompiler nvrtc;
  CompileOptions opts;
  opts.arch = "sm_90a";
  for (const Case& tc : Cases()) {
    const Chain c = attention_test::Attention(tc.o);
    absl::StatusOr<Partition> p = PartitionChain(c);
    ASSERT_TRUE(p.ok()) << p.status();
    const KernelGroup& g = p->kernels[0];
    const std::vector<Variant> space = AttentionSpace(c, g);
    ASSERT_FALSE(space.empty()) << tc.name;
    for (const Variant& v : space) {
      SCOPED_TRACE(absl::StrCat(tc.name, " ", v.ToString()));
      absl::StatusOr<KernelSpec> spec = EmitAttention(c, g, v);
      ASSERT_TRUE(spec.ok()) << spec.status();
      absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
      ASSERT_TRUE(k.ok()) << k.status() << "\n" << spec->source;
      // The heuristic's schedule never spills. With a bias read at runtime
      // strides, the widest tiles (at the accumulator limit) spill a
      // little; the tuner times them as any other.
      EXPECT_LE(k->resources.spill_bytes, v == space[0] ? 0u : 256u)
          << k->resources.registers << " registers";
    }
    for (Numerics n : {Numerics::kReference64, Numerics::kEager}) {
      absl::StatusOr<KernelSpec> spec = EmitAttention(c, g, space[0], n);
      ASSERT_TRUE(spec.ok()) << spec.status();
      absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
      ASSERT_TRUE(k.ok()) << tc.name << " " << NumericsName(n) << ": " << k.status() << "\n"
                          << spec->source;
      // A yardstick's rows (kf_R of them a block) stay in registers.
      EXPECT_EQ(k->resources.spill_bytes, 0u)
          << tc.name << " " << NumericsName(n) << ": " << k->resources.registers << " registers";
      EXPECT_EQ(k->resources.local_bytes, 0u) << tc.name << " " << NumericsName(n);
    }
  }
}

}  // namespace
}  // namespace kfuse
