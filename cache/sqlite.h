// Thin RAII over the SQLite C API, so that the store reads as SQL and status
// checks instead of handle bookkeeping.
//
//   KFUSE_ASSIGN_OR_RETURN(auto db, Db::Open(path, SQLITE_OPEN_READWRITE, 5000));
//   KFUSE_RETURN_IF_ERROR(db->Exec("PRAGMA foreign_keys=ON"));
//   KFUSE_ASSIGN_OR_RETURN(Stmt s, db->Prepare("SELECT data FROM blobs WHERE sha256=?"));
//   s.Bind(1, sha);
//   KFUSE_ASSIGN_OR_RETURN(bool row, s.Step());
//
// Error mapping (callers rely on it): SQLITE_CORRUPT and SQLITE_NOTADB become
// absl::DataLossError (the store then recovers the file), SQLITE_BUSY and
// SQLITE_LOCKED become absl::UnavailableError (retryable), SQLITE_FULL becomes
// ResourceExhausted, SQLITE_READONLY FailedPrecondition, others Internal.
#ifndef KFUSE_CACHE_SQLITE_H_
#define KFUSE_CACHE_SQLITE_H_

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kfuse::cache {

// Maps an SQLite result code to a status; `what` names the operation.
absl::Status SqliteStatus(int rc, sqlite3* db, absl::string_view what);

// A prepared statement, reset and unbound when it goes out of scope. A Stmt
// borrowed from Db's statement cache returns to it; an owned one finalises.
class Stmt {
 public:
  Stmt() = default;
  Stmt(sqlite3_stmt* s, sqlite3* db, bool owned) : s_(s), db_(db), owned_(owned) {}
  Stmt(Stmt&& o) noexcept { *this = std::move(o); }
  Stmt& operator=(Stmt&& o) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt();

  void Bind(int i, absl::string_view text);
  void Bind(int i, int64_t v);
  void BindBlob(int i, absl::string_view data);
  // True while a row is available; OK(false) when done.
  absl::StatusOr<bool> Step();
  // Steps a statement that returns no rows.
  absl::Status Run();

  int64_t Int(int col) const { return sqlite3_column_int64(s_, col); }
  std::string Text(int col) const;
  std::string Blob(int col) const;

 private:
  void Release();

  sqlite3_stmt* s_ = nullptr;
  sqlite3* db_ = nullptr;
  bool owned_ = false;
};

// One connection. Not thread-safe: the store hands each to one thread at a time.
class Db {
 public:
  // `flags` are SQLITE_OPEN_* (NOMUTEX is added: callers serialise access).
  static absl::StatusOr<std::unique_ptr<Db>> Open(const std::string& path, int flags,
                                                  int busy_timeout_ms);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  absl::Status Exec(const std::string& sql);
  // A statement from this connection's cache (prepared once, kept).
  absl::StatusOr<Stmt> Prepare(const std::string& sql);
  // Runs `body` in BEGIN IMMEDIATE ... COMMIT, rolling back on error and
  // retrying the whole transaction, up to `attempts` times in all, while
  // SQLite reports BUSY past the timeout.
  absl::Status Transaction(const std::function<absl::Status()>& body, int attempts = 5);
  // Single integer result of a query such as "PRAGMA user_version".
  absl::StatusOr<int64_t> QueryInt(const std::string& sql);

  sqlite3* raw() const { return db_; }
  int64_t changes() const { return sqlite3_changes64(db_); }

 private:
  explicit Db(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  std::map<std::string, sqlite3_stmt*> cache_;
};

}  // namespace kfuse::cache

#endif  // KFUSE_CACHE_SQLITE_H_
