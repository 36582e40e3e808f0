// Entries as they travel between nodes (kfuse.v1.StoreEntry: the fleet
// store, exported bundles) and back into a node's store. Signing and
// checking signatures is plan/signing.h's; this file keeps the key honest.
//
//   v1::StoreEntry e = MakeStoreEntry(Store::Kind::kArtifact, key, meta, blob, origin);
//   SignStoreEntry(node_key, &e);                 // plan/signing.h
//   ...
//   KFUSE_RETURN_IF_ERROR(VerifyStoreEntry(e, trusted));
//   KFUSE_RETURN_IF_ERROR(PutStoreEntry(store, e));  // checks the key, then stores
#ifndef KFUSE_CACHE_STORE_ENTRY_H_
#define KFUSE_CACHE_STORE_ENTRY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/store.h"
#include "core/key.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse {

// Who made an entry: provenance that travels with it.
struct EntryOrigin {
  std::string node;
  int64_t created_unix_ms = 0;
  std::string kfuse_version;
};

// An unsigned entry: parts, meta, blob and its sha256, origin. The key is
// DecisionKey() or ArtifactKey() of `key` as `kind` says (decisions carry no
// toolchain).
v1::StoreEntry MakeStoreEntry(Store::Kind kind, const CacheKey& key, const EntryMeta& meta,
                              std::string blob, const EntryOrigin& origin);

// "decision" | "artifact" -> kind; INVALID_ARGUMENT naming the field otherwise.
absl::StatusOr<Store::Kind> EntryKind(const v1::StoreEntry& e);
CacheKey EntryKey(const v1::StoreEntry& e);
EntryMeta EntryMetaOf(const v1::StoreEntry& e);

// INVALID_ARGUMENT when `key` is not the hash of the entry's parts (an entry
// filed under another key), or the kind is unknown.
absl::Status CheckEntryKey(const v1::StoreEntry& e);

// Checks the key, then puts the entry's blob into `store` under it. The
// caller verified the signature (plan/signing.h VerifyStoreEntry).
absl::Status PutStoreEntry(Store& store, const v1::StoreEntry& e);

}  // namespace kfuse

#endif  // KFUSE_CACHE_STORE_ENTRY_H_
