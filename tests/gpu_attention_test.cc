// GPU property test of the attention family: head dims 64, 128 and 256,
// causal (queries fewer than keys too), grouped-query heads with a boolean
// mask and the log-sum-exp, per-sequence lengths (0, short, past the keys:
// the kernel clamps), a bias with a symbolic sequence length, at sizes that
// leave partial blocks on every edge. Every variant of the space is
// compiled with NVRTC for this GPU, launched through the C++ Launcher and
// compared with the CPU fp64 evaluator, eager PyTorch's error (the CPU
// kEager evaluator) the yardstick; so are both yardstick kernels. Masked
// rows must come out as zeros. Skips without a GPU.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/launcher.h"
#include "codegen/analysis.h"
#include "codegen/attention.h"
#include "codegen/attention_test_chains.h"
#include "codegen/evaluate.h"
#include "codegen/numeric.h"
#include "codegen/partition.h"
#include "gtest/gtest.h"
#include "service/convert.h"
#include "tests/gpu_test_util.h"
#include "tuner/check.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

constexpr double kSlack = 2.0;

using gpu_test::DeviceMemory;
using gpu_test::Gpu;
using gpu_test::OpenGpu;

struct Case {
  std::string name;
  attention_test::Options o;
  int64_t seq = 0;                // The symbol's value, when the chain has one.
  std::vector<double> lengths;    // Per batch, when the chain has lengths.
};

std::vector<Case> Cases() {
  std::vector<Case> out;
  attention_test::Options a;
  a.batch = 2, a.heads = 3, a.kv_heads = 3, a.sq = 200, a.sk = 136, a.d = a.dv = 64;
  out.push_back({"mha_d64", a});
  attention_test::Options b;
  b.batch = 1, b.heads = 2, b.kv_heads = 2, b.sq = b.sk = 300, b.d = b.dv = 128, b.causal = true;
  out.push_back({"causal_d128", b});
  attention_test::Options c = b;
  c.sq = 72, c.sk = 200;
  out.push_back({"causal_fewer_queries_d128", c});
  attention_test::Options g;
  g.batch = 2, g.heads = 4, g.kv_heads = 2, g.sq = 130, g.sk = 250, g.d = g.dv = 64;
  g.mask = g.lse = true;
  out.push_back({"gqa_mask_lse_d64", g});
  attention_test::Options l;
  l.dtype = DType::kF16;
  l.batch = 3, l.heads = 2, l.kv_heads = 2, l.sq = l.sk = 160, l.d = l.dv = 256, l.lengths = true;
  out.push_back({"lengths_f16_d256", l, 0, {0, 77, 1000}});
  attention_test::Options s;
  s.batch = 2, s.heads = 2, s.kv_heads = 2, s.sq = s.sk = 256, s.d = s.dv = 128;
  s.symbolic_seq = s.bias = s.causal = true;
  out.push_back({"bias_causal_symbolic_seq", s, 190});
  // Fewer query rows than a yardstick block takes (kf_R = 3, then 1), value
  // heads wider and narrower than the query's.
  attention_test::Options f;
  f.batch = 2, f.heads = 4, f.kv_heads = 2, f.sq = 3, f.sk = 333, f.d = 64, f.dv = 256;
  out.push_back({"gqa_three_queries_d64_dv256", f});
  attention_test::Options one;
  one.dtype = DType::kF16;
  one.batch = 2, one.heads = 2, one.kv_heads = 2, one.sq = 1, one.sk = 517, one.d = 256, one.dv = 64;
  out.push_back({"one_query_f16_d256_dv64", one});
  // Q, K and V read as slices of one packed input, the output stored with
  // its heads back between the tokens and the head dim.
  attention_test::Options packed;
  packed.batch = 2, packed.heads = 3, packed.kv_heads = 3, packed.sq = packed.sk = 200, packed.d = packed.dv = 64;
  packed.packed = packed.causal = true;
  out.push_back({"packed_causal_d64", packed});
  // k and v repeated over groups of 3 query heads, as repeat_kv writes it.
  attention_test::Options rep;
  rep.batch = 2, rep.heads = 6, rep.kv_heads = 2, rep.sq = 130, rep.sk = 250, rep.d = rep.dv = 128;
  rep.repeat_kv = rep.mask = true;
  out.push_back({"repeat_kv_mask_d128", rep});
  return out;
}

TEST(GpuAttentionTest, EveryVariantMatchesReference) {
  absl::StatusOr<Gpu> gpu = OpenGpu();
  if (!gpu.ok()) GTEST_SKIP() << "no GPU: " << gpu.status();
  NvrtcCompiler nvrtc;
  Launcher launcher(*gpu->cu);
  CompileOptions opts;
  opts.arch = gpu->arch;
  for (const Case& tc : Cases()) {
    SCOPED_TRACE(tc.name);
    const Chain c = attention_test::Attention(tc.o);
    const std::vector<int64_t> syms(c.symbols.size(), tc.seq);
    absl::StatusOr<Partition> p = PartitionChain(c);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->kernels.size(), 1u);
    const KernelGroup& g = p->kernels[0];
    ASSERT_EQ(g.family, Family::kAttention);
    // Normal-ish inputs in [-2, 2]; a mask with about one key in five off
    // and two rows off entirely; the lengths as given.
    auto in = gpu_test::UniformInputs(c, syms, static_cast<unsigned>(tc.name.size() * 7919), -2, 2);
    std::mt19937 rng(7);
    for (const Node& n : c.nodes) {
      if (n.kind != OpKind::kInput) continue;
      std::vector<double>& v = in[n.input_index];
      if (n.type.dtype == DType::kBool) {
        for (double& x : v) x = rng() % 5 != 0;
        const int64_t sk = tc.o.sk;
        for (int64_t row : {int64_t{0}, int64_t{tc.o.sq + 5}}) {
          for (int64_t j = 0; j < sk; ++j) v[row * sk + j] = 0;
        }
      } else if (n.type.dtype == DType::kI32) {
        v = tc.lengths;
      }
    }
    auto exact = Evaluate(c, in, syms, EvalMode::kExact64);
    auto eager = Evaluate(c, in, syms, EvalMode::kEager);
    ASSERT_TRUE(exact.ok() && eager.ok()) << exact.status() << eager.status();
    // The rows with every key masked are zeros.
    if (tc.o.mask || tc.o.lengths) {
      const std::vector<double>& o = (*exact)[0];
      EXPECT_EQ(o[0], 0.0);
      EXPECT_FALSE(std::isnan(o[0]));
    }
    DeviceMemory mem(gpu->cu);
    std::vector<DeviceBuffer> inputs = gpu_test::UploadInputs(mem, c, in, syms);
    gpu_test::KernelCheck check{&nvrtc, &launcher, opts, &c, syms, &inputs, &*exact, &*eager, kSlack};
    const std::vector<Variant> space = AttentionSpace(c, g);
    ASSERT_FALSE(space.empty());
    std::vector<std::pair<Variant, Numerics>> runs;
    for (const Variant& v : space) runs.push_back({v, Numerics::kFast});
    runs.push_back({space[0], Numerics::kReference64});
    runs.push_back({space[0], Numerics::kEager});
    for (const auto& [v, numerics] : runs) {
      const std::string what = absl::StrCat(v.ToString(), " ", NumericsName(numerics));
      absl::StatusOr<KernelSpec> spec = EmitAttention(c, g, v, numerics);
      ASSERT_TRUE(spec.ok()) << what << ": " << spec.status();
      gpu_test::CheckKernel(*gpu, mem, *spec, numerics, check, what);
    }
  }
}

}  // namespace
}  // namespace kfuse
