// Damage on disk: a blob whose bytes changed, a file whose pages are garbage.
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cache/schema.h"
#include "cache/store.h"
#include "cache/store_test_util.h"
#include "core/log.h"
#include "core/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::kfuse::store_testing::FreshDbPath;
using ::kfuse::store_testing::TestBlob;
using ::kfuse::store_testing::TestKey;
using ::kfuse::store_testing::TestMeta;
using ::testing::HasSubstr;

std::unique_ptr<Store> OpenOrDie(const StoreOptions& o) {
  auto s = Store::Open(o);
  KFUSE_CHECK(s.ok());
  return *std::move(s);
}

void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << err;
  sqlite3_free(err);
  sqlite3_close(db);
}

int64_t RawCount(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr);
  int64_t n = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
  sqlite3_finalize(s);
  sqlite3_close(db);
  return n;
}

// Files in the database's directory whose name holds ".corrupt-".
std::vector<std::string> CorruptAside(const std::string& path) {
  std::string dir = path.substr(0, path.rfind('/'));
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) {
    if (absl::StrContains(e->d_name, ".corrupt-")) out.push_back(e->d_name);
  }
  closedir(d);
  return out;
}

// Overwrites [from, to) of a file with a pattern (to < 0: from the end).
void Scribble(const std::string& path, int64_t from, int64_t to) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(0, std::ios::end);
  int64_t size = f.tellg();
  if (to < 0) to = size + to;
  ASSERT_LT(from, to);
  ASSERT_LE(to, size);
  f.seekp(from);
  std::string junk(to - from, '\x5a');
  f.write(junk.data(), junk.size());
}

TEST(StoreRecoveryTest, CorruptBlobIsMissAndQuarantined) {
  const std::string path = FreshDbPath("blob");
  auto store = OpenOrDie({.path = path});
  CacheKey bad = TestKey("bad"), good = TestKey("good");
  std::string bad_blob = TestBlob("bad", 5000);
  ASSERT_TRUE(store->PutArtifact(bad, bad_blob, TestMeta()).ok());
  ASSERT_TRUE(store->PutDecision(bad, bad_blob, TestMeta()).ok());  // Shares the blob.
  ASSERT_TRUE(store->PutArtifact(good, TestBlob("good", 5000), TestMeta()).ok());
  // Another process flips bytes under the store.
  RawExec(path, absl::StrCat("UPDATE blobs SET data = zeroblob(bytes) WHERE sha256 = '",
                             Sha256Hex(bad_blob), "'"));

  auto got = store->GetArtifact(bad);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->has_value());
  EXPECT_EQ(store->quarantined(), 2);  // The artifact and the decision sharing it.
  EXPECT_EQ(RawCount(path, "SELECT count(*) FROM quarantine WHERE reason LIKE 'sha256 mismatch%'"),
            2);
  EXPECT_FALSE(store->GetDecision(bad)->has_value());
  auto still = store->GetArtifact(good);
  ASSERT_TRUE(still.ok() && still->has_value());
  EXPECT_EQ(*store->TotalBytes(), 5000);
  // Serving continues: the entry can be stored again.
  ASSERT_TRUE(store->PutArtifact(bad, bad_blob, TestMeta()).ok());
  EXPECT_EQ(**store->GetArtifact(bad), bad_blob);
  EXPECT_TRUE(store->IntegrityCheck().ok());
}

