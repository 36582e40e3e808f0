// Golden-source checks shared by the generators' golden tests: the emitted
// source must equal tests/golden/<name>.cu byte for byte. After an intended
// change run the test with KFUSE_UPDATE_GOLDEN=1 (from the repository root)
// and review the diff of tests/golden/.
//
//   CheckGolden("row_softmax_bf16_4096", spec->source);
#ifndef KFUSE_CODEGEN_GOLDEN_TEST_UTIL_H_
#define KFUSE_CODEGEN_GOLDEN_TEST_UTIL_H_

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace kfuse::golden {

// "" when equal, else where and how the first line differs.
inline std::string FirstDifference(const std::string& want, const std::string& got) {
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

inline void CheckGolden(const std::string& name, const std::string& source) {
  const std::string path = "tests/golden/" + name + ".cu";
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

}  // namespace kfuse::golden

#endif  // KFUSE_CODEGEN_GOLDEN_TEST_UTIL_H_
