// The kernel store: tuning decisions and compiled artifacts, as opaque blobs,
// in one SQLite file that a server and the CLI may share.
//
//   KFUSE_ASSIGN_OR_RETURN(auto store, Store::Open({.path = "/var/cache/kfuse/store.db"}));
//   KFUSE_ASSIGN_OR_RETURN(auto hit, store->GetArtifact(key));
//   if (!hit) {
//     ... compile (re-using store->GetDecision(key) when the toolchain moved) ...
//     KFUSE_RETURN_IF_ERROR(store->PutArtifact(key, serialized, meta));  // durable on OK
//   }
//
// Decisions are keyed by CacheKey::DecisionKey() (no toolchain: a driver or
// NVRTC upgrade recompiles, it does not retune), artifacts by ArtifactKey().
// Every blob is sha256-checked on read; a bad blob is a miss and goes to the
// quarantine table. A corrupt file is renamed to <path>.corrupt-<ms> and a
// fresh one created. Past max_bytes the least recently used entries go.
// Thread-safe; docs/cache.md describes the schema and the sharing rules.
#ifndef KFUSE_CACHE_STORE_H_
#define KFUSE_CACHE_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cache/sqlite.h"
#include "core/key.h"

namespace kfuse {

// Bytes of quarantined data kept (beside the newest row, whatever its size):
// a sixteenth of the cap, which quarantined rows are not counted in.
inline int64_t QuarantineMaxBytes(int64_t max_bytes) { return max_bytes / 16; }

struct StoreOptions {
  std::string path;
  int64_t max_bytes = 4LL << 30;  // Cap on stored blob bytes; LRU past it.
  int busy_timeout_ms = 5000;
  bool read_only = false;  // SQLITE_OPEN_READONLY: Puts fail, hits not counted.
  // Milliseconds since the epoch; the wall clock when empty (tests inject).
  std::function<int64_t()> now_ms;
};

// What a human reads in `kfuse cache list`; not part of the key.
struct EntryMeta {
  std::string family;       // "pointwise", "row_reduction", ...
  std::string arch;         // "sm_90a"
  std::string device;       // Device name, e.g. "NVIDIA H200".
  std::string state;        // "tuned" | "heuristic"
  std::string description;  // One line: the chain, shortly.
  // Artifacts: the key of the tuning decision they were built from, when
  // the writer knows it (a build; not an import or a fleet entry).
  std::string decision_key;
};

struct EntrySummary {
  std::string key;
  std::string kind;  // "decision" | "artifact"
  CacheKey parts;    // toolchain is empty for decisions.
  EntryMeta meta;
  int64_t bytes = 0;
  int64_t created_ms = 0;
  int64_t last_used_ms = 0;
  int64_t hits = 0;
};

struct Explanation {
  bool found_exact = false;                  // The artifact for this exact key is stored.
  std::string nearest_key;                   // Empty when the store holds nothing comparable.
  std::vector<std::string> differing_parts;  // e.g. {"toolchain"}
  bool decision_stored = false;              // The tuning decision for this key is.
  std::string text;                          // For humans: what differs and what it costs.
};

class Store {
 public:
  static absl::StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  absl::StatusOr<std::optional<std::string>> GetDecision(const CacheKey& k);
  absl::Status PutDecision(const CacheKey& k, const std::string& blob, const EntryMeta& meta);
  absl::StatusOr<std::optional<std::string>> GetArtifact(const CacheKey& k);
  // A hit on the artifact of this key (CacheKey::ArtifactKey, a plan's
  // `key`) served from a copy in memory: counted and dated as GetArtifact's
  // hits are (in memory, written by the flusher), so the LRU order sees the
  // entries that are hot.
  void NoteArtifactHit(const std::string& artifact_key);
  absl::Status PutArtifact(const CacheKey& k, const std::string& blob, const EntryMeta& meta);