// Quarantined rows keep the bad bytes for inspection, outside the cap: they
// are kept to a sixteenth of it, newest first.
TEST(StoreRecoveryTest, QuarantineIsBoundedInBytesNewestKept) {
  const std::string path = FreshDbPath("quarantine-bytes");
  auto store = OpenOrDie({.path = path, .max_bytes = 16 * 10000});  // 10000 bytes of quarantine.
  for (int i = 0; i < 5; ++i) {
    const std::string name = absl::StrCat("bad", i);
    const std::string blob = TestBlob(name, 4000);
    ASSERT_TRUE(store->PutArtifact(TestKey(name), blob, TestMeta()).ok());
    RawExec(path, absl::StrCat("UPDATE blobs SET data = zeroblob(bytes) WHERE sha256 = '", Sha256Hex(blob), "'"));
    ASSERT_FALSE(store->GetArtifact(TestKey(name))->has_value());
  }
  EXPECT_EQ(store->quarantined(), 5);
  // The newest three: 12000 bytes, the third past the bound once the two newer hold 8000.
  EXPECT_EQ(RawCount(path, "SELECT count(*) FROM quarantine"), 3);
  EXPECT_EQ(RawCount(path, "SELECT count(*) FROM quarantine WHERE key = '" + TestKey("bad4").ArtifactKey() + "'"), 1);
  EXPECT_EQ(RawCount(path, "SELECT count(*) FROM quarantine WHERE key = '" + TestKey("bad1").ArtifactKey() + "'"), 0);

  // One row larger than the bound is still kept, alone.
  const std::string huge = TestBlob("huge", 30000);
  ASSERT_TRUE(store->PutArtifact(TestKey("huge"), huge, TestMeta()).ok());
  RawExec(path, absl::StrCat("UPDATE blobs SET data = zeroblob(bytes) WHERE sha256 = '", Sha256Hex(huge), "'"));
  ASSERT_FALSE(store->GetArtifact(TestKey("huge"))->has_value());
  EXPECT_EQ(RawCount(path, "SELECT count(*) FROM quarantine"), 1);
  EXPECT_EQ(RawCount(path, "SELECT sum(length(data)) FROM quarantine"), 30000);
}

TEST(StoreRecoveryTest, CorruptFileIsMovedAsideAndServingContinues) {
  struct Case {
    const char* name;
    int64_t from, to;  // Bytes overwritten.
  };
  const Case cases[] = {
      {"header", 0, 100},           // SQLITE_NOTADB at open.
      {"tail-pages", 8192, -4096},  // SQLITE_CORRUPT at open or at the first read.
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = FreshDbPath(c.name);
    CacheKey big = TestKey("big");
    {
      auto store = OpenOrDie({.path = path});
      for (int i = 0; i < 20; ++i) {
        ASSERT_TRUE(
            store
                ->PutArtifact(TestKey(absl::StrCat(i)), TestBlob(absl::StrCat(i), 3000), TestMeta())
                .ok());
      }
      ASSERT_TRUE(store->PutArtifact(big, TestBlob("big", 200000), TestMeta()).ok());
    }
    Scribble(path, c.from, c.to);
    // The move is one event (a JSON line under --log_format=json), naming
    // both files.
    SetLogFormat(LogFormat::kJson);
    ::testing::internal::CaptureStderr();
    auto store = Store::Open({.path = path});
    ASSERT_TRUE(store.ok()) << store.status();
    auto got = (*store)->GetArtifact(big);
    const std::string logged = ::testing::internal::GetCapturedStderr();
    SetLogFormat(LogFormat::kText);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_FALSE(got->has_value());
    ASSERT_EQ(CorruptAside(path).size(), 1u);
    EXPECT_THAT(logged, HasSubstr("\"event\":\"store_corrupt\""));
    EXPECT_THAT(logged, HasSubstr(CorruptAside(path)[0]));
    for (absl::string_view line : absl::StrSplit(logged, '\n', absl::SkipEmpty())) {
      EXPECT_TRUE(absl::StartsWith(line, "{") && absl::EndsWith(line, "}")) << "not one JSON object: " << line;
    }
    ASSERT_TRUE((*store)->PutArtifact(big, "fresh", TestMeta()).ok());
    EXPECT_EQ(**(*store)->GetArtifact(big), "fresh");
    EXPECT_TRUE((*store)->IntegrityCheck().ok());
  }
}

// A --store that is a symbolic link: the corrupt file it points to is moved
// aside and made again where it was, and the link is left alone (moving the
// link aside left the corrupt file in place and a fresh store in the link's
// folder).
TEST(StoreRecoveryTest, ACorruptStoreBehindALinkIsMovedAsideWhereItIs) {
  const std::string target = FreshDbPath("target");
  const std::string link = FreshDbPath("link");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  {
    auto store = OpenOrDie({.path = link});
    for (int i = 0; i < 20; ++i) {
      ASSERT_TRUE(store->PutArtifact(TestKey(absl::StrCat(i)), TestBlob(absl::StrCat(i), 3000), TestMeta()).ok());
    }
  }
  Scribble(target, 0, 100);
  auto store = Store::Open({.path = link});
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(CorruptAside(target).size(), 1u);  // Beside the target.
  EXPECT_TRUE(CorruptAside(link).empty());
  struct stat st {};
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  ASSERT_TRUE((*store)->PutArtifact(TestKey("after"), "fresh", TestMeta()).ok());
  EXPECT_EQ(**(*store)->GetArtifact(TestKey("after")), "fresh");
  EXPECT_TRUE(cache::LooksLikeKfuseStore(target));
}

