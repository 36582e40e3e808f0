#include "cache/store_entry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace kfuse {

v1::StoreEntry MakeStoreEntry(Store::Kind kind, const CacheKey& key, const EntryMeta& meta, std::string blob,
                              const EntryOrigin& origin) {
  v1::StoreEntry e;
  const bool decision = kind == Store::Kind::kDecision;
  e.set_kind(decision ? "decision" : "artifact");
  e.set_key(decision ? key.DecisionKey() : key.ArtifactKey());
  e.set_chain(key.chain);
  e.set_spec(key.spec);
  e.set_device(key.device);
  if (!decision) e.set_toolchain(key.toolchain);
  e.set_generator(key.generator);
  e.set_family(meta.family);
  e.set_arch(meta.arch);
  e.set_device_name(meta.device);
  e.set_state(meta.state);
  e.set_description(meta.description);
  e.set_blob_sha256(Sha256Hex(blob));
  e.set_blob(std::move(blob));
  e.set_node(origin.node);
  e.set_created_unix_ms(origin.created_unix_ms);
  e.set_kfuse_version(origin.kfuse_version);
  return e;
}

absl::StatusOr<Store::Kind> EntryKind(const v1::StoreEntry& e) {
  if (e.kind() == "decision") return Store::Kind::kDecision;
  if (e.kind() == "artifact") return Store::Kind::kArtifact;
  return absl::InvalidArgumentError(
      absl::StrCat("entry ", e.key().substr(0, 16), ": kind must be \"decision\" or \"artifact\""));
}

CacheKey EntryKey(const v1::StoreEntry& e) {
  return CacheKey{e.chain(), e.spec(), e.device(), e.toolchain(), e.generator()};
}

EntryMeta EntryMetaOf(const v1::StoreEntry& e) {
  return EntryMeta{e.family(), e.arch(), e.device_name(), e.state(), e.description()};
}

absl::Status CheckEntryKey(const v1::StoreEntry& e) {
  KFUSE_ASSIGN_OR_RETURN(Store::Kind kind, EntryKind(e));
  const CacheKey k = EntryKey(e);
  if (kind == Store::Kind::kDecision && !e.toolchain().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("entry ", e.key().substr(0, 16), ": a decision has no toolchain"));
  }
  const std::string want = kind == Store::Kind::kDecision ? k.DecisionKey() : k.ArtifactKey();
  if (want != e.key()) {
    return absl::InvalidArgumentError(
        absl::StrCat("entry ", e.key().substr(0, 16), ": key is not the hash of its parts (", want.substr(0, 16), ")"));
  }
  return absl::OkStatus();
}

absl::Status PutStoreEntry(Store& store, const v1::StoreEntry& e) {
  KFUSE_RETURN_IF_ERROR(CheckEntryKey(e));
  if (Sha256Hex(e.blob()) != e.blob_sha256()) {
    return absl::DataLossError(absl::StrCat("entry ", e.key().substr(0, 16), ": blob does not match its sha256"));
  }
  const CacheKey k = EntryKey(e);
  return e.kind() == "decision" ? store.PutDecision(k, e.blob(), EntryMetaOf(e))
                                : store.PutArtifact(k, e.blob(), EntryMetaOf(e));
}

}  // namespace kfuse
