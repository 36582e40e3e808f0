#include "cache/schema.h"

#include <sqlite3.h>

#include <fstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/status.h"

namespace kfuse::cache {
namespace {

// Version 1: content-addressed blobs, decisions, artifacts, quarantine, and a
// running byte total kept by triggers (so the cap check is one row read).
absl::Status V1(Db& db) {
  return db.Exec(R"sql(
CREATE TABLE blobs(
  sha256 TEXT PRIMARY KEY NOT NULL,
  bytes INTEGER NOT NULL,
  data BLOB NOT NULL);
CREATE TABLE stats(
  id INTEGER PRIMARY KEY CHECK (id = 1),
  total_bytes INTEGER NOT NULL);
INSERT INTO stats VALUES (1, 0);
CREATE TRIGGER blobs_ins AFTER INSERT ON blobs BEGIN
  UPDATE stats SET total_bytes = total_bytes + NEW.bytes WHERE id = 1; END;
CREATE TRIGGER blobs_del AFTER DELETE ON blobs BEGIN
  UPDATE stats SET total_bytes = total_bytes - OLD.bytes WHERE id = 1; END;
CREATE TRIGGER blobs_upd AFTER UPDATE OF bytes ON blobs BEGIN
  UPDATE stats SET total_bytes = total_bytes - OLD.bytes + NEW.bytes WHERE id = 1; END;
CREATE TABLE decisions(
  key TEXT PRIMARY KEY NOT NULL,
  chain TEXT NOT NULL,
  spec TEXT NOT NULL,
  device TEXT NOT NULL,
  generator TEXT NOT NULL,
  blob_sha256 TEXT NOT NULL REFERENCES blobs(sha256),
  family TEXT NOT NULL,
  arch TEXT NOT NULL,
  device_name TEXT NOT NULL,
  state TEXT NOT NULL,
  description TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  last_used_ms INTEGER NOT NULL,
  hits INTEGER NOT NULL);
CREATE INDEX decisions_blob ON decisions(blob_sha256);
CREATE INDEX decisions_lru ON decisions(last_used_ms);
CREATE TABLE artifacts(
  key TEXT PRIMARY KEY NOT NULL,
  chain TEXT NOT NULL,
  spec TEXT NOT NULL,
  device TEXT NOT NULL,
  toolchain TEXT NOT NULL,
  generator TEXT NOT NULL,
  blob_sha256 TEXT NOT NULL REFERENCES blobs(sha256),
  family TEXT NOT NULL,
  arch TEXT NOT NULL,
  device_name TEXT NOT NULL,
  state TEXT NOT NULL,
  description TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  last_used_ms INTEGER NOT NULL,
  hits INTEGER NOT NULL);
CREATE INDEX artifacts_blob ON artifacts(blob_sha256);
CREATE INDEX artifacts_lru ON artifacts(last_used_ms);
CREATE TABLE quarantine(
  id INTEGER PRIMARY KEY,
  key TEXT NOT NULL,
  kind TEXT NOT NULL,
  reason TEXT NOT NULL,
  at_ms INTEGER NOT NULL,
  data BLOB);
)sql");
}

// Version 2: stats.invalidations counts what any process on the file did
// that makes an artifact kept in memory wrong to serve: an artifact given
// another blob (this trigger), deleted or quarantined (Store bumps it in the
// same transaction). Evictions do not: an evicted plan is still right.
absl::Status V2(Db& db) {
  return db.Exec(R"sql(
ALTER TABLE stats ADD COLUMN invalidations INTEGER NOT NULL DEFAULT 0;
CREATE TRIGGER artifacts_blob AFTER UPDATE OF blob_sha256 ON artifacts
  WHEN OLD.blob_sha256 != NEW.blob_sha256 BEGIN
  UPDATE stats SET invalidations = invalidations + 1 WHERE id = 1; END;
)sql");
}

// Version 3: an artifact names the tuning decision it was built from (its
// key; empty when not known: imports, fleet entries, rows from before), so
// a hit keeps that decision as recent as the artifact and removing the
// artifact removes the decision no other artifact stands on.
absl::Status V3(Db& db) {
  return db.Exec(R"sql(
ALTER TABLE artifacts ADD COLUMN decision_key TEXT NOT NULL DEFAULT '';
CREATE INDEX artifacts_decision ON artifacts(decision_key);
)sql");
}

// Version 4: chains this node refuses until until_ms because tuning
// measured their answer wrong (service/pipeline.h MeasuredWrong), so a
// restart does not serve it again. Local to the file; never in the fleet.
absl::Status V4(Db& db) {
  return db.Exec(R"sql(
CREATE TABLE refusals(
  key TEXT PRIMARY KEY,
  reason TEXT NOT NULL,
  until_ms INTEGER NOT NULL);
)sql");
}

struct Migration {
  const char* what;
  absl::Status (*apply)(Db&);
  // A reader of the version before can read a file of this version, and
  // this binary can read (not write) a file without the step: a read-only
  // open accepts the older file.
  bool read_compatible;
};

// Step i brings user_version from i to i+1. Append only; never edit a step
// that has shipped.
const std::vector<Migration>& Migrations() {
  static const auto* m = new std::vector<Migration>{
      {"initial schema", &V1, false},
      {"invalidation counter", &V2, true},
      {"artifacts name their decision", &V3, true},
      {"refusals of chains measured wrong", &V4, true},
  };
  return *m;
}

}  // namespace

int SchemaVersion() { return static_cast<int>(Migrations().size()); }

namespace {

// Text the schema puts in the file's first pages (sqlite_master).
constexpr char kSchemaMarker[] = "CREATE TABLE artifacts(";

absl::Status NewerThanKnown(const std::string& path, int64_t version) {
  return absl::FailedPreconditionError(absl::StrCat("cache database ", path, " has schema version ", version,
                                                    ", newer than this kfuse binary knows (", SchemaVersion(),
                                                    "); upgrade kfuse, or point it at another cache file"));
}

// A negative user_version is none kfuse wrote (it indexes no migration).
absl::Status NoVersion(const std::string& path, int64_t version) {
  return absl::FailedPreconditionError(absl::StrCat("cache database ", path, " has schema version ", version,
                                                    ", which no kfuse writes; point kfuse at another cache file"));
}

}  // namespace

absl::Status CheckOwnFile(Db& db, const std::string& path) {
  KFUSE_ASSIGN_OR_RETURN(int64_t version, db.QueryInt("PRAGMA user_version"));
  if (version > SchemaVersion()) return NewerThanKnown(path, version);
  if (version < 0) return NoVersion(path, version);
  // A store is made in one transaction with its version: version 0 is an
  // empty file, and a versioned one has kfuse's tables. Read in one
  // statement, one snapshot: read apart, another process making the store
  // between the reads would show version 0 beside its tables.
  KFUSE_ASSIGN_OR_RETURN(
      int64_t foreign,
      db.QueryInt("SELECT (v = 0 AND t > 0) OR (v > 0 AND o = 0) FROM (SELECT "
                  "(SELECT user_version FROM pragma_user_version) AS v, (SELECT count(*) FROM sqlite_master) AS t, "
                  "(SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'artifacts') AS o)"));
  if (foreign != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cache database ", path,
                     " is not a kfuse store (an SQLite database with other tables); kfuse left it as it "
                     "is: point --store at a new file or a kfuse store"));
  }
  return absl::OkStatus();
}

