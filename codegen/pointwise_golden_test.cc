// Golden tests: the emitted source of representative chains, byte for byte.
// On a mismatch the first differing line is printed; after an intended change
// run with KFUSE_UPDATE_GOLDEN=1 (from the repository root) and review the
// diff of tests/golden/.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "codegen/pointwise.h"
#include "codegen/pointwise_test_chains.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using pointwise_test::TestChain;

std::string GoldenPath(const std::string& name) {
  return "tests/golden/pointwise_" + name + ".cu";
}

// "" when equal, else where and how the first line differs.
std::string FirstDifference(const std::string& want, const std::string& got) {
  std::vector<std::string> a = absl::StrSplit(want, '\n');
  std::vector<std::string> b = absl::StrSplit(got, '\n');
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    std::string x = i < a.size() ? a[i] : "<end of file>";
    std::string y = i < b.size() ? b[i] : "<end of file>";
    if (x != y) {
      return "line " + std::to_string(i + 1) + "\n  expected: " + x + "\n  actual:   " + y;
    }
  }
  return "";
}

void CheckGolden(const std::string& name, const std::string& source) {
  const std::string path = GoldenPath(name);
  const char* update = std::getenv("KFUSE_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream out(path, std::ios::binary);
    out << source;
    ASSERT_TRUE(out.good()) << "cannot write " << path << " (run from the repository root)";
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << "missing " << path
                         << " (run from the repository root; KFUSE_UPDATE_GOLDEN=1 creates it)";
  std::stringstream want;
  want << in.rdbuf();
  std::string diff = FirstDifference(want.str(), source);
  EXPECT_EQ(diff, "") << path << " differs at " << diff
                      << "\n(KFUSE_UPDATE_GOLDEN=1 rewrites the goldens)";
}

class PointwiseGolden : public ::testing::TestWithParam<int> {};

TEST_P(PointwiseGolden, HeuristicVariantMatches) {
  TestChain tc = pointwise_test::GoldenChains()[GetParam()];
  Variant v = PointwiseHeuristic(tc.chain, tc.group);
  absl::StatusOr<KernelSpec> k = EmitPointwise(tc.chain, tc.group, v);
  ASSERT_TRUE(k.ok()) << k.status();
  CheckGolden(tc.name, k->source);
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
    CheckGolden(tc.name + suffix, k->source);
  }
}

TEST(PointwiseGoldenNumerics, FirstDifferenceNamesTheLine) {
  EXPECT_EQ(FirstDifference("a\nb\nc", "a\nb\nc"), "");
  EXPECT_EQ(FirstDifference("a\nb\nc", "a\nx\nc"), "line 2\n  expected: b\n  actual:   x");
  EXPECT_EQ(FirstDifference("a", "a\nz"), "line 2\n  expected: <end of file>\n  actual:   z");
}

}  // namespace
}  // namespace kfuse
