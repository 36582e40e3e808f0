#include "cache/store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cache/schema.h"
#include "cache/store_test_util.h"
#include "core/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::kfuse::store_testing::FreshDbPath;
using ::kfuse::store_testing::TestBlob;
using ::kfuse::store_testing::TestKey;
using ::kfuse::store_testing::TestMeta;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Store> OpenOrDie(const StoreOptions& o) {
  auto s = Store::Open(o);
  KFUSE_CHECK(s.ok());
  return *std::move(s);
}

TEST(StoreTest, RoundTripsDecisionsAndArtifacts) {
  struct Case {
    const char* name;
    size_t size;
  };
  const Case cases[] = {{"empty", 0}, {"byte", 1}, {"small", 1000}, {"large", 300000}};
  auto store = OpenOrDie({.path = FreshDbPath("rt")});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    CacheKey k = TestKey(c.name);
    std::string d = TestBlob(absl::StrCat("d", c.name), c.size);
    std::string a = TestBlob(absl::StrCat("a", c.name), c.size);
    ASSERT_TRUE(store->PutDecision(k, d, TestMeta()).ok());
    ASSERT_TRUE(store->PutArtifact(k, a, TestMeta()).ok());
    auto gd = store->GetDecision(k);
    auto ga = store->GetArtifact(k);
    ASSERT_TRUE(gd.ok() && ga.ok());
    ASSERT_TRUE(gd->has_value() && ga->has_value());
    EXPECT_EQ(**gd, d);
    EXPECT_EQ(**ga, a);
    auto by_key = store->GetArtifactByKey(k.ArtifactKey());
    ASSERT_TRUE(by_key.ok() && by_key->has_value());
    EXPECT_EQ(**by_key, a);
  }
  auto miss = store->GetArtifact(TestKey("absent"));
  ASSERT_TRUE(miss.ok());
  EXPECT_FALSE(miss->has_value());
}

TEST(StoreTest, PutReplacesAndSurvivesReopen) {
  const std::string path = FreshDbPath("reopen");
  CacheKey k = TestKey("c");
  {
    auto store = OpenOrDie({.path = path});
    ASSERT_TRUE(store->PutArtifact(k, "heuristic", TestMeta("heuristic")).ok());
    ASSERT_TRUE(store->PutArtifact(k, "tuned", TestMeta("tuned")).ok());
  }
  auto store = OpenOrDie({.path = path});
  auto got = store->GetArtifact(k);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(**got, "tuned");
  auto total = store->TotalBytes();
  ASSERT_TRUE(total.ok());
  EXPECT_EQ(*total, 5);  // The replaced blob was collected.
  auto list = store->List("", 0);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].meta.state, "tuned");
}

TEST(StoreTest, DecisionSurvivesToolchainChangeArtifactMisses) {
  auto store = OpenOrDie({.path = FreshDbPath("tc")});
  CacheKey old_tc = TestKey("chain", "nvrtc-12.8/sm_90a");
  CacheKey new_tc = TestKey("chain", "nvrtc-13.0/sm_90a");
  ASSERT_TRUE(store->PutDecision(old_tc, "decision", TestMeta()).ok());
  ASSERT_TRUE(store->PutArtifact(old_tc, "cubin", TestMeta()).ok());
  auto d = store->GetDecision(new_tc);
  auto a = store->GetArtifact(new_tc);
  ASSERT_TRUE(d.ok() && a.ok());
  ASSERT_TRUE(d->has_value());
  EXPECT_EQ(**d, "decision");
  EXPECT_FALSE(a->has_value());
}

