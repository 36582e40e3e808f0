// SQL shared by store.cc and store_admin.cc: table names and the key columns
// each kind stores. Internal to cache/.
#ifndef KFUSE_CACHE_STORE_SQL_H_
#define KFUSE_CACHE_STORE_SQL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "cache/sqlite.h"
#include "cache/store.h"
#include "core/key.h"

namespace kfuse::cache {

inline const char* Table(::kfuse::Store::Kind kind) {
  return kind == ::kfuse::Store::Kind::kDecision ? "decisions" : "artifacts";
}
inline const char* KindName(::kfuse::Store::Kind kind) {
  return kind == ::kfuse::Store::Kind::kDecision ? "decision" : "artifact";
}
inline std::string KeyOf(::kfuse::Store::Kind kind, const CacheKey& k) {
  return kind == ::kfuse::Store::Kind::kDecision ? k.DecisionKey() : k.ArtifactKey();
}
// The key parts a kind stores (decisions have no toolchain), in Parts() order.
inline std::vector<std::pair<std::string, std::string>> KeyColumns(::kfuse::Store::Kind kind,
                                                                   const CacheKey& k) {
  std::vector<std::pair<std::string, std::string>> cols;
  for (auto& part : k.Parts()) {
    if (kind == ::kfuse::Store::Kind::kDecision && part.first == "toolchain") continue;
    cols.push_back(std::move(part));
  }
  return cols;
}

// Deletes the blob `sha` unless an entry still refers to it.
inline absl::Status CollectBlob(Db& db, const std::string& sha) {
  auto s = db.Prepare(
      "DELETE FROM blobs WHERE sha256 = ?1"
      " AND NOT EXISTS (SELECT 1 FROM decisions WHERE blob_sha256 = ?1)"
      " AND NOT EXISTS (SELECT 1 FROM artifacts WHERE blob_sha256 = ?1)");
  if (!s.ok()) return s.status();
  s->Bind(1, sha);
  return s->Run();
}

// Tells every process on the file that an entry it may keep in memory was
// deleted or quarantined (stats.invalidations, schema version 2; writers
// always open at the current version).
inline absl::Status BumpInvalidations(Db& db) {
  return db.Exec("UPDATE stats SET invalidations = invalidations + 1 WHERE id = 1");
}

}  // namespace kfuse::cache

#endif  // KFUSE_CACHE_STORE_SQL_H_
