#include "core/json_depth.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(JsonDepthTest, RefusesTextNestedPastTheBoundNamingTheFile) {
  EXPECT_TRUE(CheckJsonDepth(Nested(5), "a.json", 5).ok());
  const absl::Status s = CheckJsonDepth(Nested(6), "a.json", 5);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("a.json"));
  EXPECT_THAT(s.message(), HasSubstr("more than 5 levels"));
  // Objects count as arrays do, and depth is what is open at once.
  EXPECT_FALSE(CheckJsonDepth(R"({"a": [{"b": {}}]})", "b.json", 3).ok());
  EXPECT_TRUE(CheckJsonDepth(R"([[[]], [[]], [[]]])", "b.json", 3).ok());
}

TEST(JsonDepthTest, BracketsInsideStringsDoNotCount) {
  EXPECT_TRUE(CheckJsonDepth(R"({"name": "[[[[[[", "x": "\"[[[[["})", "c.json", 2).ok());
  EXPECT_TRUE(CheckJsonDepth(R"(["a\\", [[]]])", "c.json", 3).ok());  // The string ends at its quote.
  EXPECT_FALSE(CheckJsonDepth(R"(["a\\", [[[]]]])", "c.json", 3).ok());
  // A string opened by one quote ends only at the same quote: protobuf's
  // parser takes single-quoted strings, and a lone " inside one must not
  // hide the nesting after it.
  EXPECT_FALSE(CheckJsonDepth(R"({"x": '"', "ops": [[[[]]]]})", "c.json", 3).ok());
  EXPECT_TRUE(CheckJsonDepth(R"({"x": "'", "ops": [[]]})", "c.json", 3).ok());
}

TEST(JsonDepthTest, AChainNestsFarBelowTheDefault) {
  EXPECT_TRUE(CheckJsonDepth(Nested(kMaxJsonDepth), "d.json").ok());
  EXPECT_FALSE(CheckJsonDepth(Nested(kMaxJsonDepth + 1), "d.json").ok());
  EXPECT_TRUE(CheckJsonDepth("not json at all ]]]", "d.json").ok());
}

}  // namespace
}  // namespace kfuse
