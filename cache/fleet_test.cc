#include "cache/fleet.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "cache/fleet_test_util.h"
#include "cache/store_entry.h"
#include "cache/store_test_util.h"
#include "core/log.h"
#include "gmock/gmock.h"
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
                              Store::Kind kind = Store::Kind::kArtifact, char signer = kSigner) {
    v1::StoreEntry e = MakeStoreEntry(kind, TestKey(chain), TestMeta(), TestBlob(blob_seed, 3000),
                                      EntryOrigin{"node-a", 1764470000123, "0.1.0"});
    e.set_signer(std::string(32, signer));
    e.set_signature(std::string(64, '\x09'));
    return e;
  }
  // The entries under (kind, key) by the signers given as their fill bytes.
  static absl::StatusOr<std::vector<v1::StoreEntry>> Rows(FleetStore& fleet, Store::Kind kind, const std::string& key,
                                                          const std::string& signers = std::string(1, kSigner)) {
    std::vector<std::string> keys;
    for (char c : signers) keys.emplace_back(32, c);
    return fleet.Get(kind, key, keys);
  }
  // What a publish did: "published", "present" (an entry was there) or the
  // error.
  static std::string Outcome(FleetStore& fleet, const v1::StoreEntry& e) {
    absl::StatusOr<bool> published = fleet.Publish(e);
    if (!published.ok()) return published.status().ToString();
    return *published ? "published" : "present";
  }

  static constexpr char kSigner = '\x07';

  static testing::EphemeralPostgres* pg_;
};
testing::EphemeralPostgres* FleetTest::pg_ = nullptr;

TEST_F(FleetTest, PublishThenGetRoundTripsEveryField) {
  auto fleet = Open();
  v1::StoreEntry e = Entry("round-trip", "blob-1");
  ASSERT_TRUE(fleet->Publish(e).ok());
  auto got = Rows(*fleet, Store::Kind::kArtifact, e.key());
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].SerializeAsString(), e.SerializeAsString());
  EXPECT_TRUE(fleet->up());
  // The same key as a decision is another entry: absent.
  auto other = Rows(*fleet, Store::Kind::kDecision, e.key());
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->empty());
}