TEST(StoreTest, ExplainNamesTheDifferingPart) {
  auto store = OpenOrDie({.path = FreshDbPath("explain")});
  const CacheKey stored = TestKey("chain");
  ASSERT_TRUE(store->PutDecision(stored, "d", TestMeta()).ok());
  ASSERT_TRUE(store->PutArtifact(stored, "a", TestMeta()).ok());
  CacheKey far = TestKey("other-chain");  // Two parts away from any one-part change.
  far.spec = "f16[s0:b64]";
  ASSERT_TRUE(store->PutArtifact(far, "x", TestMeta()).ok());
  struct Case {
    const char* part;
    std::string CacheKey::*field;
  };
  const Case cases[] = {{"chain", &CacheKey::chain},
                        {"spec", &CacheKey::spec},
                        {"device", &CacheKey::device},
                        {"toolchain", &CacheKey::toolchain},
                        {"generator", &CacheKey::generator}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.part);
    CacheKey k = stored;
    k.*c.field += "-changed";
    auto ex = store->Explain(k);
    ASSERT_TRUE(ex.ok()) << ex.status();
    EXPECT_FALSE(ex->found_exact);
    EXPECT_THAT(ex->differing_parts, ElementsAre(c.part));
    EXPECT_THAT(ex->text, HasSubstr(absl::StrCat(c.part, ": stored '")));
    EXPECT_EQ(ex->nearest_key, stored.ArtifactKey());
  }
  CacheKey tc = stored;
  tc.toolchain = "nvrtc-14.0";
  EXPECT_THAT(store->Explain(tc)->text, HasSubstr("a recompile, not a retune"));
  // Decisions filed by variant schema: a new generator version with the
  // same schema finds the decision (a recompile), another schema does not.
  CacheKey decision = stored;
  decision.generator = "pointwise-variants/1";
  ASSERT_TRUE(store->PutDecision(decision, "d", TestMeta()).ok());
  CacheKey next_gen = stored;
  next_gen.generator = "pointwise/4";
  EXPECT_THAT(store->Explain(next_gen, decision)->text, HasSubstr("a recompile, not a retune"));
  CacheKey other_schema = decision;
  other_schema.generator = "pointwise-variants/2";
  EXPECT_THAT(store->Explain(next_gen, other_schema)->text, HasSubstr("no tuning decision for this key either"));
  auto exact = store->Explain(stored);
  ASSERT_TRUE(exact.ok());
  EXPECT_TRUE(exact->found_exact);
  EXPECT_TRUE(exact->differing_parts.empty());
  auto empty = OpenOrDie({.path = FreshDbPath("explain_empty")})->Explain(stored);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->nearest_key.empty());
  EXPECT_THAT(empty->text, HasSubstr("cold miss"));
}

TEST(StoreTest, LruEvictionKeepsUnderCapAndEvictsOldest) {
  int64_t clock = 1000;
  StoreOptions o{.path = FreshDbPath("lru"), .max_bytes = 10000};
  o.now_ms = [&clock] { return clock; };
  auto store = OpenOrDie(o);
  // Ten 1000-byte entries fill the cap exactly.
  for (int i = 0; i < 10; ++i) {
    ++clock;
    ASSERT_TRUE(store
                    ->PutArtifact(TestKey(absl::StrCat("e", i)), TestBlob(absl::StrCat(i), 1000),
                                  TestMeta())
                    .ok());
  }
  EXPECT_EQ(*store->TotalBytes(), 10000);
  // A hit makes e0 the most recent; e1 is now the oldest.
  ++clock;
  ASSERT_TRUE(store->GetArtifact(TestKey("e0"))->has_value());
  ++clock;
  ASSERT_TRUE(store->PutArtifact(TestKey("new"), TestBlob("new", 2500), TestMeta()).ok());
  EXPECT_LE(*store->TotalBytes(), 10000);
  std::vector<std::string> gone;
  for (int i = 0; i < 10; ++i) {
    if (!store->GetArtifact(TestKey(absl::StrCat("e", i)))->has_value()) {
      gone.push_back(absl::StrCat("e", i));
    }
  }
  EXPECT_THAT(gone, ElementsAre("e1", "e2", "e3"));
  EXPECT_TRUE(store->GetArtifact(TestKey("new"))->has_value());
  // Shared blobs are stored once and collected only when unreferenced.
  ASSERT_TRUE(store->PutDecision(TestKey("new"), TestBlob("new", 2500), TestMeta()).ok());
  EXPECT_LE(*store->TotalBytes(), 10000);
  EXPECT_EQ(*store->Delete({TestKey("new").DecisionKey()}), 1);
  EXPECT_EQ(**store->GetArtifact(TestKey("new")), TestBlob("new", 2500));
}

// The decision key a build files beside its artifact: the key parts with the
// variant schema where the artifact has the generator version, as the
// pipeline makes them.
CacheKey DecisionOf(const CacheKey& artifact) {
  CacheKey d = artifact;
  d.generator = "pointwise-variants/1";
  return d;
}
// Meta for an artifact built from DecisionOf(artifact).
EntryMeta BuiltFrom(const CacheKey& artifact) {
  EntryMeta m = TestMeta();
  m.decision_key = DecisionOf(artifact).DecisionKey();
  return m;
}