  // Entries whose key starts with `key_prefix`, most recently used first;
  // limit <= 0 means all; `kind` "decision" or "artifact" keeps only those.
  absl::StatusOr<std::vector<EntrySummary>> List(const std::string& key_prefix, int limit,
                                                 const std::string& kind = "");
  // For `cache show`: the blob stored under an artifact (or decision) key.
  absl::StatusOr<std::optional<std::string>> GetArtifactByKey(const std::string& artifact_key);
  absl::StatusOr<std::optional<std::string>> GetDecisionByKey(const std::string& decision_key);
  // Removes the entries stored under `keys` (decision or artifact keys) and,
  // with an artifact, the decision it was built from (EntryMeta's
  // decision_key) when no other artifact stands on it; the number of
  // entries removed.
  absl::StatusOr<int> Delete(const std::vector<std::string>& keys);
  absl::StatusOr<int> DeleteAll();
  // Chains refused until `until_ms` (Unix milliseconds, compared with the
  // store's clock, StoreOptions::now_ms) because tuning
  // measured their answer wrong (service/pipeline.h), kept so a restart does
  // not serve it: local to this file, never in the fleet, and not entries
  // (not listed, counted, evicted or deleted with them).
  struct Refusal {
    std::string key;
    std::string reason;
    int64_t until_ms = 0;
  };
  absl::Status PutRefusal(const Refusal& r);  // Replaces the key's.
  absl::Status DeleteRefusal(const std::string& key);
  // Those that last past now; expired ones are deleted, when the store can
  // write at once (their deletion failing or finding the file locked is no
  // error, and does not wait). A read-only open of a file
  // from before refusals has none.
  absl::StatusOr<std::vector<Refusal>> Refusals();
  // Which key parts differ from the nearest stored entry (most parts equal).
  absl::StatusOr<Explanation> Explain(const CacheKey& k);
  // The same, where the request's tuning decision is filed under another key
  // than its artifact (the service keys decisions by variant schema).
  absl::StatusOr<Explanation> Explain(const CacheKey& k, const CacheKey& decision);
  // Sum of stored blob bytes (what max_bytes caps).
  absl::StatusOr<int64_t> TotalBytes();
  // PRAGMA integrity_check; DataLoss naming the first problem.
  absl::Status IntegrityCheck();
  // Entries moved to quarantine by this object since Open.
  int64_t quarantined() const { return quarantined_.load(); }
  // Hits are counted in memory and written about once a second (a hit stays
  // a read); this writes them now. Called by Put and the destructor.
  // `wait`: false gives up at once (Unavailable, the hits kept for the next
  // flush) while another process holds the write lock.
  absl::Status FlushHits(bool wait = true);
  // Moves (about once a second, read-only opens too) when any process on
  // the file deleted an entry or gave one another blob: what a caller keeps
  // of the store in memory is stale then.
  uint64_t invalidations() const { return invalidations_.load(); }
  // Reads the file's invalidation counter now (the background thread's
  // check).
  absl::Status PollInvalidations();

  enum class Kind { kDecision, kArtifact };

 private:
  struct Pending {
    int64_t last_used_ms = 0;
    int64_t hits = 0;
  };
  using PendingMap = std::map<std::pair<Kind, std::string>, Pending>;

  // A reader connection on loan from the pool; returned when destroyed.
  class Reader {
   public:
    Reader(Store* store, std::unique_ptr<cache::Db> db) : store_(store), db_(std::move(db)) {}
    Reader(Reader&&) = default;
    Reader& operator=(Reader&&) = default;
    ~Reader();
    cache::Db* operator->() const { return db_.get(); }
    cache::Db& operator*() const { return *db_; }

   private:
    Store* store_;
    std::unique_ptr<cache::Db> db_;
  };

  explicit Store(const StoreOptions& options);
  int64_t Now() const;
  absl::Status OpenFile() ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  void CloseFile() ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  // A read-only open's first reader (of reader_uri_, or the path).
  absl::Status OpenReader() ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_, pool_mu_);
  absl::Status MoveCorruptAside(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  // Runs `op` under the shared lock. If SQLite reports a corrupt file, moves
  // it aside, opens a fresh one and runs `op` once more.
  absl::Status Guarded(const std::function<absl::Status()>& op);
  // After a corrupt file was moved aside and the fresh one could not be made
  // (a full disk, say): tries again, at most once a second; Unavailable
  // until it succeeds.
  absl::Status ReopenIfLost();
  // Unavailable naming lost_ while the store has no file; OK otherwise.
  absl::Status LostStatus() const ABSL_SHARED_LOCKS_REQUIRED(db_mu_);
  // Whether the path names a file other than the one this store opened (a
  // process sharing it moved it aside as corrupt and made a fresh one).
  bool PathWasReplaced() ABSL_SHARED_LOCKS_REQUIRED(db_mu_);
  // Whether the file this store opened is no longer at the path and nothing
  // is there (deleted by hand).
  bool PathWasDeleted() ABSL_SHARED_LOCKS_REQUIRED(db_mu_);
  // Reopens the path when it was replaced, so that this process writes where
  // the others read, or (read-only) serves the file put there; a writer
  // whose file was deleted says so, once. Called once a second.
  void FollowReplacedFile();
  void FollowReplacedReadOnlyFile() ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  // Notes the device and inode at the path: the file opened.
  void RememberFile() ABSL_EXCLUSIVE_LOCKS_REQUIRED(db_mu_);
  absl::StatusOr<Reader> AcquireReader() ABSL_SHARED_LOCKS_REQUIRED(db_mu_);
  // Runs `body` in a write transaction on the writer connection, waiting
  // up to `busy_timeout_ms` (-1: the store's) for another process's lock.
  absl::Status Write(const std::function<absl::Status(cache::Db&)>& body, int busy_timeout_ms = -1)
      ABSL_SHARED_LOCKS_REQUIRED(db_mu_);
  absl::Status WriteLocked(const std::function<absl::Status(cache::Db&)>& body, int busy_timeout_ms)
      ABSL_SHARED_LOCKS_REQUIRED(db_mu_) ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_);