TEST(StoreRecoveryTest, AFolderAsTheStoreIsRefusedNamingAFileInIt) {
  const std::string path = FreshDbPath("folder");
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
  auto store = Store::Open({.path = path});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr(path + " is a folder; give a file in it (" + path + "/kfuse.db)"));
}

// A store whose tables do not match its schema version (a table dropped by
// hand; the version set back, so a migration step finds its table made) is
// damaged as a garbage page is: moved aside at open, a new store made, and
// a read-only open says what is wrong (not an SQL error).
TEST(StoreRecoveryTest, AFileWhoseTablesDoNotMatchItsVersionIsMovedAside) {
  struct Case {
    const char* name;
    const char* edit;
    const char* said;
  };
  const Case cases[] = {
      {"no-quarantine", "DROP TABLE quarantine", "has no table quarantine"},
      {"no-refusals", "DROP TABLE refusals", "has no table refusals"},
      {"version-set-back", "PRAGMA user_version=3", "migration to version 4"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = FreshDbPath(c.name);
    {
      auto store = OpenOrDie({.path = path});
      ASSERT_TRUE(store->PutArtifact(TestKey("old"), "old", TestMeta()).ok());
    }
    RawExec(path, c.edit);
    auto ro = Store::Open({.path = path, .read_only = true});
    if (std::string(c.name) != "version-set-back") {  // A reader reads a version-3 file as it is.
      ASSERT_FALSE(ro.ok());
      EXPECT_TRUE(absl::IsDataLoss(ro.status())) << ro.status();
      EXPECT_THAT(ro.status().message(), HasSubstr(c.said));
    }
    ::testing::internal::CaptureStderr();
    auto store = Store::Open({.path = path});
    const std::string logged = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_THAT(logged, HasSubstr(c.said));
    const std::vector<std::string> aside = CorruptAside(path);  // The file, and its log where one was left.
    EXPECT_EQ(std::count_if(aside.begin(), aside.end(),
                            [](const std::string& name) { return !absl::EndsWith(name, "-wal"); }),
              1);
    auto old = (*store)->GetArtifact(TestKey("old"));
    ASSERT_TRUE(old.ok()) << old.status();
    EXPECT_FALSE(old->has_value());
    ASSERT_TRUE((*store)->PutArtifact(TestKey("new"), "new", TestMeta()).ok());
    EXPECT_TRUE((*store)->IntegrityCheck().ok());
  }
}

// Runs `body` in a child process (a file size limit is process-wide) and
// returns the child's exit status: 0, or the step `body` failed at (Step).
// `body` gets `limit(bytes)`: no file may grow past `bytes` from then on, as
// on a full disk; -1 lifts it.
int InChild(const std::function<void(const std::function<void(int64_t)>& limit)>& body) {
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // A write past the limit fails with EFBIG instead.
    rlimit initial;
    getrlimit(RLIMIT_FSIZE, &initial);
    body([&](int64_t bytes) {
      const rlimit now{bytes < 0 ? initial.rlim_cur : static_cast<rlim_t>(bytes), initial.rlim_max};
      setrlimit(RLIMIT_FSIZE, &now);
    });
    _exit(0);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// In such a child: reports step `n` failed (with `s`) and exits with it.
[[noreturn]] void Step(int n, const absl::Status& s) {
  std::fprintf(stderr, "step %d: %s\n", n, s.ToString().c_str());
  _exit(n);
}

// A corrupt file found while serving is moved aside; when the fresh one
// cannot be made (here: no file may grow, as on a full disk), the store
// answers Unavailable and tries again once a second, so it serves again as
// soon as it can without a restart.
TEST(StoreRecoveryTest, AStoreThatCouldNotBeRecreatedIsTriedAgain) {
  const std::string path = FreshDbPath("recreate");
  CacheKey big = TestKey("big");
  {
    auto store = OpenOrDie({.path = path});
    ASSERT_TRUE(store->PutArtifact(big, TestBlob("big", 200000), TestMeta()).ok());
  }
  const int failed = InChild([&](const std::function<void(int64_t)>& limit) {
    auto store = Store::Open({.path = path});
    if (!store.ok()) Step(10, store.status());
    Scribble(path, 8192, -4096);  // Read only now: the open touched the roots alone.
    limit(0);
    auto got = (*store)->GetArtifact(big);
    if (got.ok() || !absl::IsUnavailable(got.status())) Step(11, got.status());
    if (CorruptAside(path).size() != 1u) Step(12, absl::OkStatus());
    // Still refused within the second, without another try.
    absl::Status put = (*store)->PutArtifact(big, "fresh", TestMeta());
    if (!absl::IsUnavailable(put)) Step(13, put);
    limit(-1);
    absl::SleepFor(absl::Milliseconds(1100));
    put = (*store)->PutArtifact(big, "fresh", TestMeta());
    if (!put.ok()) Step(14, put);
    got = (*store)->GetArtifact(big);
    if (!got.ok() || !got->has_value() || **got != "fresh") Step(15, got.status());
    if (absl::Status s = (*store)->IntegrityCheck(); !s.ok()) Step(16, s);
  });
  EXPECT_EQ(failed, 0) << "the child's stderr says which step";
}

// A migration that cannot write (a full disk: no file may grow) is no
// damaged schema: the open fails with the write's error and the file stays
// where it is, its entries in it.
TEST(StoreRecoveryTest, AMigrationThatCannotWriteLeavesTheFileInPlace) {
  const std::string path = FreshDbPath("migrate-full");
  {
    auto store = OpenOrDie({.path = path});
    ASSERT_TRUE(store->PutArtifact(TestKey("old"), "old", TestMeta()).ok());
  }
  RawExec(path, "DROP TABLE refusals; PRAGMA user_version=3");  // As a version-3 binary left it.
  // Holds the log and the shared-memory index open and sized, so that the
  // child's only growing write is the migration's.
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "SELECT count(*) FROM artifacts", nullptr, nullptr, nullptr), SQLITE_OK);
  const int failed = InChild([&](const std::function<void(int64_t)>& limit) {
    limit(0);
    auto store = Store::Open({.path = path});
    if (store.ok()) Step(20, absl::OkStatus());
    if (absl::IsDataLoss(store.status())) Step(21, store.status());
    if (!absl::StrContains(store.status().message(), "migration from version 3 to 4")) Step(22, store.status());
  });
  sqlite3_close(holder);
  EXPECT_EQ(failed, 0) << "the child's stderr says which step";
  EXPECT_TRUE(CorruptAside(path).empty());
  EXPECT_EQ(RawCount(path, "PRAGMA user_version"), 3);
  auto store = OpenOrDie({.path = path});  // Room again: migrated.
  auto old = store->GetArtifact(TestKey("old"));
  ASSERT_TRUE(old.ok() && old->has_value()) << old.status();
  EXPECT_EQ(**old, "old");
}