// A decision is read only on a miss; an artifact served from it keeps it
// as recent as itself, so the cap evicts cold entries before the decisions
// of the kernels in use (which a toolchain upgrade would otherwise retune).
TEST(StoreTest, AnArtifactInUseKeepsItsDecisionFromEviction) {
  int64_t clock = 1000;
  StoreOptions o{.path = FreshDbPath("lru-decision"), .max_bytes = 10000};
  o.now_ms = [&clock] { return clock; };
  auto store = OpenOrDie(o);
  const CacheKey hot = TestKey("hot");
  ASSERT_NE(DecisionOf(hot).DecisionKey(), hot.DecisionKey());
  ASSERT_TRUE(store->PutDecision(DecisionOf(hot), TestBlob("hot-decision", 1000), TestMeta()).ok());
  ASSERT_TRUE(store->PutArtifact(hot, TestBlob("hot-artifact", 1000), BuiltFrom(hot)).ok());
  for (int i = 0; i < 6; ++i) {
    ++clock;
    ASSERT_TRUE(store->PutArtifact(TestKey(absl::StrCat("cold", i)), TestBlob(absl::StrCat(i), 1000), TestMeta())
                    .ok());
  }
  ++clock;
  store->NoteArtifactHit(hot.ArtifactKey());  // A hit from memory.
  ++clock;
  ASSERT_TRUE(store->PutArtifact(TestKey("new"), TestBlob("new", 3000), TestMeta()).ok());
  EXPECT_LE(*store->TotalBytes(), 10000);
  EXPECT_TRUE(store->GetDecision(DecisionOf(hot))->has_value());
  EXPECT_TRUE(store->GetArtifact(hot)->has_value());
  EXPECT_FALSE(store->GetArtifact(TestKey("cold0"))->has_value());  // The oldest in use.
}

// Removing a kernel removes the tuning decision it was built from, unless
// a kernel of another toolchain still stands on it.
TEST(StoreTest, DeletingAnArtifactTakesItsDecisionWhenNoOtherArtifactUsesIt) {
  auto store = OpenOrDie({.path = FreshDbPath("delete-decision")});
  const CacheKey old_nvrtc = TestKey("shared", "nvrtc-12.8/sm_90a"), new_nvrtc = TestKey("shared");
  ASSERT_EQ(DecisionOf(old_nvrtc).DecisionKey(), DecisionOf(new_nvrtc).DecisionKey());
  ASSERT_TRUE(store->PutDecision(DecisionOf(new_nvrtc), "decision", TestMeta()).ok());
  ASSERT_TRUE(store->PutArtifact(old_nvrtc, "old", BuiltFrom(old_nvrtc)).ok());
  ASSERT_TRUE(store->PutArtifact(new_nvrtc, "new", BuiltFrom(new_nvrtc)).ok());
  ASSERT_TRUE(store->PutArtifact(TestKey("imported"), "imported", TestMeta()).ok());  // Built from nothing known.
  EXPECT_EQ(*store->Delete({old_nvrtc.ArtifactKey()}), 1);
  EXPECT_TRUE(store->GetDecision(DecisionOf(new_nvrtc))->has_value());  // The other artifact stands on it.
  EXPECT_EQ(*store->Delete({new_nvrtc.ArtifactKey()}), 2);
  EXPECT_FALSE(store->GetDecision(DecisionOf(new_nvrtc))->has_value());
  EXPECT_EQ(*store->Delete({TestKey("imported").ArtifactKey()}), 1);
  EXPECT_EQ(*store->TotalBytes(), 0);
}

// A listing does not wait on another process's write lock to write the
// pending hit counts first: it lists, and the counts follow at the next
// flush.
TEST(StoreTest, AListingDoesNotWaitForAnotherProcesssWriteLock) {
  const std::string path = FreshDbPath("list-locked");
  auto store = OpenOrDie({.path = path, .busy_timeout_ms = 2000});
  ASSERT_TRUE(store->PutArtifact(TestKey("a"), "a", TestMeta()).ok());
  ASSERT_TRUE(store->GetArtifact(TestKey("a"))->has_value());  // A hit, pending.
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  // A Put of this process waits on that lock, holding the store's writer.
  std::thread put([&] { (void)store->PutArtifact(TestKey("b"), "b", TestMeta()); });
  absl::SleepFor(absl::Milliseconds(200));
  ASSERT_TRUE(store->GetArtifact(TestKey("a"))->has_value());  // Another hit, pending while the Put waits.
  const auto start = std::chrono::steady_clock::now();
  auto list = store->List("", 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  put.join();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_GE(list->size(), 1u);
  // Waiting on the lock would take the busy timeout (2 s) for each of its
  // attempts.
  EXPECT_LT(seconds, 1.5);
  ASSERT_TRUE(store->FlushHits().ok());
  auto after = store->List("", 0, "artifact");
  ASSERT_TRUE(after.ok()) << after.status();
  int64_t hits = 0;
  for (const EntrySummary& e : *after) {
    if (e.key == TestKey("a").ArtifactKey()) hits = e.hits;
  }
  EXPECT_EQ(hits, 2);
}

TEST(StoreTest, BlobLargerThanCapIsInvalidArgument) {
  auto store = OpenOrDie({.path = FreshDbPath("cap"), .max_bytes = 100});
  absl::Status st = store->PutArtifact(TestKey("big"), std::string(101, 'x'), TestMeta());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("max_bytes"));
}

