// The fuzzers' seeds and regression inputs (tests/fuzz/corpus,
// tests/fuzz/regressions) reach the stages they were kept for: none is
// refused at the door for an attribute its op does not read, which would
// turn its replay into a refusal that cannot fail.
#include <filesystem>
#include <string>

#include "clients/json.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "service/translate.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(FuzzInputsTest, NoSeedOrRegressionCarriesAStrayAttribute) {
  int n = 0;
  for (const char* dir : {"tests/fuzz/corpus", "tests/fuzz/regressions"}) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() != ".txtpb") continue;
      ++n;
      const std::string path = entry.path().string();
      SCOPED_TRACE(path);
      absl::StatusOr<std::string> text = client::ReadFile(path);
      ASSERT_TRUE(text.ok()) << text.status();
      v1::Chain chain;
      ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(*text, &chain));
      absl::StatusOr<Chain> typed = TranslateChain(chain);
      EXPECT_THAT(std::string(typed.status().message()), Not(HasSubstr(" takes no ")));
    }
  }
  EXPECT_GE(n, 40);
}

}  // namespace
}  // namespace kfuse
