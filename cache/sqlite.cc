#include "cache/sqlite.h"

#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace kfuse::cache {

absl::Status SqliteStatus(int rc, sqlite3* db, absl::string_view what) {
  if (rc == SQLITE_OK || rc == SQLITE_DONE || rc == SQLITE_ROW) return absl::OkStatus();
  std::string msg = absl::StrCat("sqlite: ", what, ": ", sqlite3_errstr(rc));
  if (db != nullptr) {
    const char* detail = sqlite3_errmsg(db);
    if (detail != nullptr && std::string(detail) != sqlite3_errstr(rc)) {
      absl::StrAppend(&msg, " (", detail, ")");
    }
  }
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(msg);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(msg);
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(msg);
    case SQLITE_READONLY:
      return absl::FailedPreconditionError(msg);
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
      return absl::PermissionDeniedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

Stmt& Stmt::operator=(Stmt&& o) noexcept {
  if (this != &o) {
    Release();
    s_ = std::exchange(o.s_, nullptr);
    db_ = o.db_;
    owned_ = o.owned_;
  }
  return *this;
}

Stmt::~Stmt() { Release(); }

void Stmt::Release() {
  if (s_ == nullptr) return;
  if (owned_) {
    sqlite3_finalize(s_);
  } else {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  s_ = nullptr;
}

void Stmt::Bind(int i, absl::string_view text) {
  sqlite3_bind_text(s_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}
void Stmt::Bind(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
void Stmt::BindBlob(int i, absl::string_view data) {
  sqlite3_bind_blob64(s_, i, data.data(), data.size(), SQLITE_TRANSIENT);
}

absl::StatusOr<bool> Stmt::Step() {
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteStatus(rc, db_, sqlite3_sql(s_));
}

absl::Status Stmt::Run() {
  KFUSE_ASSIGN_OR_RETURN(bool row, Step());
  (void)row;
  return absl::OkStatus();
}

std::string Stmt::Text(int col) const {
  const unsigned char* p = sqlite3_column_text(s_, col);
  int n = sqlite3_column_bytes(s_, col);
  return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p), n);
}

std::string Stmt::Blob(int col) const {
  const void* p = sqlite3_column_blob(s_, col);
  int n = sqlite3_column_bytes(s_, col);
  return p == nullptr ? std::string() : std::string(static_cast<const char*>(p), n);
}

absl::StatusOr<std::unique_ptr<Db>> Db::Open(const std::string& path, int flags,
                                             int busy_timeout_ms) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status st = SqliteStatus(rc, raw, absl::StrCat("open ", path));
    sqlite3_close_v2(raw);
    return st;
  }
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  return std::unique_ptr<Db>(new Db(raw));
}

Db::~Db() {
  for (auto& [sql, s] : cache_) sqlite3_finalize(s);
  sqlite3_close_v2(db_);
}

absl::Status Db::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);
  return SqliteStatus(rc, db_, sql);
}

absl::StatusOr<Stmt> Db::Prepare(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end()) return Stmt(it->second, db_, /*owned=*/false);
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  if (rc != SQLITE_OK) return SqliteStatus(rc, db_, absl::StrCat("prepare ", sql));
  cache_.emplace(sql, s);
  return Stmt(s, db_, /*owned=*/false);
}

absl::Status Db::Transaction(const std::function<absl::Status()>& body, int attempts) {
  // busy_timeout already waits inside SQLite; this loop only covers the rare
  // BUSY that SQLite returns without waiting (e.g. during another process's
  // WAL recovery) or a writer that held the lock past the timeout.
  absl::Status st;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    st = Exec("BEGIN IMMEDIATE");
    if (st.ok()) {
      st = body();
      if (st.ok()) st = Exec("COMMIT");
      if (!st.ok() && !sqlite3_get_autocommit(db_)) (void)Exec("ROLLBACK");
    }
    if (!absl::IsUnavailable(st)) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(5 << attempt));
  }
  return st;
}

absl::StatusOr<int64_t> Db::QueryInt(const std::string& sql) {
  KFUSE_ASSIGN_OR_RETURN(Stmt s, Prepare(sql));
  KFUSE_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return absl::InternalError(absl::StrCat("sqlite: no row from ", sql));
  return s.Int(0);
}

}  // namespace kfuse::cache