TEST(StoreTest, HitsAreCountedAndListed) {
  int64_t clock = 5000;
  StoreOptions o{.path = FreshDbPath("hits")};
  o.now_ms = [&clock] { return clock; };
  auto store = OpenOrDie(o);
  CacheKey k = TestKey("h");
  ASSERT_TRUE(store->PutArtifact(k, "blob", TestMeta()).ok());
  ASSERT_TRUE(store->PutDecision(k, "dec", TestMeta()).ok());
  clock = 9000;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->GetArtifact(k)->has_value());
  auto list = store->List(k.ArtifactKey().substr(0, 12), 10);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  const EntrySummary& e = (*list)[0];
  EXPECT_EQ(e.kind, "artifact");
  EXPECT_EQ(e.key, k.ArtifactKey());
  EXPECT_EQ(e.parts, k);
  EXPECT_EQ(e.meta.device, "NVIDIA H200");
  EXPECT_EQ(e.bytes, 4);
  EXPECT_EQ(e.created_ms, 5000);
  EXPECT_EQ(e.last_used_ms, 9000);
  EXPECT_EQ(e.hits, 3);
  auto all = store->List("", 0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].kind, "artifact");  // Most recently used first.
  EXPECT_EQ((*all)[1].kind, "decision");
  EXPECT_EQ((*all)[1].parts.toolchain, "");
  EXPECT_EQ(store->List("", 1)->size(), 1u);
  auto decisions = store->List("", 0, "decision");
  ASSERT_TRUE(decisions.ok());
  ASSERT_EQ(decisions->size(), 1u);
  EXPECT_EQ((*decisions)[0].key, k.DecisionKey());
  EXPECT_EQ(store->List("", 0, "kernels").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*store->DeleteAll(), 2);
  EXPECT_EQ(*store->TotalBytes(), 0);
  EXPECT_TRUE(store->List("", 0)->empty());
}

TEST(StoreTest, AStoreInAFolderThatDoesNotExistIsNotFoundNamingIt) {
  const std::string path = FreshDbPath("no-folder") + ".d/sub/k.db";
  auto store = Store::Open({.path = path});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kNotFound) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr("the folder " + path.substr(0, path.size() - 5) + " does not exist"));
}

TEST(StoreTest, NewerSchemaIsFailedPrecondition) {
  const std::string path = FreshDbPath("newer");
  OpenOrDie({.path = path});
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, absl::StrCat("PRAGMA user_version=", cache::SchemaVersion() + 1).c_str(),
                   nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);  // As a newer kfuse might leave it.
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto store = Store::Open({.path = path});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("newer than this kfuse binary knows"));
  // Refused before anything was written: still in its own journal mode.
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* mode = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &mode, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(mode), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(mode, 0)), "delete");
  sqlite3_finalize(mode);
  sqlite3_close(db);
}

// A version-1 file (as an older kfuse wrote it) migrates to version 2 on a
// read-write open, keeping its entries, and counts deletes from then on.
// Switching a new file to WAL needs a moment alone with it: while another
// process holds a write lock SQLite answers BUSY at once, without waiting,
// and the open retries until the lock goes (two kfused starting on one new
// store failed so).
TEST(StoreTest, AnOpenWaitsOutAnotherWritersLockToSetWal) {
  const std::string path = FreshDbPath("wal_busy");
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE; CREATE TABLE scratch(x);", nullptr, nullptr, nullptr), SQLITE_OK);
  std::thread release([other] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  });
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open({.path = path});
  release.join();
  sqlite3_close(other);
  EXPECT_TRUE(store.ok()) << store.status();
}

