// Golden tests of the row family: the emitted source of softmax (bf16,
// W=4096), LayerNorm (f32) and residual RMSNorm (bf16), byte for byte, under
// the heuristic and the looped schedule. After an intended change run with
// KFUSE_UPDATE_GOLDEN=1 (from the repository root) and review the diff of
// tests/golden/row_*.cu.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "codegen/partition.h"
#include "codegen/row.h"
#include "codegen/row_test_chains.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

std::string FirstDifference(const std::string& want, const std::string& got) {
  std::vector<std::string> a = absl::StrSplit(want, '\n');
  std::vector<std::string> b = absl::StrSplit(got, '\n');
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    std::string x = i < a.size() ? a[i] : "<end of file>";
    std::string y = i < b.size() ? b[i] : "<end of file>";
    if (x != y) return "line " + std::to_string(i + 1) + "\n  expected: " + x + "\n  actual:   " + y;
  }
  return "";
}

void CheckGolden(const std::string& name, const std::string& source) {
  const std::string path = "tests/golden/row_" + name + ".cu";
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
  EXPECT_EQ(diff, "") << path << " differs at " << diff;
}

TEST(RowGolden, Chains) {
  struct Case {
    const char* name;
    Chain chain;
    int resident;  // -1: the heuristic's.
  } cases[] = {
      {"softmax_bf16_4096", row_test::Softmax(DType::kBF16, -4096, 4096), -1},
      {"softmax_bf16_4096_looped", row_test::Softmax(DType::kBF16, -4096, 4096), 0},
      {"layer_norm_f32", row_test::LayerNorm(DType::kF32, -1024, 1024), -1},
      {"rms_norm_residual_bf16", row_test::RmsNormResidual(DType::kBF16, -1024, 4096), -1},
      {"softmax_bf16_50257_peeled", row_test::Softmax(DType::kBF16, -4096, 50257), -1},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    KernelGroup g = PartitionChain(k.chain)->kernels[0];
    Variant v = RowHeuristic(k.chain, g);
    if (k.resident >= 0) v.params["resident"] = k.resident;
    absl::StatusOr<KernelSpec> spec = EmitRow(k.chain, g, v);
    ASSERT_TRUE(spec.ok()) << spec.status();
    CheckGolden(k.name, spec->source);
  }
}

}  // namespace
}  // namespace kfuse