TEST_F(FleetTest, PublishingIsIdempotentAndNeverRewrites) {
  auto fleet = Open();
  v1::StoreEntry first = Entry("idempotent", "first");
  ASSERT_EQ(Outcome(*fleet, first), "published");
  ASSERT_EQ(Outcome(*fleet, first), "present");
  v1::StoreEntry second = Entry("idempotent", "second");  // Same key, other blob.
  ASSERT_EQ(Outcome(*fleet, second), "present");
  auto got = Rows(*fleet, Store::Kind::kArtifact, first.key());
  ASSERT_TRUE(got.ok() && got->size() == 1);
  EXPECT_EQ((*got)[0].blob(), first.blob());
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

// A key holds one entry per signer: a row by a signer a node does not trust
// (another trust domain, a key taken out of service) never stands in the
// place of the entry a trusted node publishes.
TEST_F(FleetTest, EachSignerHasItsOwnEntryUnderAKey) {
  auto fleet = Open();
  v1::StoreEntry mine = Entry("per-signer", "mine", Store::Kind::kArtifact, '\x07');
  v1::StoreEntry theirs = Entry("per-signer", "theirs", Store::Kind::kArtifact, '\x08');
  ASSERT_EQ(mine.key(), theirs.key());
  ASSERT_EQ(Outcome(*fleet, theirs), "published");
  ASSERT_EQ(Outcome(*fleet, mine), "published");  // Beside theirs.
  auto just_mine = Rows(*fleet, Store::Kind::kArtifact, mine.key(), "\x07");
  ASSERT_TRUE(just_mine.ok()) << just_mine.status();
  ASSERT_EQ(just_mine->size(), 1u);
  EXPECT_EQ((*just_mine)[0].blob(), mine.blob());
  auto both = Rows(*fleet, Store::Kind::kArtifact, mine.key(), "\x07\x08");
  ASSERT_TRUE(both.ok() && both->size() == 2u);
  EXPECT_EQ((*both)[0].blob(), theirs.blob());  // First published first.
  EXPECT_EQ((*both)[1].blob(), mine.blob());
  EXPECT_TRUE(Rows(*fleet, Store::Kind::kArtifact, mine.key(), "\x05")->empty());
  EXPECT_EQ(*fleet->Count(Store::Kind::kArtifact, mine.key()), 2);
  EXPECT_EQ(*fleet->Count(Store::Kind::kDecision, mine.key()), 0);
}

// Bytes filed under the hash of a blob a node will publish would stand in
// its place (blobs are never rewritten): the database refuses them.
TEST_F(FleetTest, BlobsMustMatchTheirHash) {
  v1::StoreEntry e = Entry("squatted", "real-bytes");
  const std::string out =
      pg_->Query("INSERT INTO kfuse_blobs (sha256, bytes, data) VALUES ('" + e.blob_sha256() + "', 5, 'bogus')");
  EXPECT_NE(out.find("kfuse_blobs_sha256_matches"), std::string::npos) << out;
  auto fleet = Open();
  ASSERT_TRUE(fleet->Publish(e).ok());
  auto got = Rows(*fleet, Store::Kind::kArtifact, e.key());
  ASSERT_TRUE(got.ok() && got->size() == 1u) << got.status();
  EXPECT_EQ((*got)[0].blob(), e.blob());
}

// The fleet schema before signers shared a key (version 1).
constexpr char kSchemaOne[] = R"sql(
CREATE TABLE kfuse_fleet_meta (schema_version integer NOT NULL);
INSERT INTO kfuse_fleet_meta VALUES (1);
CREATE TABLE kfuse_blobs (sha256 text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'), bytes bigint NOT NULL,
                          data bytea NOT NULL);
CREATE TABLE kfuse_entries (kind text NOT NULL CHECK (kind IN ('decision', 'artifact')), key text NOT NULL,
  chain text NOT NULL, spec text NOT NULL, device text NOT NULL, toolchain text NOT NULL, generator text NOT NULL,
  family text NOT NULL, arch text NOT NULL, device_name text NOT NULL, state text NOT NULL,
  description text NOT NULL, blob_sha256 text NOT NULL REFERENCES kfuse_blobs (sha256), node text NOT NULL,
  created_unix_ms bigint NOT NULL, kfuse_version text NOT NULL, published_at timestamptz NOT NULL DEFAULT now(),
  signer bytea NOT NULL, signature bytea NOT NULL, PRIMARY KEY (kind, key));
CREATE INDEX kfuse_entries_chain ON kfuse_entries (chain);
CREATE TABLE kfuse_leases (key text PRIMARY KEY, holder text NOT NULL, expires_at timestamptz NOT NULL);
)sql";

// A database of schema 1 named `db`, made afresh.
void MakeSchemaOneDatabase(testing::EphemeralPostgres& pg, const std::string& db) {
  char path[] = "/tmp/kfuse-fleet-v1-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << kSchemaOne;
  ASSERT_EQ(pg.Query("CREATE DATABASE " + db, "postgres"), "");
  ASSERT_EQ(pg.ApplyFile(path, db), 0);
  std::remove(path);
}