// The stats row's byte total, which every Put reads, deleted or wrong: set
// again from the blobs when the store opens.
TEST(StoreTest, AMissingOrWrongByteTotalIsRecountedAtOpen) {
  for (const char* damage : {"DELETE FROM stats;", "UPDATE stats SET total_bytes = -5;"}) {
    SCOPED_TRACE(damage);
    const std::string path = FreshDbPath("total");
    int64_t bytes = 0;
    {
      auto store = OpenOrDie({.path = path});
      ASSERT_TRUE(store->PutArtifact(TestKey("a"), "cubin a", TestMeta()).ok());
      bytes = *store->TotalBytes();
      ASSERT_GT(bytes, 0);
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, damage, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
    auto store = OpenOrDie({.path = path});
    absl::StatusOr<int64_t> total = store->TotalBytes();
    ASSERT_TRUE(total.ok()) << total.status();
    EXPECT_EQ(*total, bytes);
    EXPECT_TRUE(store->PutArtifact(TestKey("b"), "cubin b", TestMeta()).ok());
  }
}

// A device (SQLite would open it and leave a journal beside it in /dev) and
// SQLite's ":memory:" are no store.
TEST(StoreTest, ADeviceOrAnInMemoryNameIsNoStore) {
  for (const char* path : {"/dev/null", ":memory:"}) {
    auto store = Store::Open({.path = path});
    ASSERT_FALSE(store.ok()) << path;
    EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument) << path;
  }
  EXPECT_FALSE(std::filesystem::exists("/dev/null-journal"));
}

// A negative schema version indexes no migration: refused, the file kept.
TEST(StoreTest, ANegativeSchemaVersionIsRefused) {
  const std::string path = FreshDbPath("negative");
  { OpenOrDie({.path = path}); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=-1;", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  for (bool read_only : {false, true}) {
    auto store = Store::Open({.path = path, .read_only = read_only});
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(store.status().message()), HasSubstr("schema version -1, which no kfuse writes"));
  }
  EXPECT_TRUE(std::filesystem::exists(path));
}