// A disk with no room left (here: no file may grow past its size): Puts
// fail, hits are served, and once there is room Puts succeed again without
// a reopen.
TEST(StoreRecoveryTest, PutsFailOnAFullDiskAndSucceedOnceThereIsRoom) {
  const std::string path = FreshDbPath("full-disk");
  const int failed = InChild([&](const std::function<void(int64_t)>& limit) {
    auto store = Store::Open({.path = path});
    if (!store.ok()) Step(10, store.status());
    if (absl::Status s = (*store)->PutArtifact(TestKey("small"), "small", TestMeta()); !s.ok()) Step(11, s);
    struct stat db, wal;
    limit(std::max<int64_t>(::stat(path.c_str(), &db) == 0 ? db.st_size : 0,
                            ::stat((path + "-wal").c_str(), &wal) == 0 ? wal.st_size : 0));
    absl::Status put = (*store)->PutArtifact(TestKey("big"), TestBlob("big", 1 << 20), TestMeta());
    if (put.ok()) Step(12, put);
    auto hit = (*store)->GetArtifact(TestKey("small"));
    if (!hit.ok() || !hit->has_value()) Step(13, hit.status());
    limit(-1);
    put = (*store)->PutArtifact(TestKey("big"), TestBlob("big", 1 << 20), TestMeta());
    if (!put.ok()) Step(14, put);
    if (absl::Status s = (*store)->IntegrityCheck(); !s.ok()) Step(15, s);
  });
  EXPECT_EQ(failed, 0) << "the child's stderr says which step";
}