// fleet.sql applied to a schema-1 database migrates it; this binary speaks
// both, so nodes are upgraded before the database.
TEST_F(FleetTest, SchemaOneIsSpokenThenMigratedToTwo) {
  MakeSchemaOneDatabase(*pg_, "fleet_v1");

  FleetOptions o;
  o.dsn = pg_->Dsn("postgres", "fleet_v1");
  o.holder = "v1";
  auto fleet = FleetStore::Create(o);
  v1::StoreEntry first = Entry("schema-one", "first", Store::Kind::kArtifact, '\x08');
  v1::StoreEntry second = Entry("schema-one", "second", Store::Kind::kArtifact, '\x07');
  ASSERT_EQ(Outcome(*fleet, first), "published");
  ASSERT_EQ(Outcome(*fleet, second), "present");  // Schema 1: the key's first entry stands for every signer.
  EXPECT_EQ(*fleet->Count(Store::Kind::kArtifact, first.key()), 1);
  // Schema 1 took any bytes under a hash; an entry published on them.
  v1::StoreEntry squatted = Entry("schema-one-squatted", "s");
  ASSERT_EQ(pg_->Query("INSERT INTO kfuse_blobs (sha256, bytes, data) VALUES ('" + squatted.blob_sha256() +
                           "', 5, 'bogus')",
                       "fleet_v1"),
            "");
  ASSERT_TRUE(fleet->Publish(squatted).ok());
  ASSERT_EQ(*fleet->Count(Store::Kind::kArtifact, squatted.key()), 1);

  ASSERT_EQ(pg_->ApplyFile("deploy/postgres/fleet.sql", "fleet_v1"), 0);
  ASSERT_EQ(pg_->ApplyFile("deploy/postgres/fleet.sql", "fleet_v1"), 0);  // Idempotent.
  EXPECT_EQ(pg_->Query("SELECT schema_version FROM kfuse_fleet_meta", "fleet_v1"), "2");
  // The bogus blob went, with the entry on it; the rest stayed.
  EXPECT_EQ(*fleet->Count(Store::Kind::kArtifact, squatted.key()), 0);
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_blobs WHERE sha256 = '" + squatted.blob_sha256() + "'", "fleet_v1"),
            "0");
  // Now the second signer's entry goes in beside the first.
  ASSERT_EQ(Outcome(*fleet, second), "published");
  auto both = Rows(*fleet, Store::Kind::kArtifact, first.key(), "\x07\x08");
  ASSERT_TRUE(both.ok() && both->size() == 2u) << both.status();
  EXPECT_EQ((*both)[0].blob(), first.blob());

  // A schema this binary does not speak is named, with the ones it does.
  ASSERT_EQ(pg_->Query("UPDATE kfuse_fleet_meta SET schema_version = 3", "fleet_v1"), "");
  auto newer = FleetStore::Create(o)->Ping();
  EXPECT_EQ(newer.code(), absl::StatusCode::kFailedPrecondition) << newer;
  EXPECT_NE(newer.message().find("schema version 3; this kfused speaks 1 to 2"), std::string::npos) << newer;
}