  absl::StatusOr<std::optional<std::string>> Get(Kind kind, const std::string& key, bool count_hit);
  absl::Status Put(Kind kind, const CacheKey& k, const std::string& blob, const EntryMeta& meta);
  absl::Status Quarantine(Kind kind, const std::string& key, const std::string& sha,
                          const std::string& data) ABSL_SHARED_LOCKS_REQUIRED(db_mu_);
  absl::Status Evict(cache::Db& db, Kind keep_kind, const std::string& keep_key);
  void RecordHit(Kind kind, const std::string& key);
  static absl::Status ApplyHits(cache::Db& db, const PendingMap& hits);
  // Raises the last use of the decision `artifact_key` was built from.
  static absl::Status TouchDecisionOf(cache::Db& db, const std::string& artifact_key, int64_t last_used_ms);
  PendingMap TakePending();
  void RestorePending(PendingMap taken);
  void FlusherLoop();

  const StoreOptions opts_;
  std::atomic<int64_t> quarantined_{0};

  // Shared by every operation; exclusive only to swap a corrupt file out.
  absl::Mutex db_mu_;
  uint64_t generation_ ABSL_GUARDED_BY(db_mu_) = 0;
  // Why the fresh file could not be made after a move aside (OK: open), and
  // when to try again.
  absl::Status lost_ ABSL_GUARDED_BY(db_mu_);
  absl::Time reopen_at_ ABSL_GUARDED_BY(db_mu_);
  // The file opened (device and inode), to tell when the path is replaced.
  uint64_t file_dev_ ABSL_GUARDED_BY(db_mu_) = 0;
  uint64_t file_ino_ ABSL_GUARDED_BY(db_mu_) = 0;
  // A read-only store: the inode of a replacing file that could not be
  // opened, said once (0: none).
  uint64_t refused_ino_ ABSL_GUARDED_BY(db_mu_) = 0;
  // A writer: the inode of the open file whose deletion was said (0: none).
  // Atomic: set under the shared lock, by the one thread that polls.
  std::atomic<uint64_t> deleted_said_ino_{0};
  // Read-only opens of a file in a folder this process cannot write: the
  // immutable URI every connection opens; empty otherwise.
  std::string reader_uri_ ABSL_GUARDED_BY(db_mu_);
  // The schema version of the open file (a read-only open may read an older
  // one: Migrate).
  int64_t schema_version_ ABSL_GUARDED_BY(db_mu_) = 0;
  absl::Mutex poll_mu_;  // One poll at a time (the thread's and a caller's).
  absl::Mutex writer_mu_ ABSL_ACQUIRED_AFTER(db_mu_);
  std::unique_ptr<cache::Db> writer_ ABSL_GUARDED_BY(writer_mu_);  // Null when read_only.
  absl::Mutex pool_mu_ ABSL_ACQUIRED_AFTER(db_mu_);
  std::vector<std::unique_ptr<cache::Db>> idle_readers_ ABSL_GUARDED_BY(pool_mu_);
  int readers_out_ ABSL_GUARDED_BY(pool_mu_) = 0;  // Connections on loan (Reader).
  // A connection is idle, or none is on loan to come back.
  bool ReaderIdleOrNoneOut() const ABSL_SHARED_LOCKS_REQUIRED(pool_mu_) {
    return !idle_readers_.empty() || readers_out_ == 0;
  }

  absl::Mutex hits_mu_;
  PendingMap pending_ ABSL_GUARDED_BY(hits_mu_);

  std::atomic<uint64_t> invalidations_{0};
  std::atomic<int64_t> invalidations_seen_{-1};  // The file's counter at the last poll.

  absl::Mutex stop_mu_;
  bool stop_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread flusher_;
};

}  // namespace kfuse

#endif  // KFUSE_CACHE_STORE_H_