TEST(StoreTest, VersionOneMigratesToTheInvalidationCounter) {
  const std::string path = FreshDbPath("v1");
  {
    auto store = OpenOrDie({.path = path});
    ASSERT_TRUE(store->PutArtifact(TestKey("kept"), "cubin", TestMeta()).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "DROP TABLE refusals;"
                         "DROP INDEX artifacts_decision; ALTER TABLE artifacts DROP COLUMN decision_key;"
                         "DROP TRIGGER artifacts_blob;"
                         "ALTER TABLE stats DROP COLUMN invalidations; PRAGMA user_version=1;",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  {
    // Read as it is (an image baked by an older kfuse): it serves, and its
    // counter never moves.
    auto ro = OpenOrDie({.path = path, .read_only = true});
    auto old = ro->GetArtifact(TestKey("kept"));
    ASSERT_TRUE(old.ok() && old->has_value());
    EXPECT_TRUE(ro->PollInvalidations().ok());
  }
  auto store = OpenOrDie({.path = path});  // Migrated to the current version.
  auto got = store->GetArtifact(TestKey("kept"));
  ASSERT_TRUE(got.ok() && got->has_value());
  ASSERT_TRUE(store->PutArtifact(TestKey("new"), "new", EntryMeta{.decision_key = "d"}).ok());
  const uint64_t before = store->invalidations();
  ASSERT_TRUE(store->Delete({TestKey("kept").ArtifactKey()}).ok());
  ASSERT_TRUE(store->PollInvalidations().ok());
  EXPECT_NE(store->invalidations(), before);
}

// A refusal made or lifted through one process moves every process's
// invalidations(), so each reads the refusals again.
TEST(StoreTest, ARefusalMadeOrLiftedMovesTheOthersInvalidations) {
  const std::string path = FreshDbPath("refusals-shared");
  auto a = OpenOrDie({.path = path});
  auto b = OpenOrDie({.path = path});
  ASSERT_TRUE(b->PollInvalidations().ok());
  uint64_t seen = b->invalidations();
  ASSERT_TRUE(a->PutRefusal({"k", "wrong_result", int64_t{1} << 50}).ok());
  ASSERT_TRUE(b->PollInvalidations().ok());
  EXPECT_GT(b->invalidations(), seen);
  seen = b->invalidations();
  ASSERT_TRUE(a->DeleteRefusal("absent").ok());  // Nothing lifted: nothing moves.
  ASSERT_TRUE(b->PollInvalidations().ok());
  EXPECT_EQ(b->invalidations(), seen);
  ASSERT_TRUE(a->DeleteRefusal("k").ok());
  ASSERT_TRUE(b->PollInvalidations().ok());
  EXPECT_GT(b->invalidations(), seen);
}

// Chains refused for an answer measured wrong outlast a restart and expire
// by the store's clock; a file from before them (version 3) has none when
// read as it is, and gains the table when opened read-write.
TEST(StoreTest, RefusalsOutlastAReopenAndExpire) {
  const std::string path = FreshDbPath("refusals");
  int64_t clock = 1000;
  StoreOptions o{.path = path};
  o.now_ms = [&clock] { return clock; };
  using R = Store::Refusal;
  auto keys = [](const std::vector<R>& rs) {
    std::vector<std::string> k;
    for (const R& r : rs) k.push_back(r.key + ":" + r.reason + ":" + std::to_string(r.until_ms));
    return k;
  };
  {
    auto store = OpenOrDie(o);
    ASSERT_TRUE(store->PutRefusal({"a", "wrong_result: y off by 1", 5000}).ok());
    ASSERT_TRUE(store->PutRefusal({"b", "launch_error", 2000}).ok());
    ASSERT_TRUE(store->PutRefusal({"b", "wrong_result", 3000}).ok());  // Replaces b's.
    ASSERT_TRUE(store->PutRefusal({"c", "wrong_result", 4000}).ok());
    ASSERT_TRUE(store->DeleteRefusal("c").ok());
    auto rs = store->Refusals();
    ASSERT_TRUE(rs.ok()) << rs.status();
    EXPECT_EQ(keys(*rs), (std::vector<std::string>{"a:wrong_result: y off by 1:5000", "b:wrong_result:3000"}));
    auto n = store->List("", 0);
    ASSERT_TRUE(n.ok());
    EXPECT_TRUE(n->empty());  // Not entries.
  }
  clock = 3000;  // b's has run out.
  auto store = OpenOrDie(o);
  auto rs = store->Refusals();
  ASSERT_TRUE(rs.ok()) << rs.status();
  EXPECT_EQ(keys(*rs), (std::vector<std::string>{"a:wrong_result: y off by 1:5000"}));

  const std::string old = FreshDbPath("refusals-v3");
  OpenOrDie({.path = old});
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(old.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE refusals; PRAGMA user_version=3;", nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  {
    auto ro = OpenOrDie({.path = old, .read_only = true});
    auto none = ro->Refusals();
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_TRUE(none->empty());
  }
  auto migrated = OpenOrDie({.path = old});
  ASSERT_TRUE(migrated->PutRefusal({"a", "wrong", int64_t{1} << 50}).ok());
  auto one = migrated->Refusals();
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->size(), 1u);
}

// Another process deleting or replacing an entry moves invalidations() (a
// read-only open too); new entries and hit counts do not.
TEST(StoreTest, InvalidationsFollowOtherProcessesDeletesAndReplacements) {
  const std::string path = FreshDbPath("inval");
  auto a = OpenOrDie({.path = path});
  auto b = OpenOrDie({.path = path});
  auto ro = OpenOrDie({.path = path, .read_only = true});
  auto moved = [&](Store& s, uint64_t& last) {
    EXPECT_TRUE(s.PollInvalidations().ok());
    const bool m = s.invalidations() != last;
    last = s.invalidations();
    return m;
  };
  uint64_t la = a->invalidations(), lro = ro->invalidations();
  ASSERT_TRUE(b->PutArtifact(TestKey("x"), "heuristic", TestMeta("heuristic")).ok());
  ASSERT_TRUE(b->GetArtifact(TestKey("x")).ok());
  ASSERT_TRUE(b->FlushHits().ok());
  EXPECT_FALSE(moved(*a, la)) << "a new entry and a hit";
  EXPECT_FALSE(moved(*ro, lro));
  ASSERT_TRUE(b->PutArtifact(TestKey("x"), "tuned", TestMeta("tuned")).ok());
  EXPECT_TRUE(moved(*a, la)) << "a replaced blob";
  EXPECT_TRUE(moved(*ro, lro));
  ASSERT_TRUE(b->PutArtifact(TestKey("x"), "tuned", TestMeta("tuned")).ok());
  EXPECT_FALSE(moved(*a, la)) << "the same blob again";
  auto n = b->Delete({TestKey("x").ArtifactKey()});
  ASSERT_TRUE(n.ok() && *n == 1) << n.status();
  EXPECT_TRUE(moved(*a, la)) << "a delete";
  EXPECT_TRUE(moved(*ro, lro));
  ASSERT_TRUE(b->PutDecision(TestKey("y"), "d", TestMeta()).ok());
  ASSERT_TRUE(b->PutDecision(TestKey("y"), "d2", TestMeta()).ok());
  EXPECT_FALSE(moved(*a, la)) << "decisions are not kept in memory";
  ASSERT_TRUE(b->DeleteAll().ok());
  EXPECT_TRUE(moved(*a, la)) << "delete all";
}

// Evictions at the size cap do not move the counter: an evicted plan kept
// in memory is still a right answer, and a store at its cap evicts on every
// Put (each process would otherwise drop its memory about once a second).
TEST(StoreTest, EvictionsDoNotInvalidate) {
  const std::string path = FreshDbPath("evict_inval");
  auto store = OpenOrDie({.path = path, .max_bytes = 64});
  const uint64_t before = store->invalidations();
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(store->PutArtifact(TestKey(absl::StrCat("e", i)), TestBlob(absl::StrCat(i), 30), TestMeta()).ok());
  }
  auto first = store->GetArtifact(TestKey("e0"));
  ASSERT_TRUE(first.ok());
  ASSERT_FALSE(first->has_value()) << "evicted";
  ASSERT_TRUE(store->PollInvalidations().ok());
  EXPECT_EQ(store->invalidations(), before);
}

