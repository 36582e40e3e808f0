#include "cache/fleet.h"

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "cache/fleet_test_util.h"
#include "cache/store_entry.h"
#include "cache/store_test_util.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using store_testing::TestBlob;
using store_testing::TestKey;
using store_testing::TestMeta;

// One server for the whole binary run of this suite.
class FleetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pg_ = new testing::EphemeralPostgres(); }
  static void TearDownTestSuite() {
    delete pg_;
    pg_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(pg_->port(), 0) << pg_->error(); }

  static std::unique_ptr<FleetStore> Open(const std::string& user = "kfuse_writer", const std::string& holder = "a",
                                          bool read_only = false) {
    FleetOptions o;
    o.dsn = pg_->Dsn(user);
    o.holder = holder;
    o.read_only = read_only;
    return FleetStore::Create(o);
  }
  static v1::StoreEntry Entry(const std::string& chain, const std::string& blob_seed,
                              Store::Kind kind = Store::Kind::kArtifact) {
    v1::StoreEntry e = MakeStoreEntry(kind, TestKey(chain), TestMeta(), TestBlob(blob_seed, 3000),
                                      EntryOrigin{"node-a", 1764470000123, "0.1.0"});
    e.set_signer(std::string(32, '\x07'));
    e.set_signature(std::string(64, '\x09'));
    return e;
  }

  static testing::EphemeralPostgres* pg_;
};
testing::EphemeralPostgres* FleetTest::pg_ = nullptr;

TEST_F(FleetTest, PublishThenGetRoundTripsEveryField) {
  auto fleet = Open();
  v1::StoreEntry e = Entry("round-trip", "blob-1");
  ASSERT_TRUE(fleet->Publish(e).ok());
  auto got = fleet->Get(Store::Kind::kArtifact, e.key());
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->SerializeAsString(), e.SerializeAsString());
  EXPECT_TRUE(fleet->up());
  // The same key as a decision is another entry: absent.
  auto other = fleet->Get(Store::Kind::kDecision, e.key());
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->has_value());
}

TEST_F(FleetTest, PublishingIsIdempotentAndNeverRewrites) {
  auto fleet = Open();
  v1::StoreEntry first = Entry("idempotent", "first");
  ASSERT_TRUE(fleet->Publish(first).ok());
  ASSERT_TRUE(fleet->Publish(first).ok());
  v1::StoreEntry second = Entry("idempotent", "second");  // Same key, other blob.
  ASSERT_TRUE(fleet->Publish(second).ok());
  auto got = fleet->Get(Store::Kind::kArtifact, first.key());
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->blob(), first.blob());
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_entries WHERE chain = 'idempotent'"), "1");
  // The losing publisher's blob is not left behind without an entry.
  ASSERT_NE(first.blob_sha256(), second.blob_sha256());
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_blobs WHERE sha256 = '" + second.blob_sha256() + "'"), "0");
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_blobs WHERE sha256 = '" + first.blob_sha256() + "'"), "1");
}

TEST_F(FleetTest, BlobsAreContentAddressed) {
  auto fleet = Open();
  v1::StoreEntry a = Entry("shared-blob-a", "same-bytes");
  v1::StoreEntry b = Entry("shared-blob-b", "same-bytes");
  ASSERT_EQ(a.blob_sha256(), b.blob_sha256());
  ASSERT_TRUE(fleet->Publish(a).ok());
  ASSERT_TRUE(fleet->Publish(b).ok());
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_blobs WHERE sha256 = '" + a.blob_sha256() + "'"), "1");
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_entries WHERE blob_sha256 = '" + a.blob_sha256() + "'"), "2");
}

TEST_F(FleetTest, ConcurrentPublishersOfOneEntryAllSucceed) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto fleet = Open("kfuse_writer", absl::StrCat("n", i));
      if (fleet->Publish(Entry("concurrent", "one-blob")).ok()) ok.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_entries WHERE chain = 'concurrent'"), "1");
}

