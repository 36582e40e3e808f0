// Golden tests: the emitted source of representative chains, byte for byte.
// On a mismatch the first differing line is printed; after an intended change
// run with KFUSE_UPDATE_GOLDEN=1 (from the repository root) and review the
// diff of tests/golden/.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/golden_test_util.h"
#include "codegen/pointwise.h"
#include "codegen/pointwise_test_chains.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using pointwise_test::TestChain;

class PointwiseGolden : public ::testing::TestWithParam<int> {};

TEST_P(PointwiseGolden, HeuristicVariantMatches) {
  TestChain tc = pointwise_test::GoldenChains()[GetParam()];
  Variant v = PointwiseHeuristic(tc.chain, tc.group);
  absl::StatusOr<KernelSpec> k = EmitPointwise(tc.chain, tc.group, v);
  ASSERT_TRUE(k.ok()) << k.status();
  golden::CheckGolden(absl::StrCat("pointwise_", tc.name), k->source);
}

INSTANTIATE_TEST_SUITE_P(Chains, PointwiseGolden, ::testing::Range(0, 6),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return pointwise_test::GoldenChains()[info.param].name;
                         });

TEST(PointwiseGoldenNumerics, ReferenceAndEagerMatch) {
  TestChain tc = pointwise_test::BiasGeluBf16();
  Variant v = PointwiseHeuristic(tc.chain, tc.group);
  for (auto [suffix, numerics] : {std::pair{"_ref64", Numerics::kReference64},
                                  std::pair{"_eager", Numerics::kEager}}) {
    absl::StatusOr<KernelSpec> k = EmitPointwise(tc.chain, tc.group, v, numerics);
    ASSERT_TRUE(k.ok()) << k.status();
    golden::CheckGolden(absl::StrCat("pointwise_", tc.name + suffix), k->source);
  }
}

TEST(PointwiseGoldenNumerics, FirstDifferenceNamesTheLine) {
  EXPECT_EQ(golden::FirstDifference("a\nb\nc", "a\nb\nc"), "");
  EXPECT_EQ(golden::FirstDifference("a\nb\nc", "a\nx\nc"), "line 2\n  expected: b\n  actual:   x");
  EXPECT_EQ(golden::FirstDifference("a", "a\nz"), "line 2\n  expected: <end of file>\n  actual:   z");
}

}  // namespace
}  // namespace kfuse
