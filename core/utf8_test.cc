#include "core/utf8.h"

#include "gtest/gtest.h"

namespace kfuse {
namespace {

// Text a request carries must be UTF-8; protobuf drops what is not.
TEST(IsUtf8Test, AcceptsWellFormedTextAndRefusesTheRest) {
  EXPECT_TRUE(IsUtf8(""));
  EXPECT_TRUE(IsUtf8("tokens"));
  EXPECT_TRUE(IsUtf8("\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // é € and an emoji.
  EXPECT_FALSE(IsUtf8("r\xff"));
  EXPECT_FALSE(IsUtf8("\xc3"));              // Cut short.
  EXPECT_FALSE(IsUtf8("\xc3\x28"));          // Not a continuation byte.
  EXPECT_FALSE(IsUtf8("\xc0\xaf"));          // Overlong '/'.
  EXPECT_FALSE(IsUtf8("\xed\xa0\x80"));      // A surrogate.
  EXPECT_FALSE(IsUtf8("\xf4\x90\x80\x80"));  // Past U+10FFFF.
}

}  // namespace
}  // namespace kfuse