TEST_F(FleetTest, OneLeaseHolderPerKeyUntilReleasedOrExpired) {
  auto a = Open("kfuse_writer", "node-a");
  auto b = Open("kfuse_writer", "node-b");
  ASSERT_EQ(*a->TryLease("k1", 30), true);
  EXPECT_EQ(*b->TryLease("k1", 30), false);
  EXPECT_EQ(*a->TryLease("k1", 30), true);  // Ours: extended.
  ASSERT_TRUE(b->ReleaseLease("k1").ok());   // Not b's: no effect.
  EXPECT_EQ(*b->TryLease("k1", 30), false);
  ASSERT_TRUE(a->ReleaseLease("k1").ok());
  EXPECT_EQ(*b->TryLease("k1", 30), true);

  ASSERT_EQ(*a->TryLease("k2", 0.2), true);
  EXPECT_EQ(*b->TryLease("k2", 30), false);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(*b->TryLease("k2", 30), true);  // a's lease expired: taken over.
  EXPECT_EQ(*a->TryLease("k2", 30), false);
}

TEST_F(FleetTest, RenewingExtendsOnlyLeasesStillOurs) {
  auto a = Open("kfuse_writer", "renew-a");
  auto b = Open("kfuse_writer", "renew-b");
  ASSERT_EQ(*a->TryLease("r1", 0.3), true);
  ASSERT_EQ(*a->TryLease("r2", 30), true);
  ASSERT_EQ(*b->TryLease("r3", 30), true);
  ASSERT_TRUE(a->ReleaseLease("r2").ok());
  auto renewed = a->RenewLeases({"r1", "r2", "r3", "r4"}, 30);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_EQ(*renewed, (std::vector<std::string>{"r1"}));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // r1's first 0.3 s are over.
  EXPECT_EQ(*b->TryLease("r1", 30), false);  // Renewed: still a's.
  EXPECT_EQ(*b->TryLease("r2", 30), true);   // Given back: not taken again by the renewal.
  EXPECT_EQ(*a->RenewLeases({}, 30), std::vector<std::string>{});
}