bool LooksLikeKfuseStore(const std::string& path) {
  // The schema of a store not yet checkpointed is in its write-ahead log.
  for (const std::string& file : {path, path + "-wal"}) {
    std::ifstream in(file, std::ios::binary);
    std::string head(64 << 10, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<size_t>(in.gcount()));
    if (head.find(kSchemaMarker) != std::string::npos) return true;
  }
  return false;
}

absl::Status ConfigureWriter(Db& db) {
  // journal_mode=WAL persists in the file; setting it needs a brief lock, so
  // BUSY here (another process opening the same new file) is retried.
  // SQLite answers that BUSY at once, without its busy handler, so the
  // retries wait (about 2.5 s in all).
  absl::Status st;
  for (int attempt = 0; attempt < 50; ++attempt) {
    st = db.Exec("PRAGMA journal_mode=WAL");
    if (!absl::IsUnavailable(st)) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  KFUSE_RETURN_IF_ERROR(st);
  return db.Exec(
      "PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;"
      "PRAGMA journal_size_limit=67108864;");
}

absl::Status ConfigureReader(Db& db) { return db.Exec("PRAGMA foreign_keys=ON"); }

absl::Status Migrate(Db& db, const std::string& path, bool read_only, int64_t* opened) {
  const int64_t known = SchemaVersion();
  KFUSE_ASSIGN_OR_RETURN(int64_t version, db.QueryInt("PRAGMA user_version"));
  if (opened != nullptr) *opened = version;
  if (version > known) return NewerThanKnown(path, version);
  if (version < 0) return NoVersion(path, version);
  if (version == known) return absl::OkStatus();
  bool readable = version >= 1;
  for (int64_t v = version; v < known && readable; ++v) readable = Migrations()[v].read_compatible;
  if (read_only && readable) return absl::OkStatus();  // Read as it is (*opened says which).
  if (read_only) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cache database ", path, " has schema version ", version, " and needs migrating to ", known,
        ", which a read-only open cannot do; open it read-write once"));
  }
  absl::Status migrated = db.Transaction([&]() -> absl::Status {
    // Re-read under the write lock: another process may have migrated.
    KFUSE_ASSIGN_OR_RETURN(int64_t v, db.QueryInt("PRAGMA user_version"));
    if (v > known) return absl::FailedPreconditionError("cache schema changed during open");
    if (v < 0) return NoVersion(path, v);
    for (; v < known; ++v) {
      const Migration& m = Migrations()[v];
      absl::Status st = m.apply(db);
      if (!st.ok()) {
        // A step's SQL fails as such (SQLITE_ERROR: a table it makes is
        // there, one it alters is not) only where the tables are not those
        // of the file's version: a damaged file. Anything else (a full disk,
        // an I/O error, a lock) keeps its code, and the file stays.
        const bool damaged = sqlite3_extended_errcode(db.raw()) == SQLITE_ERROR;
        const absl::StatusCode code = damaged ? absl::StatusCode::kDataLoss : st.code();
        return absl::Status(code, absl::StrCat("cache database ", path, ": migration to version ", v + 1, " (",
                                               m.what, ") failed: ", st.message()));
      }
      KFUSE_RETURN_IF_ERROR(db.Exec(absl::StrCat("PRAGMA user_version=", v + 1)));
    }
    if (opened != nullptr) *opened = known;
    return absl::OkStatus();
  });
  if (migrated.ok() || absl::StrContains(migrated.message(), "cache database ")) return migrated;
  // The commit's write, say, on a full disk.
  return absl::Status(migrated.code(), absl::StrCat("cache database ", path, ": migration from version ", version,
                                                    " to ", known, " failed: ", migrated.message()));
}