// The migration to schema 2 run while nodes publish and read: its locks
// are taken in the nodes' order, so neither side deadlocks (PostgreSQL would
// abort one with "deadlock detected"); every publish lands.
TEST_F(FleetTest, MigratingWhileNodesPublishAndReadDeadlocksNeither) {
  MakeSchemaOneDatabase(*pg_, "fleet_busy");
  FleetOptions o;
  o.dsn = pg_->Dsn("postgres", "fleet_busy");
  std::atomic<bool> done{false};
  std::atomic<int> published{0};
  absl::Mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> nodes;
  for (int n = 0; n < 4; ++n) {
    nodes.emplace_back([&, n] {
      FleetOptions mine = o;
      mine.holder = absl::StrCat("n", n);
      auto fleet = FleetStore::Create(mine);
      for (int i = 0; !done.load() || i < 5; ++i) {
        v1::StoreEntry e = Entry(absl::StrCat("busy-", n, "-", i), absl::StrCat("b", n, "-", i));
        absl::StatusOr<bool> put = fleet->Publish(e);
        absl::StatusOr<std::vector<v1::StoreEntry>> got = Rows(*fleet, Store::Kind::kArtifact, e.key());
        absl::MutexLock lock(&mu);
        if (!put.ok()) errors.push_back(put.status().ToString());
        if (!got.ok()) errors.push_back(got.status().ToString());
        if (put.ok() && got.ok() && got->size() == 1u) published.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // Nodes busy first.
  const int rc = pg_->ApplyFile("deploy/postgres/fleet.sql", "fleet_busy");
  done = true;
  for (std::thread& t : nodes) t.join();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(pg_->Query("SELECT schema_version FROM kfuse_fleet_meta", "fleet_busy"), "2");
  EXPECT_TRUE(errors.empty()) << errors.size() << " failed; the first: " << errors.front();
  EXPECT_GE(published.load(), 20);
  EXPECT_EQ(pg_->Query("SELECT count(*) FROM kfuse_entries", "fleet_busy"), absl::StrCat(published.load()));
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

// stderr as JSON log lines while it lives; Take() ends the capture (the
// destructor does if a failed ASSERT returned first).
class CapturedLog {
 public:
  CapturedLog() {
    SetLogFormat(LogFormat::kJson);
    ::testing::internal::CaptureStderr();
  }
  ~CapturedLog() { Take(); }
  const std::string& Take() {
    if (!taken_) {
      taken_ = true;
      text_ = ::testing::internal::GetCapturedStderr();
      SetLogFormat(LogFormat::kText);
    }
    return text_;
  }

 private:
  bool taken_ = false;
  std::string text_;
};

size_t Events(const std::string& log, const std::string& event) {
  const std::string needle = "\"event\":\"" + event + "\"";
  size_t n = 0;
  for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
  return n;
}

// A reader login on a node not told it is read-only: its first connection
// finds the login cannot write, says so once, and the node reads only
// (publishes and leases refused untried, none of them a warning of the
// database's). A node configured read-only says nothing of its login.
TEST_F(FleetTest, AReaderLoginReadsOnlyAndSaysSoOnce) {
  auto writer = Open();
  v1::StoreEntry e = Entry("reader-role", "r");
  ASSERT_TRUE(writer->Publish(e).ok());
  EXPECT_FALSE(writer->read_only());
  CapturedLog log;
  auto reader = Open("kfuse_reader");
  EXPECT_FALSE(reader->read_only());  // Not known before it connects.
  auto got = Rows(*reader, Store::Kind::kArtifact, e.key());
  ASSERT_TRUE(got.ok() && got->size() == 1) << got.status();
  EXPECT_TRUE(reader->read_only());
  for (int i = 0; i < 3; ++i) {
    absl::Status s = reader->Publish(Entry("reader-role-2", "r2")).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "login cannot write")) << s;
    EXPECT_EQ(reader->TryLease("k", 1).status().code(), absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_TRUE(reader->up());  // Reading only is not an outage.
  const std::string& logged = log.Take();
  EXPECT_EQ(Events(logged, "fleet_login_read_only"), 1u) << logged;
  EXPECT_TRUE(absl::StrContains(logged, "login kfuse_reader may not write the fleet's tables")) << logged;
  EXPECT_TRUE(absl::StrContains(logged, "--fleet_read_only")) << logged;

  CapturedLog quiet;
  auto read_only = Open("kfuse_reader", "ro", /*read_only=*/true);
  EXPECT_EQ(read_only->Publish(e).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(read_only->TryLease("k", 1).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Rows(*read_only, Store::Kind::kArtifact, e.key()).ok());
  EXPECT_EQ(Events(quiet.Take(), "fleet_login_read_only"), 0u);
}

// A writer's grants, but transactions read-only by default (as
// deploy/postgres/roles.sql makes kfuse_reader, should a write grant slip
// through): found at the first connection too, and named.
TEST_F(FleetTest, ALoginWhoseTransactionsAreReadOnlyReadsOnly) {
  ASSERT_EQ(pg_->Query("SET client_min_messages = warning; DROP ROLE IF EXISTS kfuse_ro_writer;"
                       " CREATE ROLE kfuse_ro_writer LOGIN IN ROLE kfuse_fleet_writer;"
                       " ALTER ROLE kfuse_ro_writer SET default_transaction_read_only = on"),
            "");
  {
    CapturedLog log;
    auto node = Open("kfuse_ro_writer", "ro-writer");
    absl::Status s = node->Publish(Entry("ro-writer", "w")).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_TRUE(node->read_only());
    const std::string& logged = log.Take();
    EXPECT_EQ(Events(logged, "fleet_login_read_only"), 1u) << logged;
    EXPECT_TRUE(absl::StrContains(logged, "transactions are read-only")) << logged;
  }
  EXPECT_EQ(pg_->Query("DROP ROLE kfuse_ro_writer"), "");
}

// A grant revoked under an open connection that found the login could
// write: the database's refusal is PermissionDenied, that write only, no
// outage, and it makes the node read only (said once); a write let through
// after write_probe_seconds finds the grant back and the node writes again.
TEST_F(FleetTest, ARevokedGrantMakesTheNodeReadOnlyUntilAProbeFindsItBack) {
  ASSERT_EQ(pg_->Query("SET client_min_messages = warning; DROP ROLE IF EXISTS kfuse_flip;"
                       " CREATE ROLE kfuse_flip LOGIN IN ROLE kfuse_fleet_writer"),
            "");
  {
    std::vector<bool> changes;
    absl::Mutex mu;
    FleetOptions o;
    o.dsn = pg_->Dsn("kfuse_flip");
    o.holder = "flip";
    o.write_probe_seconds = 0.3;
    o.on_write_change = [&](bool writable, const std::string&) {
      absl::MutexLock lock(&mu);
      changes.push_back(writable);
    };
    auto node = FleetStore::Create(o);
    CapturedLog log;
    ASSERT_TRUE(node->Publish(Entry("flip-1", "f1")).ok());
    ASSERT_EQ(pg_->Query("REVOKE kfuse_fleet_writer FROM kfuse_flip; GRANT kfuse_fleet_reader TO kfuse_flip"), "");
    absl::Status refused = node->Publish(Entry("flip-2", "f2")).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
    EXPECT_TRUE(node->up());
    EXPECT_TRUE(node->read_only());
    EXPECT_EQ(node->Publish(Entry("flip-3", "f3")).status().code(), absl::StatusCode::kFailedPrecondition);
    ASSERT_EQ(pg_->Query("GRANT kfuse_fleet_writer TO kfuse_flip"), "");
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    EXPECT_FALSE(node->read_only());
    absl::StatusOr<bool> again = node->Publish(Entry("flip-4", "f4"));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(*again);
    const std::string& logged = log.Take();
    EXPECT_EQ(Events(logged, "fleet_login_read_only"), 1u) << logged;
    EXPECT_EQ(Events(logged, "fleet_login_writable"), 1u) << logged;
    absl::MutexLock lock(&mu);
    EXPECT_EQ(changes, (std::vector<bool>{false, true}));
  }
  EXPECT_EQ(pg_->Query("DROP ROLE kfuse_flip"), "");
}

// A write refused for a reason of its own (a row-level security policy,
// SQLSTATE 42501 as a revoked grant is) by a login that can write: that
// write fails alone, PermissionDenied; the node keeps publishing.
TEST_F(FleetTest, AWriteARowPolicyRefusesFailsAloneAndTheNodeStaysWritable) {
  ASSERT_EQ(pg_->Query("SET client_min_messages = warning; DROP ROLE IF EXISTS kfuse_rls;"
                       " CREATE ROLE kfuse_rls LOGIN IN ROLE kfuse_fleet_writer;"
                       " ALTER TABLE kfuse_entries ENABLE ROW LEVEL SECURITY;"
                       " CREATE POLICY kfuse_rls_decisions ON kfuse_entries TO kfuse_rls"
                       " USING (true) WITH CHECK (kind = 'decision');"
                       " CREATE POLICY kfuse_rls_others ON kfuse_entries TO PUBLIC"
                       " USING (current_user <> 'kfuse_rls') WITH CHECK (current_user <> 'kfuse_rls')"),
            "");
  {
    CapturedLog log;
    auto node = Open("kfuse_rls", "rls");
    absl::Status refused = node->Publish(Entry("rls-artifact", "a")).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
    EXPECT_FALSE(node->read_only());
    absl::StatusOr<bool> decision = node->Publish(Entry("rls-decision", "d", Store::Kind::kDecision));
    ASSERT_TRUE(decision.ok()) << decision.status();
    EXPECT_TRUE(*decision);
    EXPECT_EQ(Events(log.Take(), "fleet_login_read_only"), 0u);
  }
  EXPECT_EQ(pg_->Query("DROP POLICY kfuse_rls_decisions ON kfuse_entries; DROP POLICY kfuse_rls_others ON kfuse_entries;"
                       " ALTER TABLE kfuse_entries DISABLE ROW LEVEL SECURITY; DROP ROLE kfuse_rls"),
            "");
}

// A server out of disk answers: the write fails (ResourceExhausted, that
// call only), the store stays up, and reads go on.
TEST_F(FleetTest, AServerOutOfDiskRefusesTheWriteAndIsNoOutage) {
  std::vector<bool> states;
  FleetOptions o;
  o.dsn = pg_->Dsn();
  o.holder = "disk";
  o.on_state_change = [&](bool up, const absl::Status&) { states.push_back(up); };
  auto fleet = FleetStore::Create(o);
  v1::StoreEntry kept = Entry("disk-kept", "d");
  ASSERT_TRUE(fleet->Publish(kept).ok());
  ASSERT_EQ(pg_->Query("CREATE FUNCTION kfuse_test_disk_full() RETURNS trigger LANGUAGE plpgsql AS"
                       " 'BEGIN RAISE EXCEPTION ''could not extend file'' USING ERRCODE = ''disk_full''; END';"
                       " CREATE TRIGGER kfuse_test_disk_full BEFORE INSERT ON kfuse_entries"
                       " FOR EACH ROW EXECUTE FUNCTION kfuse_test_disk_full()"),
            "");
  absl::Status full = fleet->Publish(Entry("disk-full", "f")).status();
  auto read = Rows(*fleet, Store::Kind::kArtifact, kept.key());
  pg_->Query("DROP TRIGGER kfuse_test_disk_full ON kfuse_entries; DROP FUNCTION kfuse_test_disk_full()");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_TRUE(absl::StrContains(full.message(), "53100")) << full;
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->size(), 1u);
  EXPECT_TRUE(fleet->up());
  EXPECT_EQ(states, (std::vector<bool>{true}));
}

// An error raised at commit (a deferred trigger or constraint) follows the
// statement's own result: the publish fails, as PQexec would report it.
TEST_F(FleetTest, AnErrorAtCommitFailsThePublish) {
  auto fleet = Open("kfuse_writer", "commit");
  ASSERT_EQ(pg_->Query("CREATE FUNCTION kfuse_test_refuse() RETURNS trigger LANGUAGE plpgsql AS"
                       " 'BEGIN RAISE EXCEPTION ''refused at commit''; END';"
                       " CREATE CONSTRAINT TRIGGER kfuse_test_refuse AFTER INSERT ON kfuse_entries"
                       " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION kfuse_test_refuse()"),
            "");
  absl::StatusOr<bool> published = fleet->Publish(Entry("commit-refused", "c"));
  pg_->Query("DROP TRIGGER kfuse_test_refuse ON kfuse_entries; DROP FUNCTION kfuse_test_refuse()");
  EXPECT_FALSE(published.ok());
  EXPECT_TRUE(absl::StrContains(published.status().message(), "refused at commit")) << published.status();
}

// A statement timeout the DSN sets (longer than ours) is the one whose
// answer is awaited: a slow statement within it is no outage.
TEST_F(FleetTest, TheSessionsStatementTimeoutIsTheOneAwaited) {
  FleetOptions o;
  o.dsn = pg_->Dsn() + " options='-c statement_timeout=10000'";
  o.holder = "slow";
  o.statement_timeout_ms = 500;  // Ours would give up after 2.5 s.
  auto fleet = FleetStore::Create(o);
  ASSERT_TRUE(fleet->Publish(Entry("slow-first", "s")).ok());  // Connects: the session's timeout is read.
  ASSERT_EQ(pg_->Query("CREATE FUNCTION kfuse_test_slow() RETURNS trigger LANGUAGE plpgsql AS"
                       " 'BEGIN PERFORM pg_sleep(3); RETURN NEW; END';"
                       " CREATE TRIGGER kfuse_test_slow BEFORE INSERT ON kfuse_entries"
                       " FOR EACH ROW EXECUTE FUNCTION kfuse_test_slow()"),
            "");
  absl::StatusOr<bool> published = fleet->Publish(Entry("slow-second", "t"));
  pg_->Query("DROP TRIGGER kfuse_test_slow ON kfuse_entries; DROP FUNCTION kfuse_test_slow()");
  EXPECT_TRUE(published.ok()) << published.status();
  EXPECT_TRUE(fleet->up());
}

TEST_F(FleetTest, DatabaseWithoutSchemaIsNamed) {
  ASSERT_EQ(pg_->Query("CREATE DATABASE empty_db", "postgres"), "");
  FleetOptions o;
  o.dsn = pg_->Dsn("postgres", "empty_db");
  auto fleet = FleetStore::Create(o);
  auto got = Rows(*fleet, Store::Kind::kArtifact, "x");
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
  auto down = Rows(*fleet, Store::Kind::kArtifact, e.key());
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable) << down.status();
  EXPECT_FALSE(fleet->up());
  // In the pause a call does not touch the network.
  auto t0 = std::chrono::steady_clock::now();
  auto fast = Rows(*fleet, Store::Kind::kArtifact, e.key());
  EXPECT_EQ(fast.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(50));

  ASSERT_EQ(pg_->Restart(), 0);
  absl::StatusOr<std::vector<v1::StoreEntry>> back = absl::UnavailableError("not yet");
  for (int i = 0; i < 50 && !back.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    back = Rows(*fleet, Store::Kind::kArtifact, e.key());
  }
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->size(), 1u);  // Published before the crash: still there.
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
  auto got = Rows(*fleet, Store::Kind::kArtifact, e.key());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), 1u);
  EXPECT_TRUE(fleet->up());
  EXPECT_EQ(states, (std::vector<bool>{true}));
}

// A server that stops answering without closing (stopped, swapped out, a
// partition the kernel still ACKs: no keepalive notices) holds a call only
// until its answer is overdue: Unavailable, an outage, and the connection
// with the statement in flight is not reused.
TEST_F(FleetTest, AServerThatStopsAnsweringIsAnOutageNotAHang) {
  std::vector<bool> states;
  FleetOptions o;
  o.dsn = pg_->Dsn() + " application_name=kfuse-hung-test";
  o.holder = "hung";
  o.statement_timeout_ms = 500;  // The answer is given up 2.5 s after the statement.
  o.retry_min_seconds = 0.2;
  o.on_state_change = [&](bool up, const absl::Status&) { states.push_back(up); };
  auto fleet = FleetStore::Create(o);
  v1::StoreEntry e = Entry("hung", "h");
  ASSERT_TRUE(fleet->Publish(e).ok());  // Its connection is now idle in the pool.
  int64_t pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      pg_->Query("SELECT pid FROM pg_stat_activity WHERE application_name = 'kfuse-hung-test'"), &pid));
  ASSERT_EQ(kill(static_cast<pid_t>(pid), SIGSTOP), 0);
  struct Resume {
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{static_cast<pid_t>(pid)};
  const auto t0 = std::chrono::steady_clock::now();
  auto hung = Rows(*fleet, Store::Kind::kArtifact, e.key());
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(hung.status().code(), absl::StatusCode::kUnavailable) << hung.status();
  EXPECT_TRUE(absl::StrContains(hung.status().message(), "no answer within 2500 ms")) << hung.status();
  EXPECT_GE(took, std::chrono::milliseconds(2400));
  EXPECT_LT(took, std::chrono::seconds(6));
  EXPECT_FALSE(fleet->up());
  // After the pause, a new connection serves; the stopped one is never used.
  absl::StatusOr<std::vector<v1::StoreEntry>> back = absl::UnavailableError("not yet");
  for (int i = 0; i < 30 && !back.ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    back = Rows(*fleet, Store::Kind::kArtifact, e.key());
  }
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->size(), 1u);
  EXPECT_EQ(states, (std::vector<bool>{true, false, true}));
}

