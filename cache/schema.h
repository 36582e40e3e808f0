// The store's SQLite schema and its migrations, kept apart from the store so
// that a schema change is one new function appended to a list.
//
//   KFUSE_RETURN_IF_ERROR(ConfigureWriter(db));    // WAL, synchronous=FULL, ...
//   KFUSE_RETURN_IF_ERROR(Migrate(db, path, /*read_only=*/false));
//
// The version lives in PRAGMA user_version; version N is reached from N-1 by
// the N-th step of the migration table, inside one transaction.
#ifndef KFUSE_CACHE_SCHEMA_H_
#define KFUSE_CACHE_SCHEMA_H_

#include <string>

#include "absl/status/status.h"
#include "cache/sqlite.h"

namespace kfuse::cache {

// The schema version this binary writes (the length of the migration table).
int SchemaVersion();

// Before anything is written to the file at `path`: OK for an empty
// database or a kfuse store this binary speaks; FailedPrecondition for one
// of a newer schema, and for an SQLite database kfuse did not make (another
// program's tables), which are left as they are.
absl::Status CheckOwnFile(Db& db, const std::string& path);

// Whether the file at `path`, which SQLite finds damaged, was a kfuse store:
// its first pages (or its write-ahead log's) still hold the schema kfuse
// writes. Only such a file is
// moved aside; any other is not kfuse's to move.
bool LooksLikeKfuseStore(const std::string& path);

// Pragmas for the connection that writes: WAL, synchronous=FULL, foreign keys.
absl::Status ConfigureWriter(Db& db);
// Pragmas for a connection that only reads.
absl::Status ConfigureReader(Db& db);

// Brings the database to SchemaVersion() and sets *opened (if given) to the
// version it is at. A database newer than this binary, or one that needs a
// migration a reader cannot do without while `read_only`, is
// FailedPrecondition; an older file whose later steps are read-compatible is
// read as it is.
absl::Status Migrate(Db& db, const std::string& path, bool read_only, int64_t* opened = nullptr);

// Touches the root page of every table the file's schema `version` has, so
// that a file whose pages are garbage, or that lacks one of those tables, is
// found at open (DataLoss) rather than at the first hit.
absl::Status Probe(Db& db, const std::string& path, int64_t version);
// Rewrites the stats row's byte total where it is missing or is not the
// blobs' sum (the file edited by hand): every Put reads it, and a missing
// row failed them all.
absl::Status ReconcileTotal(Db& db);

}  // namespace kfuse::cache

#endif  // KFUSE_CACHE_SCHEMA_H_
