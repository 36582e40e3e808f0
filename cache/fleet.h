// The fleet store: a PostgreSQL database that many kfuse nodes share, the
// second tier behind each node's SQLite store. Entries are published once
// per key and signer (content-addressed blobs, INSERT ... ON CONFLICT DO
// NOTHING) and never rewritten; readers ask for the rows of the signers
// they trust, so a row by any other signer never stands in for theirs; a
// tuning lease per key lets one node tune while the others wait
// for its result. The database being away is never an error for a request:
// calls return Unavailable at once while it is down, and the store retries
// the connection with a growing pause (docs/cache.md, "Fleet tier").
//
//   FleetOptions o; o.dsn = "host=pg dbname=kfuse user=kfuse_writer"; o.holder = "node-a/4242";
//   auto fleet = FleetStore::Create(o);
//   KFUSE_ASSIGN_OR_RETURN(std::vector<v1::StoreEntry> rows, fleet->Get(Store::Kind::kArtifact, key, signers));
//   KFUSE_ASSIGN_OR_RETURN(bool published, fleet->Publish(signed_entry));
//
// Signing and verifying entries is the caller's (plan/signing.h); this class
// moves rows. Thread-safe: a small pool of connections, one per call.
#ifndef KFUSE_CACHE_FLEET_H_
#define KFUSE_CACHE_FLEET_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cache/fleet_hosts.h"
#include "cache/store.h"
#include "kfuse/v1/kfuse.pb.h"

typedef struct pg_conn PGconn;

namespace kfuse {

// The schema version of deploy/postgres/fleet.sql this binary writes, and
// the oldest it still speaks (schema 1 keys an entry without its signer:
// the first row published under a key stands for every signer).
inline constexpr int kFleetSchemaVersion = 2;
inline constexpr int kFleetOldestSchemaVersion = 1;

struct FleetOptions {
  // libpq connection string or URI. Passwords belong in PGPASSWORD or
  // PGPASSFILE, not here (the string is logged without its password anyway).
  std::string dsn;
  bool read_only = false;  // A reader role: never publishes, never leases.
  std::string holder;      // This node in leases: name and process.
  // Bounds each connection attempt, the host names' lookups included
  // (cache/fleet_hosts.h).
  int connect_timeout_seconds = 2;
  // Looks a host name up (cache/fleet_hosts.h; empty: LookUpHost); tests
  // stand in a slow one.
  HostResolver resolve = LookUpHost;
  // The server's statement_timeout (a DSN's options may set another); a
  // statement whose answer has not come the session's timeout plus 2 s
  // after it was sent (a server stopped or swapped out, which keepalives do
  // not notice) is given up as an outage.
  int statement_timeout_ms = 5000;
  // After a failure, calls fail fast for this long, doubling up to the max.
  double retry_min_seconds = 1;
  double retry_max_seconds = 30;
  int max_idle_connections = 4;
  // Called on every change between up and down (and on the first success),
  // with the error that took it down: for warnings and the metric.
  std::function<void(bool up, const absl::Status& why)> on_state_change;
  // A node not configured read-only whose login cannot write (found at a
  // connection, or told by the database refusing a write) reads only, and
  // lets one write through every write_probe_seconds to find out whether
  // it may again (a grant since, a standby promoted).
  double write_probe_seconds = 60;
  // Called when such a node stops or starts writing, with why.
  std::function<void(bool writable, const std::string& why)> on_write_change;
};

// A libpq conninfo string or URI with any password replaced by ***.
std::string RedactDsn(const std::string& dsn);

class FleetStore {
 public:
  // Never fails and never blocks: connects on first use.
  static std::unique_ptr<FleetStore> Create(FleetOptions options);
  ~FleetStore();
  FleetStore(const FleetStore&) = delete;
  FleetStore& operator=(const FleetStore&) = delete;

  // The entries stored under (kind, key) by any of `signers` (32-byte
  // public keys), blobs included, first published first; empty when none.
  // Unavailable when the database cannot be reached (or is in its retry
  // pause); FailedPrecondition when its schema is not one this binary
  // speaks.
  absl::StatusOr<std::vector<v1::StoreEntry>> Get(Store::Kind kind, const std::string& key,
                                                  const std::vector<std::string>& signers);
  // How many entries are stored under (kind, key), whoever signed them.
  absl::StatusOr<int64_t> Count(Store::Kind kind, const std::string& key);
  // Publishes a signed entry and its blob in one transaction: true. An
  // entry already there for the key and signer (for the key alone under
  // schema 1) is left as it is: false. FailedPrecondition when read-only.
  absl::StatusOr<bool> Publish(const v1::StoreEntry& entry);

