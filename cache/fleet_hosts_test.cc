#include "cache/fleet_hosts.h"

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <vector>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

// A resolver of fixed answers; a name it does not know fails.
HostResolver Table(std::map<std::string, std::vector<std::string>> table) {
  return [table](const std::string& host) -> absl::StatusOr<std::vector<std::string>> {
    auto it = table.find(host);
    if (it == table.end()) return absl::UnavailableError(absl::StrCat("no host \"", host, "\""));
    return it->second;
  };
}

TEST(FleetHostsTest, EachNameGivesOneEntryAnAddressWithItsPort) {
  const HostResolver resolve = Table({{"pg-a", {"10.0.0.1", "fd00::1"}}, {"pg-b", {"10.0.0.2"}}});
  auto one = LookUpHosts("host=pg-a port=5433 dbname=kfuse", absl::Seconds(2), resolve);
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(one->has_value());
  EXPECT_EQ((*one)->host, "pg-a,pg-a");
  EXPECT_EQ((*one)->hostaddr, "10.0.0.1,fd00::1");
  EXPECT_FALSE((*one)->port.has_value());  // One port serves every entry.

  // One port a host: repeated with its host. A socket and a numeric
  // address keep an empty hostaddr (libpq needs no lookup for them).
  auto many = LookUpHosts("host=pg-a,/run/pg,10.1.1.1,pg-b port=1,2,3,4 dbname=kfuse", absl::Seconds(2), resolve);
  ASSERT_TRUE(many.ok()) << many.status();
  ASSERT_TRUE(many->has_value());
  EXPECT_EQ((*many)->host, "pg-a,pg-a,/run/pg,10.1.1.1,pg-b");
  EXPECT_EQ((*many)->hostaddr, "10.0.0.1,fd00::1,,,10.0.0.2");
  EXPECT_EQ((*many)->port, "1,1,2,3,4");
}

TEST(FleetHostsTest, NothingToLookUpLeavesTheDsnToLibpq) {
  std::atomic<int> calls{0};
  const HostResolver counting = [&calls](const std::string&) -> absl::StatusOr<std::vector<std::string>> {
    ++calls;
    return std::vector<std::string>{"10.0.0.9"};
  };
  for (const char* dsn : {"host=127.0.0.1 dbname=kfuse", "host=/var/run/postgresql", "host=::1,10.0.0.1",
                          "host=pg hostaddr=10.0.0.3", "service=fleet", "host=a,b port=1,2,3",
                          "not a dsn = '"}) {
    auto r = LookUpHosts(dsn, absl::Seconds(2), counting);
    ASSERT_TRUE(r.ok()) << dsn << ": " << r.status();
    EXPECT_FALSE(r->has_value()) << dsn;
  }
  EXPECT_EQ(calls.load(), 0);
}

TEST(FleetHostsTest, AFailedNameIsDroppedWhileAnotherHostIsLeft) {
  const HostResolver resolve = Table({{"pg-b", {"10.0.0.2"}}});
  auto r = LookUpHosts("host=gone,pg-b port=7,8", absl::Seconds(2), resolve);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->host, "pg-b");
  EXPECT_EQ((*r)->hostaddr, "10.0.0.2");
  EXPECT_EQ((*r)->port, "8");

  auto none = LookUpHosts("host=gone", absl::Seconds(2), resolve);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("no host \"gone\""));
}

// The point of it all: a resolver that does not answer costs the connect
// timeout, not its own retries.
TEST(FleetHostsTest, ALookupThatDoesNotAnswerIsUnavailableAtTheTimeout) {
  const HostResolver stuck = [](const std::string&) -> absl::StatusOr<std::vector<std::string>> {
    std::this_thread::sleep_for(std::chrono::seconds(5));
    return std::vector<std::string>{"10.0.0.1"};
  };
  const absl::Time start = absl::Now();
  auto r = LookUpHosts("host=slow.example dbname=kfuse", absl::Milliseconds(300), stuck);
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("looking up host \"slow.example\" took more than 300ms (the connect timeout)"));
  EXPECT_LT(took, absl::Seconds(3));
}

TEST(FleetHostsTest, LookUpHostGivesNumericAddresses) {
  auto local = LookUpHost("localhost");
  ASSERT_TRUE(local.ok()) << local.status();
  ASSERT_FALSE(local->empty());
  for (const std::string& a : *local) EXPECT_TRUE(a == "127.0.0.1" || a == "::1") << a;
  EXPECT_EQ(LookUpHost("no-such-host.invalid").status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace kfuse