// Two processes on one file (two Store objects here): the first to find it
// corrupt moves it aside and makes a fresh one; the other, finding the old
// file corrupt too, opens that fresh file rather than moving it aside as
// well, and one that never reads the damage follows it within a second, so
// no one keeps writing into the file moved aside.
// What `store` serves for `key`: the blob, "(missing)" or the error.
std::string Read(Store& store, const CacheKey& key) {
  auto got = store.GetArtifact(key);
  if (!got.ok()) return got.status().ToString();
  return got->has_value() ? **got : "(missing)";
}

TEST(StoreRecoveryTest, ProcessesSharingACorruptFileEndOnOneFreshFile) {
  const std::string path = FreshDbPath("shared-corrupt");
  CacheKey big = TestKey("big");
  {
    auto store = OpenOrDie({.path = path});
    ASSERT_TRUE(store->PutArtifact(big, TestBlob("big", 200000), TestMeta()).ok());
  }
  auto a = OpenOrDie({.path = path});
  auto b = OpenOrDie({.path = path});
  auto c = OpenOrDie({.path = path});
  Scribble(path, 8192, -4096);
  auto got = a->GetArtifact(big);  // Corrupt: moved aside, a miss.
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->has_value());
  const std::vector<std::string> moved = CorruptAside(path);  // The file and its log.
  ASSERT_FALSE(moved.empty());
  ASSERT_TRUE(a->PutArtifact(TestKey("x"), "x", TestMeta()).ok());
  got = b->GetArtifact(big);  // b reads the old file's damage too.
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(CorruptAside(path), moved);  // Not a's fresh file.
  EXPECT_EQ(Read(*b, TestKey("x")), "x");
  // c read nothing damaged: within a second it writes to the fresh file.
  absl::SleepFor(absl::Milliseconds(1500));
  ASSERT_TRUE(c->PutArtifact(TestKey("y"), "y", TestMeta()).ok());
  EXPECT_EQ(Read(*a, TestKey("y")), "y");
  EXPECT_TRUE(a->IntegrityCheck().ok());
}

// The store deleted by hand while a process writes it (`rm kfuse.db`, to
// clear it): the writer says so once, within a second, and writes on into
// the deleted file (a new one at the path would share the -shm and -wal
// another process on the old file keeps there); nothing is made at the
// path, nothing moved aside.
TEST(StoreRecoveryTest, AWriterSaysOnceThatItsFileWasDeleted) {
  const std::string path = FreshDbPath("deleted");
  auto store = OpenOrDie({.path = path});
  ASSERT_TRUE(store->PutArtifact(TestKey("old"), "old", TestMeta()).ok());
  SetLogFormat(LogFormat::kJson);
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(std::remove(path.c_str()), 0);
  absl::SleepFor(absl::Milliseconds(2500));
  ASSERT_TRUE(store->PutArtifact(TestKey("new"), "new", TestMeta()).ok());
  const std::string logged = ::testing::internal::GetCapturedStderr();
  SetLogFormat(LogFormat::kText);
  EXPECT_EQ(Read(*store, TestKey("old")), "old");
  EXPECT_EQ(Read(*store, TestKey("new")), "new");
  size_t said = 0;
  for (size_t at = logged.find("\"event\":\"store_file_deleted\""); at != std::string::npos;
       at = logged.find("\"event\":\"store_file_deleted\"", at + 1)) {
    ++said;
  }
  EXPECT_EQ(said, 1u) << logged;
  EXPECT_EQ(access(path.c_str(), F_OK), -1);
  EXPECT_TRUE(CorruptAside(path).empty());
}

