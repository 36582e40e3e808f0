// The benchmark's chains (bench/gpu/cases/<suite>/*.json, written by
// bench/gpu/suite.py write-cases) parse, translate, validate and partition
// into kernels of their suite's family (one each; the MLP, two matmul
// kernels; the router's softmax, one matmul kernel reducing its rows; the
// reduce suite's plans, reduction kernels and pointwise or row ones, or row
// kernels alone for a loss's mean over the batch: the cross-entropy with
// class labels among them) whose heuristic variants
// compile, so the H200 run cannot fail on them.
#include <filesystem>
#include <string>

#include "clients/json.h"
#include "codegen/canonicalize.h"
#include "codegen/generators.h"
#include "codegen/partition.h"
#include "gtest/gtest.h"
#include "service/translate.h"
#include "tuner/nvrtc_compiler.h"

namespace kfuse {
namespace {

// Checks every case of `suite`; returns how many there were.
int CheckSuite(const std::string& suite, Family family, size_t min_space) {
  NvrtcCompiler nvrtc;
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("bench/gpu/cases/" + suite)) {
    if (entry.path().extension() != ".json") continue;
    ++n;
    const std::string path = entry.path().string();
    SCOPED_TRACE(path);
    absl::StatusOr<v1::CompileRequest> req = client::LoadCompileRequest(path);
    EXPECT_TRUE(req.ok()) << req.status();
    if (!req.ok()) continue;
    absl::StatusOr<Chain> chain = TranslateChain(req->chain());
    EXPECT_TRUE(chain.ok()) << chain.status();
    if (!chain.ok()) continue;
    Chain canonical = Canonicalize(*chain);
    absl::StatusOr<Partition> p = PartitionChain(canonical);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) continue;
    const bool mlp = entry.path().filename().string().rfind("mlp", 0) == 0;
    // The reduce suite's chains are plans: reduction kernels, then a
    // pointwise or row one where the chain goes on; or a row kernel storing
    // per-row results, then one reducing them.
    const bool plan = family == Family::kReduction;
    if (plan) {
      EXPECT_TRUE(p->kernels.size() > 1 || p->kernels[0].family == Family::kReduction);
    } else {
      EXPECT_EQ(p->kernels.size(), mlp ? 2u : 1u);
    }
    for (const KernelGroup& g : p->kernels) {
      if (!plan || (g.family != Family::kPointwise && g.family != Family::kRowReduction)) {
        EXPECT_EQ(g.family, family);
      }
      absl::StatusOr<KernelSpec> spec = EmitFamily(canonical, g, FamilyHeuristic(canonical, g));
      EXPECT_TRUE(spec.ok()) << spec.status();
      if (!spec.ok()) continue;
      CompileOptions opts;
      opts.arch = "sm_90a";
      absl::StatusOr<CompiledKernel> k = nvrtc.Compile(*spec, opts);
      EXPECT_TRUE(k.ok()) << k.status();
      EXPECT_GE(FamilySpace(canonical, g).size(), min_space);
    }
  }
  return n;
}

TEST(BenchCasesTest, EveryPointwiseCaseIsOnePointwiseKernel) {
  EXPECT_EQ(CheckSuite("pointwise", Family::kPointwise, 6), 13);
}

TEST(BenchCasesTest, EveryRowCaseIsOneRowKernel) {
  EXPECT_EQ(CheckSuite("row", Family::kRowReduction, 4), 28);
}

TEST(BenchCasesTest, EveryMatmulCaseIsMatmulKernels) {
  EXPECT_EQ(CheckSuite("matmul", Family::kMatmul, 8), 7);
}

TEST(BenchCasesTest, EveryReduceCaseIsAPlanOfReductionAndRowKernels) {
  EXPECT_EQ(CheckSuite("reduce", Family::kReduction, 6), 10);
}

}  // namespace
}  // namespace kfuse
