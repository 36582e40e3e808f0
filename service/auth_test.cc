// Token checks and the loopback test kfused applies before listening.
#include "service/auth.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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

TEST(CheckListenAddress, PortsAndForms) {
  for (const char* ok : {"127.0.0.1:7420", "127.0.0.1:0", "[::1]:65535", "0.0.0.0:1", "unix:/run/k.sock"}) {
    EXPECT_TRUE(CheckListenAddress("--address", ok).ok()) << ok;
  }
  for (const char* bad : {"127.0.0.1:99999", "127.0.0.1:65536", "127.0.0.1:", "127.0.0.1", ":7420",
                          "127.0.0.1:-1", "127.0.0.1:7x", "127.0.0.1:000070000"}) {
    absl::Status s = CheckListenAddress("--address", bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StartsWith(s.message(), absl::StrCat("--address ", bad, ": "))) << s;
  }
  EXPECT_TRUE(CheckMetricsAddress("--metrics_address", "9420").ok());  // A bare port, as the HTTP server takes.
  EXPECT_TRUE(CheckMetricsAddress("--metrics_address", "0.0.0.0:9420").ok());
  EXPECT_FALSE(CheckMetricsAddress("--metrics_address", "99999").ok());
  EXPECT_FALSE(CheckMetricsAddress("--metrics_address", "unix:/run/m.sock").ok());
  EXPECT_EQ(WithPort("127.0.0.1:0", 41234), "127.0.0.1:41234");
  EXPECT_EQ(WithPort("[::1]:0", 7), "[::1]:7");
  EXPECT_EQ(WithPort("unix:/run/k.sock", 0), "unix:/run/k.sock");
}

TEST(CheckAddressFree, AnAddressInUseIsSaidInOneLine) {
  // A listener on a free port of the loopback address, as another kfused.
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string address = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
  absl::Status busy = CheckAddressFree("--address", address);
  EXPECT_EQ(busy.code(), absl::StatusCode::kFailedPrecondition) << busy;
  EXPECT_EQ(busy.message(),
            absl::StrCat("cannot listen on ", address, " (--address): the address is in use (another kfused?)"));
  close(fd);
  EXPECT_TRUE(CheckAddressFree("--address", address).ok());
  // What it leaves to the listener: any port, unix sockets, malformed addresses.
  EXPECT_TRUE(CheckAddressFree("--address", "127.0.0.1:0").ok());
  EXPECT_TRUE(CheckAddressFree("--address", "unix:/tmp/kfuse.sock").ok());
  EXPECT_TRUE(CheckAddressFree("--address", "no-port").ok());
}

TEST(IsUnixSocketAddress, Prefixes) {
  EXPECT_TRUE(IsUnixSocketAddress("unix:/run/kfused.sock"));
  EXPECT_TRUE(IsUnixSocketAddress("unix-abstract:kfused"));
  EXPECT_FALSE(IsUnixSocketAddress("127.0.0.1:7420"));
  EXPECT_FALSE(IsUnixSocketAddress("unixhost:7420"));
}

}  // namespace
}  // namespace kfuse