// A serving-only node (read-only store) whose file is replaced by a new one
// (a store shipped to serving nodes, moved into place): within a second it
// serves the new file, and says that memory is stale. A file put there that
// cannot be read does not stop it serving the old one.
TEST(StoreRecoveryTest, AReadOnlyStoreServesTheFilePutInPlaceOfItsOwn) {
  const std::string path = FreshDbPath("shipped");
  {
    auto first = OpenOrDie({.path = path});
    ASSERT_TRUE(first->PutArtifact(TestKey("old"), "old", TestMeta()).ok());
  }
  auto ro = OpenOrDie({.path = path, .busy_timeout_ms = 5000, .read_only = true});
  ASSERT_EQ(Read(*ro, TestKey("old")), "old");
  const uint64_t before = ro->invalidations();

  // Not a store: copied halfway, say. The old file keeps serving, to many
  // readers at once too (more than it has connections open).
  const std::string broken = path + ".broken";
  std::ofstream(broken, std::ios::binary) << "half a file";
  ASSERT_EQ(std::rename(broken.c_str(), path.c_str()), 0);
  for (int round = 0; round < 2; ++round) {  // Before it is looked at, and after.
    constexpr int kThreads = 16, kReads = 50;
    std::vector<std::string> wrong;
    absl::Mutex mu;
    std::atomic<int> ready{0};
    std::vector<std::thread> readers;
    for (int i = 0; i < kThreads; ++i) {
      readers.emplace_back([&] {
        ++ready;
        while (ready.load() < kThreads) {  // All at once.
        }
        for (int k = 0; k < kReads; ++k) {
          const std::string got = Read(*ro, TestKey("old"));
          absl::MutexLock lock(&mu);
          if (got != "old") wrong.push_back(got);
        }
      });
    }
    for (std::thread& t : readers) t.join();
    EXPECT_TRUE(wrong.empty()) << "round " << round << ": " << wrong.size() << " reads, the first: " << wrong.front();
    absl::SleepFor(absl::Milliseconds(1500));
  }
  EXPECT_EQ(ro->invalidations(), before);

  const std::string next = path + ".next";
  {
    auto made = OpenOrDie({.path = next});
    ASSERT_TRUE(made->PutArtifact(TestKey("new"), "new", TestMeta()).ok());
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  ASSERT_EQ(std::rename(next.c_str(), path.c_str()), 0);
  absl::SleepFor(absl::Milliseconds(1500));
  EXPECT_EQ(Read(*ro, TestKey("new")), "new");
  EXPECT_EQ(Read(*ro, TestKey("old")), "(missing)");
  EXPECT_GT(ro->invalidations(), before);
}

// --store pointing at a file kfuse did not make: refused, and the file
// left byte for byte as it was (not moved aside, not switched to WAL, no
// table added).
TEST(StoreRecoveryTest, AFileKfuseDidNotMakeIsRefusedAndLeftAsItIs) {
  auto contents = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string text = FreshDbPath("notes");
  {
    std::ofstream out(text, std::ios::binary);
    out << "meeting notes: not a database at all, but long enough to have a header of sorts.\n";
  }
  const std::string other = FreshDbPath("other-app");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE people(name TEXT); INSERT INTO people VALUES ('ada');", nullptr,
                           nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string versioned = FreshDbPath("other-versioned");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(versioned.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x); PRAGMA user_version=1;", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  for (const std::string& path : {text, other, versioned}) {
    SCOPED_TRACE(path);
    const std::string before = contents(path);
    for (bool read_only : {false, true}) {
      auto store = Store::Open({.path = path, .read_only = read_only});
      ASSERT_FALSE(store.ok());
      if (read_only && path == text) {
        EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
      } else {
        EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
        EXPECT_THAT(store.status().message(), HasSubstr("is not a kfuse store"));
      }
    }
    EXPECT_EQ(contents(path), before);
    EXPECT_TRUE(CorruptAside(path).empty());
  }
}

// A read-only store that has no connection to the file it served (it found
// that file corrupt) while another sits at the path that it cannot follow:
// a read says so at once rather than waiting for a connection that will not
// come back.
TEST(StoreRecoveryTest, AReadOnlyStoreWithNothingToServeSaysSoAtOnce) {
  const std::string path = FreshDbPath("ro-nothing");
  {
    auto made = OpenOrDie({.path = path});
    ASSERT_TRUE(made->PutArtifact(TestKey("big"), TestBlob("big", 200000), TestMeta()).ok());
  }
  auto ro = OpenOrDie({.path = path, .busy_timeout_ms = 60000, .read_only = true});
  Scribble(path, 8192, -4096);
  EXPECT_THAT(Read(*ro, TestKey("big")), HasSubstr("DATA_LOSS"));  // Its connections are closed.
  const std::string broken = path + ".broken";
  std::ofstream(broken, std::ios::binary) << "half a file";
  ASSERT_EQ(std::rename(broken.c_str(), path.c_str()), 0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT(Read(*ro, TestKey("big")), HasSubstr("no connection to the one served is open"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));  // Not the 60 s wait.
}

TEST(StoreRecoveryTest, ReadOnlyStoreReportsCorruptFile) {
  const std::string path = FreshDbPath("ro");
  OpenOrDie({.path = path});
  Scribble(path, 0, 100);
  auto store = Store::Open({.path = path, .read_only = true});
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(store.status().message(), HasSubstr("read-only"));
  EXPECT_TRUE(CorruptAside(path).empty());
}

}  // namespace
}  // namespace kfuse