TEST_F(FleetTest, ManyNodesRacingForOneLeaseGetExactlyOne) {
  std::vector<std::thread> threads;
  std::atomic<int> winners{0};
  for (int i = 0; i < 10; ++i) {
    threads.emplace_back([&, i] {
      auto fleet = Open("kfuse_writer", absl::StrCat("racer-", i));
      absl::StatusOr<bool> got = fleet->TryLease("raced-key", 30);
      if (got.ok() && *got) winners.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(winners.load(), 1);
}

TEST_F(FleetTest, ReaderRoleReadsButCannotWrite) {
  auto writer = Open();
  v1::StoreEntry e = Entry("reader-role", "r");
  ASSERT_TRUE(writer->Publish(e).ok());
  auto reader = Open("kfuse_reader");
  auto got = reader->Get(Store::Kind::kArtifact, e.key());
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  // The database refuses, whatever the node believes it is.
  absl::Status s = reader->Publish(Entry("reader-role-2", "r2"));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_TRUE(reader->up());  // A refused write is not an outage.
  // A node configured read-only never tries.
  auto read_only = Open("kfuse_reader", "ro", /*read_only=*/true);
  EXPECT_EQ(read_only->Publish(e).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(read_only->TryLease("k", 1).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(FleetTest, DatabaseWithoutSchemaIsNamed) {
  ASSERT_EQ(pg_->Query("CREATE DATABASE empty_db", "postgres"), "");
  FleetOptions o;
  o.dsn = pg_->Dsn("postgres", "empty_db");
  auto fleet = FleetStore::Create(o);
  auto got = fleet->Get(Store::Kind::kArtifact, "x");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(got.status().message().find("fleet.sql"), std::string::npos) << got.status();
}

TEST_F(FleetTest, OutageFailsFastThenRecovers) {
  absl::Mutex mu;
  std::vector<bool> states;
  FleetOptions o;
  o.dsn = pg_->Dsn();
  o.holder = "outage";
  o.retry_min_seconds = 0.2;
  o.retry_max_seconds = 0.4;
  o.on_state_change = [&](bool up, const absl::Status&) {
    absl::MutexLock l(&mu);
    states.push_back(up);
  };
  auto fleet = FleetStore::Create(o);
  v1::StoreEntry e = Entry("outage", "o");
  ASSERT_TRUE(fleet->Publish(e).ok());

  ASSERT_EQ(pg_->Kill(), 0);
  auto down = fleet->Get(Store::Kind::kArtifact, e.key());
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  EXPECT_FALSE(fleet->up());
  // In the pause a call does not touch the network.
  auto t0 = std::chrono::steady_clock::now();
  auto fast = fleet->Get(Store::Kind::kArtifact, e.key());
  EXPECT_EQ(fast.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));

  ASSERT_EQ(pg_->Restart(), 0);
  absl::StatusOr<std::optional<v1::StoreEntry>> back = absl::UnavailableError("not yet");
  for (int i = 0; i < 50 && !back.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    back = fleet->Get(Store::Kind::kArtifact, e.key());
  }
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->has_value());  // Published before the crash: still there.
  EXPECT_TRUE(fleet->up());
  absl::MutexLock l(&mu);
  EXPECT_EQ(states, (std::vector<bool>{true, false, true}));
}

TEST_F(FleetTest, PooledConnectionClosedByTheServerIsNoOutage) {
  std::vector<bool> states;
  FleetOptions o;
  o.dsn = pg_->Dsn();
  o.holder = "pooled";
  o.on_state_change = [&](bool up, const absl::Status&) { states.push_back(up); };
  auto fleet = FleetStore::Create(o);
  v1::StoreEntry e = Entry("pooled", "p");
  ASSERT_TRUE(fleet->Publish(e).ok());  // Its connection is now idle in the pool.
  // The server ends every kfused session (an idle timeout, a failover).
  EXPECT_NE(pg_->Query("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                       " WHERE application_name = 'kfused'"),
            "0");
  auto got = fleet->Get(Store::Kind::kArtifact, e.key());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->has_value());
  EXPECT_TRUE(fleet->up());
  EXPECT_EQ(states, (std::vector<bool>{true}));
}

TEST_F(FleetTest, UnreachableServerIsUnavailableNotAnError) {
  FleetOptions o;
  o.dsn = "host=127.0.0.1 port=1 dbname=kfuse user=kfuse_writer";
  auto fleet = FleetStore::Create(o);
  EXPECT_EQ(fleet->Get(Store::Kind::kArtifact, "k").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(fleet->Publish(Entry("x", "y")).code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(fleet->up());
}

TEST(FleetDsnTest, DisplayHidesPasswords) {
  FleetOptions o;
  o.dsn = "host=pg password=hunter2 dbname=kfuse";
  EXPECT_EQ(FleetStore::Create(o)->DisplayDsn(), "host=pg password=*** dbname=kfuse");
  o.dsn = "host=pg password='a b' user=x";
  EXPECT_EQ(FleetStore::Create(o)->DisplayDsn(), "host=pg password=*** user=x");
  o.dsn = "postgresql://kfuse:hunter2@pg:5432/kfuse";
  EXPECT_EQ(FleetStore::Create(o)->DisplayDsn(), "postgresql://kfuse:***@pg:5432/kfuse");
  o.dsn = "postgresql://pg/kfuse";
  EXPECT_EQ(FleetStore::Create(o)->DisplayDsn(), "postgresql://pg/kfuse");
  o.dsn = "postgresql://pg/kfuse?user=k&password=hunter2&sslmode=require";
  EXPECT_EQ(FleetStore::Create(o)->DisplayDsn(), "postgresql://pg/kfuse?user=k&password=***&sslmode=require");
  o.dsn = "postgresql://pg/kfuse?PASSWORD=hunter2";
  EXPECT_EQ(FleetStore::Create(o)->DisplayDsn(), "postgresql://pg/kfuse?PASSWORD=***");
  o.dsn = "postgresql://u@pg/kfuse?password=a@b:c";
  EXPECT_EQ(FleetStore::Create(o)->DisplayDsn(), "postgresql://u@pg/kfuse?password=***");
  o.dsn = "host=pg password = 'it\\'s secret' dbname=kfuse";
  EXPECT_EQ(FleetStore::Create(o)->DisplayDsn(), "host=pg password = *** dbname=kfuse");
  o.dsn = "host=pg passwordfile=/x password=hunter2";
  EXPECT_EQ(FleetStore::Create(o)->DisplayDsn(), "host=pg passwordfile=/x password=***");
  o.dsn = "host=pg password=x://y dbname=kfuse";  // Keywords, whatever the value holds.
  EXPECT_EQ(FleetStore::Create(o)->DisplayDsn(), "host=pg password=*** dbname=kfuse");
}

}  // namespace
}  // namespace kfuse
