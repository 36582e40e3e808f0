// The store's administrative side (`kfuse cache list|show|rm|explain`):
// listing, deletion, miss explanation, size and integrity.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cache/store.h"
#include "cache/store_sql.h"
#include "core/status.h"

namespace kfuse {

using cache::CollectBlob;
using cache::Db;
using cache::KindName;
using cache::Stmt;
using cache::Table;

namespace {

std::string EntryColumns(Store::Kind kind) {
  return absl::StrCat("'", KindName(kind), "' AS kind, e.key AS key, e.chain, e.spec, e.device, ",
                      kind == Store::Kind::kArtifact ? "e.toolchain" : "''",
                      ", e.generator, e.family, e.arch, e.device_name, e.state, e.description,"
                      " b.bytes, e.created_ms, e.last_used_ms AS last_used_ms, e.hits FROM ",
                      Table(kind), " e JOIN blobs b ON b.sha256 = e.blob_sha256");
}

}  // namespace

absl::StatusOr<std::vector<EntrySummary>> Store::List(const std::string& key_prefix, int limit,
                                                      const std::string& kind) {
  if (!kind.empty() && kind != "decision" && kind != "artifact") {
    return absl::InvalidArgumentError(
        absl::StrCat("cache list: kind must be \"decision\" or \"artifact\", got \"", kind, "\""));
  }
  // So that hit counts are current; a listing never waits on another
  // process's write lock for them (they are written at the next flush).
  if (!opts_.read_only) (void)FlushHits(/*wait=*/false);
  static const std::string* kSql = new std::string(
      absl::StrCat("SELECT ", EntryColumns(Kind::kDecision),
                   " WHERE substr(e.key, 1, ?2) = ?1 AND ?4 IN ('', 'decision') UNION ALL SELECT ",
                   EntryColumns(Kind::kArtifact),
                   " WHERE substr(e.key, 1, ?2) = ?1 AND ?4 IN ('', 'artifact')"
                   " ORDER BY last_used_ms DESC, key LIMIT ?3"));
  std::vector<EntrySummary> out;
  KFUSE_RETURN_IF_ERROR(Guarded([&]() -> absl::Status {
    out.clear();
    KFUSE_ASSIGN_OR_RETURN(Reader r, AcquireReader());
    KFUSE_ASSIGN_OR_RETURN(Stmt s, r->Prepare(*kSql));
    s.Bind(1, key_prefix);
    s.Bind(2, static_cast<int64_t>(key_prefix.size()));
    s.Bind(3, static_cast<int64_t>(limit > 0 ? limit : -1));
    s.Bind(4, kind);
    for (;;) {
      KFUSE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return absl::OkStatus();
      EntrySummary e;
      e.kind = s.Text(0);
      e.key = s.Text(1);
      e.parts = CacheKey{s.Text(2), s.Text(3), s.Text(4), s.Text(5), s.Text(6)};
      e.meta = EntryMeta{s.Text(7), s.Text(8), s.Text(9), s.Text(10), s.Text(11)};
      e.bytes = s.Int(12);
      e.created_ms = s.Int(13);
      e.last_used_ms = s.Int(14);
      e.hits = s.Int(15);
      out.push_back(std::move(e));
    }
  }));
  return out;
}

absl::StatusOr<std::optional<std::string>> Store::GetArtifactByKey(const std::string& key) {
  return Get(Kind::kArtifact, key, /*count_hit=*/false);
}
absl::StatusOr<std::optional<std::string>> Store::GetDecisionByKey(const std::string& key) {
  return Get(Kind::kDecision, key, /*count_hit=*/false);
}

absl::StatusOr<int> Store::Delete(const std::vector<std::string>& keys) {
  int deleted = 0;
  KFUSE_RETURN_IF_ERROR(Guarded([&] {
    return Write([&](Db& db) -> absl::Status {
      deleted = 0;
      // Deletes `key` of `kind` if stored; with an artifact, *decision is
      // the key of the decision it was built from (empty: not known).
      auto remove = [&](Kind kind, const std::string& key, std::string* decision) -> absl::Status {
        std::string sha;
        {
          KFUSE_ASSIGN_OR_RETURN(
              Stmt s, db.Prepare(absl::StrCat("SELECT blob_sha256, ",
                                              kind == Kind::kArtifact ? "decision_key" : "''", " FROM ",
                                              Table(kind), " WHERE key = ?1")));
          s.Bind(1, key);
          KFUSE_ASSIGN_OR_RETURN(bool row, s.Step());
          if (!row) return absl::OkStatus();
          sha = s.Text(0);
          if (decision != nullptr) *decision = s.Text(1);
        }
        KFUSE_ASSIGN_OR_RETURN(Stmt del, db.Prepare(absl::StrCat("DELETE FROM ", Table(kind), " WHERE key = ?1")));
        del.Bind(1, key);
        KFUSE_RETURN_IF_ERROR(del.Run());
        deleted += static_cast<int>(db.changes());
        return CollectBlob(db, sha);
      };
      for (const std::string& key : keys) {
        KFUSE_RETURN_IF_ERROR(remove(Kind::kDecision, key, nullptr));
        std::string decision;
        KFUSE_RETURN_IF_ERROR(remove(Kind::kArtifact, key, &decision));
        if (decision.empty()) continue;
        // The tuning decision the artifact was built from goes with it,
        // unless an artifact of another toolchain still stands on it: a
        // removed kernel is not rebuilt from its old choice.
        KFUSE_ASSIGN_OR_RETURN(Stmt others, db.Prepare("SELECT 1 FROM artifacts WHERE decision_key = ?1 LIMIT 1"));
        others.Bind(1, decision);
        KFUSE_ASSIGN_OR_RETURN(bool shared, others.Step());
        if (!shared) KFUSE_RETURN_IF_ERROR(remove(Kind::kDecision, decision, nullptr));
      }
      return deleted > 0 ? BumpInvalidations(db) : absl::OkStatus();
    });
  }));
  return deleted;
}

absl::StatusOr<int> Store::DeleteAll() {
  int deleted = 0;
  KFUSE_RETURN_IF_ERROR(Guarded([&] {
    return Write([&](Db& db) -> absl::Status {
      KFUSE_RETURN_IF_ERROR(db.Exec("DELETE FROM decisions"));
      deleted = static_cast<int>(db.changes());
      KFUSE_RETURN_IF_ERROR(db.Exec("DELETE FROM artifacts"));
      deleted += static_cast<int>(db.changes());
      KFUSE_RETURN_IF_ERROR(db.Exec("DELETE FROM blobs"));
      return BumpInvalidations(db);
    });
  }));
  TakePending();  // Counts for entries that no longer exist.
  return deleted;
}

absl::Status Store::PutRefusal(const Refusal& r) {
  return Guarded([&] {
    return Write([&](Db& db) -> absl::Status {
      KFUSE_ASSIGN_OR_RETURN(
          Stmt s, db.Prepare("INSERT OR REPLACE INTO refusals(key, reason, until_ms) VALUES (?1, ?2, ?3)"));
      s.Bind(1, r.key);
      s.Bind(2, r.reason);
      s.Bind(3, r.until_ms);
      KFUSE_RETURN_IF_ERROR(s.Run());
      return BumpInvalidations(db);  // Other processes on the file refuse it too.
    });
  });
}

absl::Status Store::DeleteRefusal(const std::string& key) {
  return Guarded([&] {
    return Write([&](Db& db) -> absl::Status {
      KFUSE_ASSIGN_OR_RETURN(Stmt s, db.Prepare("DELETE FROM refusals WHERE key = ?1"));
      s.Bind(1, key);
      KFUSE_RETURN_IF_ERROR(s.Run());
      return db.changes() > 0 ? BumpInvalidations(db) : absl::OkStatus();  // They lift it too.
    });
  });
}

absl::StatusOr<std::vector<Store::Refusal>> Store::Refusals() {
  std::vector<Refusal> out;
  const int64_t now = Now();
  KFUSE_RETURN_IF_ERROR(Guarded([&]() -> absl::Status {
    out.clear();
    if (schema_version_ < 4) return absl::OkStatus();  // A file from before refusals, read as it is.
    if (!opts_.read_only) {
      // Best effort: a busy writer or a full disk must not lose the rest,
      // nor hold up the reader (a request's MeasuredWrong may be waiting).
      Write(
          [&](Db& db) -> absl::Status {
            KFUSE_ASSIGN_OR_RETURN(Stmt s, db.Prepare("DELETE FROM refusals WHERE until_ms <= ?1"));
            s.Bind(1, now);
            return s.Run();
          },
          /*busy_timeout_ms=*/0)
          .IgnoreError();
    }
    KFUSE_ASSIGN_OR_RETURN(Reader r, AcquireReader());
    KFUSE_ASSIGN_OR_RETURN(
        Stmt s, r->Prepare("SELECT key, reason, until_ms FROM refusals WHERE until_ms > ?1 ORDER BY key"));
    s.Bind(1, now);
    for (;;) {
      KFUSE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back(Refusal{s.Text(0), s.Text(1), s.Int(2)});
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<Explanation> Store::Explain(const CacheKey& k) { return Explain(k, k); }

absl::StatusOr<Explanation> Store::Explain(const CacheKey& k, const CacheKey& decision) {
  const std::string artifact_key = k.ArtifactKey();
  const std::string decision_key = decision.DecisionKey();
  Explanation ex;
  std::string nearest_kind;
  CacheKey nearest;
  KFUSE_RETURN_IF_ERROR(Guarded([&]() -> absl::Status {
    KFUSE_ASSIGN_OR_RETURN(Reader r, AcquireReader());
    auto exists = [&](Kind kind, const std::string& key) -> absl::StatusOr<bool> {
      KFUSE_ASSIGN_OR_RETURN(
          Stmt s, r->Prepare(absl::StrCat("SELECT 1 FROM ", Table(kind), " WHERE key = ?1")));
      s.Bind(1, key);
      return s.Step();
    };
    KFUSE_ASSIGN_OR_RETURN(ex.found_exact, exists(Kind::kArtifact, artifact_key));
    KFUSE_ASSIGN_OR_RETURN(ex.decision_stored, exists(Kind::kDecision, decision_key));
    // Most equal parts first; among equals, the same chain, then the newest.
    for (Kind kind : {Kind::kArtifact, Kind::kDecision}) {
      const char* tc = kind == Kind::kArtifact ? "toolchain" : "''";
      KFUSE_ASSIGN_OR_RETURN(
          Stmt s,
          r->Prepare(absl::StrCat(
              "SELECT key, chain, spec, device, ", tc, ", generator FROM ", Table(kind),
              " ORDER BY (chain = ?1) + (spec = ?2) + (device = ?3) + (", tc,
              " = ?4) + (generator = ?5) DESC, chain = ?1 DESC, last_used_ms DESC LIMIT 1")));
      int i = 1;
      for (const auto& part : (kind == Kind::kArtifact ? k : decision).Parts()) s.Bind(i++, part.second);
      KFUSE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) continue;
      ex.nearest_key = s.Text(0);
      nearest = CacheKey{s.Text(1), s.Text(2), s.Text(3), s.Text(4), s.Text(5)};
      nearest_kind = KindName(kind);
      break;
    }
    return absl::OkStatus();
  }));

  if (ex.found_exact) {
    ex.nearest_key = artifact_key;
    ex.text = absl::StrCat("artifact ", artifact_key, " is stored (a hit)");
    if (!ex.decision_stored) absl::StrAppend(&ex.text, "; its tuning decision is not stored");
    return ex;
  }
  if (ex.nearest_key.empty()) {
    ex.text = absl::StrCat("no artifact ", artifact_key,
                           ": the store holds no entries to compare with (a cold miss)");
    return ex;
  }
  const auto want = (nearest_kind == "decision" ? decision : k).Parts();
  const auto have = nearest.Parts();
  std::vector<std::string> lines;
  for (size_t i = 0; i < want.size(); ++i) {
    if (nearest_kind == "decision" && want[i].first == "toolchain") continue;
    if (want[i].second == have[i].second) continue;
    ex.differing_parts.push_back(want[i].first);
    lines.push_back(absl::StrCat("  ", want[i].first, ": stored '", have[i].second,
                                 "', requested '", want[i].second, "'"));
  }
  ex.text = absl::StrCat("no artifact ", artifact_key, "; the nearest stored ", nearest_kind, " ",
                         ex.nearest_key, " differs in ", absl::StrJoin(ex.differing_parts, ", "),
                         ":\n", absl::StrJoin(lines, "\n"), "\n");
  absl::StrAppend(&ex.text,
                  ex.decision_stored
                      ? "the tuning decision for this key is stored: a recompile, not a retune"
                      : "no tuning decision for this key either");
  return ex;
}

absl::StatusOr<int64_t> Store::TotalBytes() {
  int64_t total = 0;
  KFUSE_RETURN_IF_ERROR(Guarded([&]() -> absl::Status {
    KFUSE_ASSIGN_OR_RETURN(Reader r, AcquireReader());
    KFUSE_ASSIGN_OR_RETURN(total, r->QueryInt("SELECT total_bytes FROM stats WHERE id = 1"));
    return absl::OkStatus();
  }));
  return total;
}

absl::Status Store::IntegrityCheck() {
  // Not Guarded: a corrupt file is reported here, not moved aside.
  absl::ReaderMutexLock l(&db_mu_);
  KFUSE_ASSIGN_OR_RETURN(Reader r, AcquireReader());
  KFUSE_ASSIGN_OR_RETURN(Stmt s, r->Prepare("PRAGMA integrity_check(20)"));
  std::vector<std::string> problems;
  for (;;) {
    KFUSE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    std::string line = s.Text(0);
    if (line != "ok") problems.push_back(std::move(line));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::DataLossError(
      absl::StrCat("cache database ", opts_.path,
                   " fails its integrity check: ", absl::StrJoin(problems, "; ")));
}

}  // namespace kfuse
