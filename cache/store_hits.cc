// Hit accounting: a hit is counted in memory and written in batches, so that
// a hit is a read and never waits on an fsync.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cache/store.h"
#include "cache/store_sql.h"
#include "core/log.h"
#include "core/status.h"

namespace kfuse {

using cache::Db;
using cache::Stmt;
using cache::Table;

void Store::RecordHit(Kind kind, const std::string& key) {
  if (opts_.read_only) return;
  const int64_t now = Now();
  absl::MutexLock l(&hits_mu_);
  Pending& p = pending_[{kind, key}];
  p.last_used_ms = std::max(p.last_used_ms, now);
  ++p.hits;
}

Store::PendingMap Store::TakePending() {
  absl::MutexLock l(&hits_mu_);
  PendingMap taken;
  taken.swap(pending_);
  return taken;
}

void Store::RestorePending(PendingMap taken) {
  absl::MutexLock l(&hits_mu_);
  for (auto& [k, v] : taken) {
    Pending& p = pending_[k];
    p.last_used_ms = std::max(p.last_used_ms, v.last_used_ms);
    p.hits += v.hits;
  }
}

absl::Status Store::ApplyHits(Db& db, const PendingMap& hits) {
  for (const auto& [k, v] : hits) {
    KFUSE_ASSIGN_OR_RETURN(Stmt s,
                           db.Prepare(absl::StrCat("UPDATE ", Table(k.first),
                                                   " SET last_used_ms = max(last_used_ms, ?1),"
                                                   " hits = hits + ?2 WHERE key = ?3")));
    s.Bind(1, v.last_used_ms);
    s.Bind(2, v.hits);
    s.Bind(3, k.second);
    KFUSE_RETURN_IF_ERROR(s.Run());
    if (k.first == Kind::kArtifact) KFUSE_RETURN_IF_ERROR(TouchDecisionOf(db, k.second, v.last_used_ms));
  }
  return absl::OkStatus();
}

absl::Status Store::TouchDecisionOf(Db& db, const std::string& artifact_key, int64_t last_used_ms) {
  // A decision is read only on a miss, so its own last use is when it was
  // made; an artifact served from it keeps it as recent as itself, or the
  // size cap would evict the decisions of the hottest kernels first, the
  // ones a toolchain upgrade then retunes.
  KFUSE_ASSIGN_OR_RETURN(
      Stmt u, db.Prepare("UPDATE decisions SET last_used_ms = max(last_used_ms, ?1)"
                         " WHERE key = (SELECT decision_key FROM artifacts WHERE key = ?2)"));
  u.Bind(1, last_used_ms);
  u.Bind(2, artifact_key);
  return u.Run();
}

absl::Status Store::FlushHits(bool wait) {
  PendingMap hits = TakePending();
  if (hits.empty()) return absl::OkStatus();
  absl::Status st = Guarded([&] {
    return Write([&](Db& db) { return ApplyHits(db, hits); }, wait ? opts_.busy_timeout_ms : 0);
  });
  if (!st.ok()) RestorePending(std::move(hits));
  return st;
}

absl::Status Store::PollInvalidations() {
  absl::MutexLock poll(&poll_mu_);
  int64_t now = 0;
  KFUSE_RETURN_IF_ERROR(Guarded([&]() -> absl::Status {
    if (schema_version_ < 2) return absl::OkStatus();  // A version-1 file read as it is: no counter.
    KFUSE_ASSIGN_OR_RETURN(Reader r, AcquireReader());
    KFUSE_ASSIGN_OR_RETURN(now, r->QueryInt("SELECT invalidations FROM stats WHERE id = 1"));
    return absl::OkStatus();
  }));
  const int64_t before = invalidations_seen_.exchange(now);
  if (before >= 0 && before != now) ++invalidations_;
  return absl::OkStatus();
}

void Store::FlusherLoop() {
  // A store that becomes unwritable after start fails every round: one line
  // a minute says so, and one more when the hits are written again.
  RepeatedFailureLog flush_log("store_hits_not_written", absl::Minutes(1));
  absl::MutexLock l(&stop_mu_);
  while (!stop_) {
    stop_mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Seconds(1));
    if (stop_) break;
    stop_mu_.Unlock();
    absl::Status st = opts_.read_only ? absl::OkStatus() : FlushHits();
    if (st.ok()) {
      flush_log.Succeeded({{"store", opts_.path}});
    } else if (!absl::IsUnavailable(st)) {
      flush_log.Failed(absl::Now(), {{"store", opts_.path}, {"error", st.ToString()}});
    }
    // A failed read is tried again next second.
    PollInvalidations().IgnoreError();
    FollowReplacedFile();
    stop_mu_.Lock();
  }
}

}  // namespace kfuse