TEST_F(FleetTest, UnreachableServerIsUnavailableNotAnError) {
  FleetOptions o;
  o.dsn = "host=127.0.0.1 port=1 dbname=kfuse user=kfuse_writer";
  auto fleet = FleetStore::Create(o);
  EXPECT_EQ(Rows(*fleet, Store::Kind::kArtifact, "k").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(fleet->Publish(Entry("x", "y")).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(fleet->up());
}

// The host's name is looked up by the store (within the connect timeout),
// and libpq connects to the address it gave: this name is known to no
// resolver but the test's.
TEST_F(FleetTest, AHostNameIsLookedUpByTheStore) {
  FleetOptions o;
  o.dsn = absl::StrCat("host=fleet-db.kfuse.test port=", pg_->port(), " dbname=kfuse user=kfuse_writer");
  o.resolve = [](const std::string& host) -> absl::StatusOr<std::vector<std::string>> {
    if (host != "fleet-db.kfuse.test") return absl::UnavailableError("unknown");
    return std::vector<std::string>{"127.0.0.1"};
  };
  auto fleet = FleetStore::Create(o);
  EXPECT_EQ(Outcome(*fleet, Entry("looked-up", "b")), "published");
  EXPECT_TRUE(fleet->up());
}

TEST_F(FleetTest, ALookupThatDoesNotAnswerIsAnOutageAtTheConnectTimeout) {
  FleetOptions o;
  o.dsn = "host=fleet-db.kfuse.test dbname=kfuse user=kfuse_writer";
  o.connect_timeout_seconds = 1;
  o.resolve = [](const std::string&) -> absl::StatusOr<std::vector<std::string>> {
    absl::SleepFor(absl::Seconds(6));
    return std::vector<std::string>{"127.0.0.1"};
  };
  auto fleet = FleetStore::Create(o);
  const absl::Time start = absl::Now();
  absl::Status s = Rows(*fleet, Store::Kind::kArtifact, "k").status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("looking up host \"fleet-db.kfuse.test\" took more"));
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