// Runs `body` in a child process without root's pass over file modes
// (setuid to nobody when root); its exit status, or 90+ when it could not.
int AsUnprivileged(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(90);
    if (access(::testing::TempDir().c_str(), X_OK) != 0) _exit(93);  // Cannot reach the files.
    _exit(body());
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 91;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 92;
}

// A file this process may not write, opened for writing: refused, naming
// the way out, where SQLite alone would open it read-only and fail at the
// first Put.
TEST(StoreTest, AnUnwritableFileIsRefusedUnlessOpenedReadOnly) {
  if (AsUnprivileged([] { return 0; }) == 93) GTEST_SKIP() << "the temp folder is out of nobody's reach";
  const std::string path = FreshDbPath("unwritable");
  { OpenOrDie({.path = path}); }
  ASSERT_EQ(chmod(path.c_str(), 0444), 0);
  ASSERT_EQ(chmod(std::filesystem::path(path).parent_path().c_str(), 0777), 0);
  EXPECT_EQ(AsUnprivileged([&] {
              auto s = Store::Open({.path = path});
              if (s.ok()) return 1;
              if (s.status().code() != absl::StatusCode::kFailedPrecondition) return 2;
              return absl::StrContains(s.status().message(), "--read_only") ? 0 : 3;
            }),
            0);
  EXPECT_EQ(AsUnprivileged([&] { return Store::Open({.path = path, .read_only = true}).ok() ? 0 : 1; }),
            0);
}

// A read-only store in a folder this process may not write (a baked image's
// mount): WAL readers cannot make their -shm file there, so the file is
// read immutable, and it serves.
TEST(StoreTest, ReadOnlyStoreInAnUnwritableFolderServes) {
  if (AsUnprivileged([] { return 0; }) == 93) GTEST_SKIP() << "the temp folder is out of nobody's reach";
  const std::string path = FreshDbPath("ro_folder");
  {
    auto store = OpenOrDie({.path = path});
    ASSERT_TRUE(store->PutArtifact(TestKey("baked"), "cubin", TestMeta()).ok());
  }
  const std::string dir = std::filesystem::path(path).parent_path();
  ASSERT_EQ(chmod(path.c_str(), 0444), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0555), 0);
  const int rc = AsUnprivileged([&] {
    auto s = Store::Open({.path = path, .read_only = true});
    if (!s.ok()) return 1;
    auto got = (*s)->GetArtifact(TestKey("baked"));
    if (!got.ok() || !got->has_value() || **got != "cubin") return 2;
    return (*s)->PollInvalidations().ok() ? 0 : 3;
  });
  chmod(dir.c_str(), 0755);
  EXPECT_EQ(rc, 0);
}

// The same with a write-ahead log that holds entries (a copy taken while a
// writer had it open, without its -shm): an immutable read would silently
// miss them, so the open is refused, saying to checkpoint.
TEST(StoreTest, ReadOnlyFolderWithAnUncheckpointedLogIsRefused) {
  if (AsUnprivileged([] { return 0; }) == 93) GTEST_SKIP() << "the temp folder is out of nobody's reach";
  const std::string path = FreshDbPath("ro_wal");
  const std::filesystem::path copy_dir = std::filesystem::path(path).parent_path() / "baked";
  std::filesystem::create_directories(copy_dir);
  const std::string copy = (copy_dir / "k.db").string();
  {
    auto store = OpenOrDie({.path = path});
    ASSERT_TRUE(store->PutArtifact(TestKey("in_log"), "cubin", TestMeta()).ok());
    ASSERT_GT(std::filesystem::file_size(path + "-wal"), 0u);
    std::filesystem::copy_file(path, copy);
    std::filesystem::copy_file(path + "-wal", copy + "-wal");
  }
  ASSERT_EQ(chmod(copy_dir.c_str(), 0555), 0);
  const int rc = AsUnprivileged([&] {
    auto s = Store::Open({.path = copy, .read_only = true});
    if (s.ok()) return 1;
    return absl::StrContains(s.status().message(), "checkpoint") ? 0 : 2;
  });
  chmod(copy_dir.c_str(), 0755);
  EXPECT_EQ(rc, 0);
}