absl::Status ReconcileTotal(Db& db) {
  constexpr char kSum[] = "(SELECT coalesce(sum(bytes), 0) FROM blobs)";
  KFUSE_ASSIGN_OR_RETURN(int64_t right,
                         db.QueryInt(absl::StrCat("SELECT (SELECT total_bytes FROM stats WHERE id = 1) IS ", kSum)));
  if (right != 0) return absl::OkStatus();
  return db.Transaction([&]() -> absl::Status {
    // An upsert: a present row keeps its invalidation counter. A row made
    // again starts it at 0, which other processes read as a change (they
    // compare for inequality) and so drop what they hold in memory.
    return db.Exec(absl::StrCat("INSERT INTO stats(id, total_bytes) VALUES (1, ", kSum,
                                ") ON CONFLICT(id) DO UPDATE SET total_bytes = excluded.total_bytes"));
  });
}

absl::Status Probe(Db& db, const std::string& path, int64_t version) {
  struct Table {
    const char* name;
    int64_t since;  // The schema version that made it.
  };
  for (const Table& table : {Table{"blobs", 1}, Table{"stats", 1}, Table{"decisions", 1}, Table{"artifacts", 1},
                             Table{"quarantine", 1}, Table{"refusals", 4}}) {
    if (version < table.since) continue;
    // A file whose tables do not match its version (one dropped, its version
    // set back by hand) is damaged as a garbage page is: moved aside.
    KFUSE_ASSIGN_OR_RETURN(int64_t present,
                           db.QueryInt(absl::StrCat("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                                    "AND name = '", table.name, "'")));
    if (present == 0) {
      return absl::DataLossError(absl::StrCat("cache database ", path, " is damaged: schema version ", version,
                                              " has no table ", table.name));
    }
    KFUSE_ASSIGN_OR_RETURN(Stmt s, db.Prepare(absl::StrCat("SELECT 1 FROM ", table.name, " LIMIT 1")));
    KFUSE_RETURN_IF_ERROR(s.Step().status());
  }
  return absl::OkStatus();
}

}  // namespace kfuse::cache