  // Takes the tuning lease on `key` for ttl_seconds when it is free, expired
  // or already ours. true: ours; false: another node holds it.
  absl::StatusOr<bool> TryLease(const std::string& key, double ttl_seconds);
  // Gives the lease back if we hold it.
  absl::Status ReleaseLease(const std::string& key);
  // Extends to ttl_seconds from now those of `keys` whose lease we still
  // hold (expired or not, if no other node took it); returns them. Never
  // takes a lease that is free.
  absl::StatusOr<std::vector<std::string>> RenewLeases(const std::vector<std::string>& keys, double ttl_seconds);

  // Connects (or reuses a connection) and checks the schema: OK when the
  // database answers. Respects the retry pause.
  absl::Status Ping();

  // Whether the last call reached the database.
  bool up() const;
  // Whether this node writes nothing now: configured so
  // (options().read_only), or its login cannot write (a reader role without
  // --fleet_read_only, a standby server, read-only transactions): found
  // when a connection is made or a write refused, said once as
  // `fleet_login_read_only`, and looked at again by one write every
  // write_probe_seconds. Publishing and leasing then fail with
  // FailedPrecondition, untried.
  bool read_only() const;
  const FleetOptions& options() const { return opts_; }
  // The DSN without any password, for logs.
  std::string DisplayDsn() const { return RedactDsn(opts_.dsn); }

 private:
  explicit FleetStore(FleetOptions options);

  struct Conn;  // Owns a PGconn.
  // A connection from the pool (*reused) or a new one; Unavailable in the
  // pause.
  absl::StatusOr<std::unique_ptr<Conn>> Acquire(bool* reused);
  // Back to the pool when healthy; dropped otherwise.
  void Release(std::unique_ptr<Conn> conn);
  absl::StatusOr<std::unique_ptr<Conn>> Connect();
  // How long a statement's answer is awaited: the session's statement
  // timeout (ours, or what the DSN set; a minute where none), then 2 s.
  int AnswerTimeoutMs() const { return answer_timeout_ms_.load(); }
  // Records the outcome of a call: a connection-level failure starts (or
  // lengthens) the pause and marks the store down.
  void NoteSuccess();
  void NoteFailure(const absl::Status& why);
  // Runs `body` on a pooled connection, handling failures as above.
  absl::Status WithConnection(const std::function<absl::Status(PGconn*)>& body);

  const FleetOptions opts_;
  std::atomic<int> answer_timeout_ms_{opts_.statement_timeout_ms + 2000};  // Read at each connect.
  // Whether this login was last found unable to write, and until when
  // writes are refused untried (ms, NowMs's clock).
  std::atomic<bool> login_read_only_{false};
  std::atomic<int64_t> writes_refused_until_ms_{0};
  absl::Mutex write_state_mu_;  // Orders NoteCannotWrite's and NoteCanWrite's changes and callbacks.
  // Why this login cannot write (no grant, read-only transactions, a
  // standby); empty if it can.
  absl::StatusOr<std::string> CannotWrite(PGconn* c);
  // FailedPrecondition for a write this node does not make (read_only()).
  absl::Status WritesRefused() const;
  // What a connection or a write found about this login's writing.
  void NoteCannotWrite(const std::string& why);
  void NoteCanWrite();
  // Runs a write's statement: a refusal by the database (privileges, a
  // read-only transaction) makes the node read only (NoteCannotWrite); a
  // success ends that.
  absl::Status Write(const std::function<absl::Status(PGconn*)>& body);
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_ ABSL_GUARDED_BY(mu_);
  bool up_ ABSL_GUARDED_BY(mu_) = false;
  bool ever_up_ ABSL_GUARDED_BY(mu_) = false;
  bool reported_ ABSL_GUARDED_BY(mu_) = false;  // A state was reported.
  double pause_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t retry_at_ms_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kfuse

#endif  // KFUSE_CACHE_FLEET_H_
