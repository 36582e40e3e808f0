// Token checks and the loopback test kfused applies before listening.
#include "service/auth.h"

#include "gtest/gtest.h"

namespace kfuse {
namespace {

TEST(TokenSet, AcceptsListedTokensOnly) {
  absl::StatusOr<TokenSet> t = TokenSet::FromText("# ops team\n  tok-aaaaaaaaaaaaaaaa  \n\ntok-bbbbbbbbbbbbbbbb\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), 2u);
  struct Case {
    const char* header;
    bool ok;
  } cases[] = {
      {"Bearer tok-aaaaaaaaaaaaaaaa", true},
      {"Bearer tok-bbbbbbbbbbbbbbbb", true},
      {"bearer tok-bbbbbbbbbbbbbbbb", true},
      {"Bearer tok-aaaaaaaaaaaaaaa", false},    // A prefix.
      {"Bearer tok-aaaaaaaaaaaaaaaaa", false},  // Longer.
      {"tok-aaaaaaaaaaaaaaaa", false},          // No scheme.
      {"Basic tok-aaaaaaaaaaaaaaaa", false},
      {"Bearer ", false},
      {"", false},
      {"Bearer # ops team", false},
  };
  for (const Case& c : cases) {
    absl::Status s = t->Check(c.header);
    EXPECT_EQ(s.ok(), c.ok) << c.header;
    if (!c.ok) {
      EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << c.header;
      // Never echoes what was sent.
      EXPECT_EQ(s.message().find("tok-"), absl::string_view::npos) << s.message();
    }
  }
}

TEST(TokenSet, RefusesEmptyAndShortTokenFiles) {
  EXPECT_EQ(TokenSet::FromText("# nothing\n\n").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TokenSet::FromText("short\n").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TokenSet::LoadFile("/nonexistent/tokens").status().code(), absl::StatusCode::kNotFound);
}

TEST(IsLoopbackAddress, Table) {
  struct Case {
    const char* address;
    bool loopback;
  } cases[] = {
      {"127.0.0.1:7420", true},  {"127.1.2.3:1", true},       {"localhost:7420", true},
      {"[::1]:7420", true},      {"unix:/run/kfused.sock", true}, {"0.0.0.0:7420", false},
      {"[::]:7420", false},      {"10.0.0.5:7420", false},    {"127.0.0.1.evil.com:7420", false},
      {"kfused.example:7420", false}, {"127.evil:1", false},
  };
  for (const Case& c : cases) EXPECT_EQ(IsLoopbackAddress(c.address), c.loopback) << c.address;
}

TEST(IsUnixSocketAddress, Prefixes) {
  EXPECT_TRUE(IsUnixSocketAddress("unix:/run/kfused.sock"));
  EXPECT_TRUE(IsUnixSocketAddress("unix-abstract:kfused"));
  EXPECT_FALSE(IsUnixSocketAddress("127.0.0.1:7420"));
  EXPECT_FALSE(IsUnixSocketAddress("unixhost:7420"));
}

}  // namespace
}  // namespace kfuse
