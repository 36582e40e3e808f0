// The benchmark's chains (bench/gpu/cases/*.json, written by
// bench/gpu/run_pointwise.py write-cases) parse, translate, validate and
// partition into one pointwise kernel, so the H200 run cannot fail on them.
#include <filesystem>
#include <string>

#include "clients/json.h"
#include "codegen/canonicalize.h"
#include "codegen/partition.h"
#include "codegen/pointwise.h"
#include "gtest/gtest.h"
#include "service/translate.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

TEST(BenchCasesTest, EveryCaseIsOnePointwiseKernel) {
  NvrtcCompiler nvrtc;
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("bench/gpu/cases")) {
    if (entry.path().extension() != ".json") continue;
    ++n;
    const std::string path = entry.path().string();
    SCOPED_TRACE(path);
    absl::StatusOr<v1::CompileRequest> req = client::LoadCompileRequest(path);
    ASSERT_TRUE(req.ok()) << req.status();
    absl::StatusOr<Chain> chain = TranslateChain(req->chain());
    ASSERT_TRUE(chain.ok()) << chain.status();
    Chain canonical = Canonicalize(*chain);
    absl::StatusOr<Partition> p = PartitionChain(canonical);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->kernels.size(), 1u);
    EXPECT_EQ(p->kernels[0].family, Family::kPointwise);
    const KernelGroup& g = p->kernels[0];
    absl::StatusOr<KernelSpec> spec = EmitPointwise(canonical, g, PointwiseHeuristic(canonical, g));
    ASSERT_TRUE(spec.ok()) << spec.status();
    CompileOptions opts;
    opts.arch = "sm_90a";
    absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
    EXPECT_TRUE(k.ok()) << k.status();
    EXPECT_GE(PointwiseSpace(canonical, g).size(), 6u);
  }
  EXPECT_EQ(n, 13);
}

}  // namespace
}  // namespace kfuse
