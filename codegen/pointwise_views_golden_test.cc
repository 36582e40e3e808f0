// Golden tests of pointwise kernels with layout views: rotary embeddings
// (bf16, head_dim 128, a runtime row count; fast and fp64 reference; and
// interleaved),
// chunked SwiGLU (bf16) and differences along rows (bf16, both slices
// through windows), byte for byte under the heuristic variant. After an
// intended change run with KFUSE_UPDATE_GOLDEN=1 (from the repository root)
// and review the diff of tests/golden/pointwise_{rope,swiglu,diff}_*.cu.
#include <string>

#include "codegen/golden_test_util.h"
#include "codegen/partition.h"
#include "codegen/pointwise.h"
#include "codegen/pointwise_views_test_chains.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

void CheckChain(const std::string& name, const Chain& c, Numerics numerics) {
  absl::StatusOr<Partition> p = PartitionChain(c);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  const KernelGroup& g = p->kernels[0];
  absl::StatusOr<KernelSpec> k = EmitPointwise(c, g, PointwiseHeuristic(c, g), numerics);
  ASSERT_TRUE(k.ok()) << k.status();
  golden::CheckGolden(name, k->source);
}

TEST(RopeGolden, Bf16HeadDim128) {
  const Chain c = views_test::Rope(DType::kBF16, -4096, 32, 128);
  CheckChain("pointwise_rope_bf16_128", c, Numerics::kFast);
  CheckChain("pointwise_rope_bf16_128_ref64", c, Numerics::kReference64);
}

// Interleaved: the concat's axis merged with its neighbour, iterated over
// [T, H, 64, 2].
TEST(RopeGolden, InterleavedBf16HeadDim128) {
  CheckChain("pointwise_rope_interleaved_bf16_128",
             views_test::InterleavedRope(DType::kBF16, -4096, 32, 128), Numerics::kFast);
}

// Differences along the rows: both slices through windows.
TEST(DiffGolden, Bf16) {
  CheckChain("pointwise_diff_bf16", views_test::Diff(DType::kBF16, -4096, 4096), Numerics::kFast);
}

TEST(SwigluGolden, Bf16Hidden4096) {
  CheckChain("pointwise_swiglu_bf16_4096", views_test::Swiglu(DType::kBF16, -4096, 4096),
             Numerics::kFast);
}

}  // namespace
}  // namespace kfuse