TEST(StoreTest, ReadOnlyServesButRefusesPuts) {
  const std::string path = FreshDbPath("ro");
  CacheKey k = TestKey("ro");
  ASSERT_TRUE(OpenOrDie({.path = path})->PutArtifact(k, "blob", TestMeta()).ok());
  auto ro = OpenOrDie({.path = path, .read_only = true});
  auto got = ro->GetArtifact(k);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(**got, "blob");
  EXPECT_EQ(ro->PutArtifact(k, "x", TestMeta()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(ro->IntegrityCheck().ok());
  auto missing = Store::Open({.path = FreshDbPath("ro_missing"), .read_only = true});
  EXPECT_FALSE(missing.ok());
}

TEST(StoreTest, ConcurrentReadersAndWriters) {
  auto store = OpenOrDie({.path = FreshDbPath("threads")});
  constexpr int kThreads = 8, kPerThread = 40;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        CacheKey mine = TestKey(absl::StrCat("t", t, "i", i));
        std::string blob = TestBlob(absl::StrCat(t, "/", i), 100 + i);
        if (!store->PutArtifact(mine, blob, TestMeta()).ok()) ++failures;
        auto got = store->GetArtifact(mine);
        if (!got.ok() || !got->has_value() || **got != blob) ++failures;
        // Read another thread's entries, present or not yet.
        auto other = store->GetArtifact(TestKey(absl::StrCat("t", (t + 1) % kThreads, "i", i)));
        if (!other.ok()) ++failures;
        if (other.ok() && other->has_value() &&
            **other != TestBlob(absl::StrCat((t + 1) % kThreads, "/", i), 100 + i)) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(store->List("", 0)->size(), static_cast<size_t>(kThreads * kPerThread));
  EXPECT_TRUE(store->IntegrityCheck().ok());
}

// Hits served from a copy in memory date and count the entry as store hits
// do, so the LRU order does not evict what is hot.
TEST(StoreTest, MemoryHitsRefreshTheEntry) {
  int64_t clock = 5000;
  StoreOptions o{.path = FreshDbPath("memory-hits")};
  o.now_ms = [&clock] { return clock; };
  auto store = OpenOrDie(o);
  CacheKey old_key = TestKey("old"), hot_key = TestKey("hot");
  ASSERT_TRUE(store->PutArtifact(hot_key, "hot", TestMeta()).ok());
  clock = 6000;
  ASSERT_TRUE(store->PutArtifact(old_key, "old", TestMeta()).ok());
  clock = 9000;
  store->NoteArtifactHit(hot_key.ArtifactKey());
  store->NoteArtifactHit(hot_key.ArtifactKey());
  auto list = store->List("", 0, "artifact");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].key, hot_key.ArtifactKey());  // Most recently used first.
  EXPECT_EQ((*list)[0].last_used_ms, 9000);
  EXPECT_EQ((*list)[0].hits, 2);
  EXPECT_EQ((*list)[1].last_used_ms, 6000);
}

TEST(StoreTest, HitLatency) {
  auto store = OpenOrDie({.path = FreshDbPath("latency")});
  struct Case {
    const char* name;
    size_t bytes;
  };
  for (const Case& c : {Case{"decision-2KB", 2048}, Case{"artifact-32KB", 32768}}) {
    CacheKey k = TestKey(c.name);
    ASSERT_TRUE(store->PutArtifact(k, TestBlob(c.name, c.bytes), TestMeta()).ok());
    std::vector<double> us;
    for (int i = 0; i < 3000; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      auto got = store->GetArtifact(k);
      auto t1 = std::chrono::steady_clock::now();
      ASSERT_TRUE(got.ok() && got->has_value());
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    std::sort(us.begin(), us.end());
    std::printf("[ latency  ] store hit %s: p50 %.1f us, p99 %.1f us\n", c.name, us[us.size() / 2],
                us[us.size() * 99 / 100]);
    EXPECT_LT(us[us.size() / 2], 300.0);  // The service's whole hit budget.
  }
}

}  // namespace
}  // namespace kfuse
