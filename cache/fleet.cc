#include "cache/fleet.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "core/log.h"
#include "core/status.h"

namespace kfuse {
namespace {

void FleetNotice(void*, const char* message) {
  LogEvent(LogLevel::kWarning, "fleet_notice",
           {{"message", std::string(absl::StripTrailingAsciiWhitespace(message))}});
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// A PGresult that clears itself.
struct Result {
  explicit Result(PGresult* r) : r(r) {}
  ~Result() { PQclear(r); }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  PGresult* r;
};

// Query parameters: strings and bytea go as binary (raw bytes, any content),
// integers as text.
class Params {
 public:
  void Bytes(std::string value) { Add(std::move(value), 1); }
  void Text(std::string value) { Add(std::move(value), 0); }
  void Int(int64_t value) { Add(absl::StrCat(value), 0); }
  void Double(double value) { Add(absl::StrCat(value), 0); }

  int size() const { return static_cast<int>(values_.size()); }
  const char* const* values() {
    ptrs_.clear();
    for (const std::string& v : values_) ptrs_.push_back(v.c_str());
    return ptrs_.data();
  }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  void Add(std::string value, int format) {
    lengths_.push_back(static_cast<int>(value.size()));
    formats_.push_back(format);
    values_.push_back(std::move(value));
  }
  std::vector<std::string> values_;
  std::vector<const char*> ptrs_;
  std::vector<int> lengths_, formats_;
};

// The status a failed result stands for. Connection trouble, shutdowns and
// a server out of connections are Unavailable (the store pauses); a
// statement timeout DeadlineExceeded and a server out of disk or memory
// ResourceExhausted (that call only: the server answers, so it is no
// outage); a missing privilege, or a read-only session (a reader role, whose
// transactions are read-only by default), is PermissionDenied; the rest
// Internal.
absl::Status ResultStatus(PGconn* c, const PGresult* r, absl::string_view what) {
  const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  std::string sqlstate = state != nullptr ? state : "";
  std::string message = absl::StrCat("fleet store: ", what, ": ",
                                     absl::StripTrailingAsciiWhitespace(PQerrorMessage(c)));
  // One slow statement (57014, statement_timeout) fails that call only; it
  // does not take the whole tier down.
  if (sqlstate == "57014" && PQstatus(c) == CONNECTION_OK) return absl::DeadlineExceededError(message);
  if (PQstatus(c) == CONNECTION_BAD || sqlstate.empty() || absl::StartsWith(sqlstate, "08") ||
      absl::StartsWith(sqlstate, "57") || sqlstate == "53300") {
    return absl::UnavailableError(message);
  }
  if (absl::StartsWith(sqlstate, "53")) {  // 53100 disk full, 53200 out of memory.
    return absl::ResourceExhaustedError(absl::StrCat(message, " (SQLSTATE ", sqlstate, ")"));
  }
  if (sqlstate == "42501" || sqlstate == "25006") return absl::PermissionDeniedError(message);
  return absl::InternalError(absl::StrCat(message, " (SQLSTATE ", sqlstate, ")"));
}

using SteadyTime = std::chrono::steady_clock::time_point;

// Waits until `c`'s socket is ready for `events`, or for 100 ms at most (so
// that data TLS has buffered, which poll does not see, is read by the
// caller's next PQconsumeInput all the same); false once `deadline` passed.
bool AwaitSocket(PGconn* c, short events, SteadyTime deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return false;
  pollfd fd{PQsocket(c), events, 0};
  poll(&fd, 1, static_cast<int>(std::min<int64_t>(left.count(), 100)));  // EINTR and errors: libpq's next call.
  return true;
}

// Runs one statement on `c` (nonblocking: Connect sets it) and waits at most
// `timeout_ms` for its answer. The server's statement_timeout bounds a slow
// statement; this bounds a server that does not answer at all (stopped,
// swapped out, a partition the kernel still ACKs), which no keepalive
// notices. Past it the call is Unavailable and the connection, its
// statement still in flight, is never reused (Release takes only idle ones).
absl::StatusOr<std::unique_ptr<Result>> Exec(PGconn* c, const char* sql, Params& p, absl::string_view what,
                                             int timeout_ms) {
  const SteadyTime deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  const auto no_answer = [&] {
    return absl::UnavailableError(
        absl::StrCat("fleet store: ", what, ": no answer within ", timeout_ms, " ms (the server is not responding)"));
  };
  // Reads until a result can be taken without blocking (PQgetResult blocks
  // while the connection is busy, nonblocking or not).
  const auto await_result = [&]() -> absl::Status {
    while (PQisBusy(c) == 1) {
      if (!AwaitSocket(c, POLLIN, deadline)) return no_answer();
      if (PQconsumeInput(c) != 1) return ResultStatus(c, nullptr, what);
    }
    return absl::OkStatus();
  };
  if (PQsendQueryParams(c, sql, p.size(), nullptr, p.values(), p.lengths(), p.formats(), /*resultFormat=*/1) != 1) {
    return ResultStatus(c, nullptr, what);
  }
  for (int f; (f = PQflush(c)) != 0;) {  // A large blob goes out as the server takes it.
    if (f < 0) return ResultStatus(c, nullptr, what);
    if (!AwaitSocket(c, POLLIN | POLLOUT, deadline)) return no_answer();
    if (PQconsumeInput(c) != 1) return ResultStatus(c, nullptr, what);
  }
  // Every result up to the null that ends the query, keeping the last, or
  // the first error: an error at commit (a deferred trigger or constraint)
  // follows the statement's own result, as PQexec reports it.
  std::unique_ptr<Result> r;
  for (;;) {
    KFUSE_RETURN_IF_ERROR(await_result());
    PGresult* next = PQgetResult(c);
    if (next == nullptr) break;
    if (r != nullptr && PQresultStatus(r->r) == PGRES_FATAL_ERROR) {
      PQclear(next);
    } else {
      r = std::make_unique<Result>(next);
    }
  }
  if (r == nullptr) return ResultStatus(c, nullptr, what);
  ExecStatusType s = PQresultStatus(r->r);
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) return ResultStatus(c, r->r, what);
  return r;
}

// A text[] literal of `values`, each quoted and escaped (keys are hex
// digests, but any string goes).
std::string TextArray(const std::vector<std::string>& values) {
  std::string array = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) array += ',';
    array += '"';
    for (char ch : values[i]) {
      if (ch == '"' || ch == '\\') array += '\\';
      array += ch;
    }
    array += '"';
  }
  array += '}';
  return array;
}

// int8 in binary format: 8 bytes, network order.
int64_t Int8Field(const PGresult* r, int row, int col) {
  if (PQgetlength(r, row, col) != 8) return 0;
  const auto* b = reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col));
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | b[i];
  return static_cast<int64_t>(v);
}

constexpr char kGetSql[] =
    "SELECT e.kind, e.key, e.chain, e.spec, e.device, e.toolchain, e.generator, e.family, e.arch,"
    " e.device_name, e.state, e.description, b.data, e.blob_sha256, e.node, e.created_unix_ms,"
    " e.kfuse_version, e.signer, e.signature"
    " FROM kfuse_entries e JOIN kfuse_blobs b ON b.sha256 = e.blob_sha256"
    " WHERE e.kind = $1 AND e.key = $2"
    " AND e.signer IN (SELECT decode(h, 'hex') FROM unnest($3::text[]) AS h)"
    " ORDER BY e.published_at, e.signer";

constexpr char kCountSql[] = "SELECT count(*) FROM kfuse_entries WHERE kind = $1 AND key = $2";

// One statement, so one round trip: the entry (if its key and signer are
// new), then its blob (if the entry went in and the blob is new); it
// answers how many entries went in (0 or 1). Neither is ever rewritten, and
// a publisher that lost the race for the key leaves no blob behind. The
// entry's reference to the blob is checked at the statement's end, after
// both inserts. The conflict has no target, so the same statement serves
// schema 1's (kind, key) and schema 2's (kind, key, signer).
constexpr char kPublishSql[] =
    "WITH entry AS (INSERT INTO kfuse_entries (kind, key, chain, spec, device, toolchain, generator, family,"
    " arch, device_name, state, description, blob_sha256, node, created_unix_ms, kfuse_version, signer,"
    " signature)"
    " VALUES ($4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $1, $16, $17, $18, $19, $20)"
    " ON CONFLICT DO NOTHING RETURNING 1),"
    " blob AS (INSERT INTO kfuse_blobs (sha256, bytes, data) SELECT $1, $2::bigint, $3::bytea"
    " WHERE EXISTS (SELECT 1 FROM entry) ON CONFLICT (sha256) DO NOTHING)"
    " SELECT count(*) FROM entry";

// Free, expired or already ours: take it (or extend it).
constexpr char kLeaseSql[] =
    "INSERT INTO kfuse_leases AS l (key, holder, expires_at)"
    " VALUES ($1, $2, now() + make_interval(secs => $3))"
    " ON CONFLICT (key) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at"
    " WHERE l.expires_at < now() OR l.holder = EXCLUDED.holder"
    " RETURNING l.holder";

constexpr char kReleaseSql[] = "DELETE FROM kfuse_leases WHERE key = $1 AND holder = $2";

// Extends the leases we still hold; an UPDATE, so a lease given back (or
// taken by another node) is never taken again by a renewal.
constexpr char kRenewSql[] =
    "UPDATE kfuse_leases SET expires_at = now() + make_interval(secs => $3)"
    " WHERE holder = $1 AND key = ANY($2::text[]) RETURNING key";

}  // namespace

struct FleetStore::Conn {
  explicit Conn(PGconn* c) : c(c) {}
  ~Conn() { PQfinish(c); }
  PGconn* c;
};

std::unique_ptr<FleetStore> FleetStore::Create(FleetOptions options) {
  return std::unique_ptr<FleetStore>(new FleetStore(std::move(options)));
}

FleetStore::FleetStore(FleetOptions options) : opts_(std::move(options)) {}

FleetStore::~FleetStore() = default;

std::string RedactDsn(const std::string& dsn) {
  std::string s = dsn;
  // URI form: postgresql://user:secret@host/db?password=secret&...
  if (absl::StartsWith(s, "postgresql://") || absl::StartsWith(s, "postgres://")) {
    const size_t scheme = s.find("://");
    size_t query = s.find('?', scheme);
    size_t at = s.find('@', scheme);
    size_t colon = s.find(':', scheme + 3);
    if (at != std::string::npos && at < query && colon != std::string::npos && colon < at) {
      s.replace(colon + 1, at - colon - 1, "***");
    }
    for (size_t p = s.find('?', scheme); p != std::string::npos; p = s.find('&', p + 1)) {
      size_t eq = s.find('=', p);
      size_t end = std::min(s.find('&', p + 1), s.size());
      if (eq == std::string::npos || eq > end) continue;
      if (absl::EqualsIgnoreCase(absl::string_view(s).substr(p + 1, eq - p - 1), "password")) {
        s.replace(eq + 1, end - eq - 1, "***");
      }
    }
    return s;
  }
  // Keyword form: password=secret or password = 'a \' b'.
  for (size_t p = s.find("password"); p != std::string::npos; p = s.find("password", p + 1)) {
    size_t eq = s.find_first_not_of(' ', p + 8);
    if (eq == std::string::npos || s[eq] != '=') continue;
    size_t v = s.find_first_not_of(' ', eq + 1);
    if (v == std::string::npos) break;
    size_t end = v;
    if (s[v] == '\'') {
      // Up to the closing quote; a backslash escapes the next character.
      for (end = v + 1; end < s.size() && s[end] != '\''; ++end) {
        if (s[end] == '\\') ++end;
      }
      end = std::min(end + 1, s.size());
    } else {
      end = std::min(s.find(' ', v), s.size());
    }
    s.replace(v, end - v, "***");
  }
  return s;
}

absl::StatusOr<std::unique_ptr<FleetStore::Conn>> FleetStore::Connect() {
  // Our defaults first: anything the DSN says wins (later keywords override).
  const std::string timeout = absl::StrCat(opts_.connect_timeout_seconds);
  const std::string options = absl::StrCat("-c statement_timeout=", opts_.statement_timeout_ms);
  const std::string user_timeout = absl::StrCat(opts_.statement_timeout_ms);
  std::vector<const char*> keys = {"connect_timeout", "options", "application_name", "keepalives_idle",
                                   "keepalives_interval", "keepalives_count", "tcp_user_timeout", "dbname"};
  std::vector<const char*> values = {timeout.c_str(), options.c_str(), "kfused", "10", "3", "3",
                                     user_timeout.c_str(), opts_.dsn.c_str()};
  // Host names looked up here, within the connect timeout, and given after
  // the DSN as addresses: libpq's own lookup has no bound.
  std::optional<HostKeywords> hosts;
  if (opts_.connect_timeout_seconds > 0) {
    absl::StatusOr<std::optional<HostKeywords>> found =
        LookUpHosts(opts_.dsn, absl::Seconds(opts_.connect_timeout_seconds),
                    opts_.resolve ? opts_.resolve : HostResolver(LookUpHost));
    if (!found.ok()) {
      return absl::UnavailableError(absl::StrCat("fleet store ", DisplayDsn(), ": ", found.status().message()));
    }
    hosts = std::move(*found);
  }
  if (hosts.has_value()) {
    keys.insert(keys.end(), {"host", "hostaddr"});
    values.insert(values.end(), {hosts->host.c_str(), hosts->hostaddr.c_str()});
    if (hosts->port.has_value()) {
      keys.push_back("port");
      values.push_back(hosts->port->c_str());
    }
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  auto conn = std::make_unique<Conn>(PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1));
  // The server's notices (a WARNING as it shuts down, say) are events, not
  // libpq's own lines on stderr.
  if (conn->c != nullptr) PQsetNoticeProcessor(conn->c, &FleetNotice, nullptr);
  if (conn->c == nullptr || PQstatus(conn->c) != CONNECTION_OK) {
    return absl::UnavailableError(absl::StrCat("fleet store ", DisplayDsn(), ": ",
                                               absl::StripTrailingAsciiWhitespace(
                                                   conn->c != nullptr ? PQerrorMessage(conn->c) : "out of memory")));
  }
  // Nonblocking, so that a statement's wait is bounded (Exec).
  if (PQsetnonblocking(conn->c, 1) != 0) {
    return absl::UnavailableError(absl::StrCat("fleet store ", DisplayDsn(), ": cannot make the connection nonblocking"));
  }
  // The schema version, and the statement timeout the session got (a DSN's
  // options may set another than ours): answers are awaited that long.
  Params none;
  absl::StatusOr<std::unique_ptr<Result>> r = Exec(
      conn->c,
      "SELECT schema_version, (extract(epoch FROM current_setting('statement_timeout')::interval) * 1000)::int8"
      " FROM kfuse_fleet_meta",
      none, "reading the schema version", AnswerTimeoutMs());
  if (!r.ok()) {
    // Only a missing table (42P01) says the schema is not there; a server
    // out of disk or a refused privilege keeps its own code and words.
    if (!absl::IsInternal(r.status()) || !absl::StrContains(r.status().message(), "SQLSTATE 42P01")) {
      return r.status();
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "fleet store ", DisplayDsn(), " has no kfuse schema (apply deploy/postgres/fleet.sql): ", r.status().message()));
  }
  // Binary int4 and int8, network order.
  const PGresult* res = (*r)->r;
  const auto big_endian = [res](int column) {
    const auto* b = reinterpret_cast<const unsigned char*>(PQgetvalue(res, 0, column));
    int64_t v = 0;
    for (int i = 0; i < PQgetlength(res, 0, column); ++i) v = v << 8 | b[i];
    return v;
  };
  int version = -1;
  if (PQntuples(res) == 1 && PQnfields(res) == 2 && PQgetlength(res, 0, 0) == 4 && PQgetlength(res, 0, 1) == 8) {
    version = static_cast<int>(static_cast<int32_t>(big_endian(0)));
    // No statement timeout (0) bounds nothing on the server: a minute, then.
    const int64_t session_ms = big_endian(1);
    answer_timeout_ms_ = static_cast<int>(std::min<int64_t>(session_ms > 0 ? session_ms : 60000, 3600000) + 2000);
  }
  if (version < kFleetOldestSchemaVersion || version > kFleetSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat("fleet store ", DisplayDsn(), " has schema version ", version,
                                                      "; this kfused speaks ", kFleetOldestSchemaVersion, " to ",
                                                      kFleetSchemaVersion));
  }
  // A check that fails (a server without one of its functions) says
  // nothing: the database judges each write, as before the check.
  if (!opts_.read_only) {
    const absl::StatusOr<std::string> cannot_write = CannotWrite(conn->c);
    if (cannot_write.ok() && cannot_write->empty()) NoteCanWrite();
    if (cannot_write.ok() && !cannot_write->empty()) NoteCannotWrite(*cannot_write);
  }
  return conn;
}

absl::StatusOr<std::string> FleetStore::CannotWrite(PGconn* c) {
  // has_table_privilege with several privileges is true if any is held:
  // one call each.
  Params none;
  KFUSE_ASSIGN_OR_RETURN(
      std::unique_ptr<Result> r,
      Exec(c,
           "SELECT has_table_privilege('kfuse_entries', 'INSERT') AND has_table_privilege('kfuse_blobs', 'INSERT')"
           " AND (CASE WHEN to_regclass('kfuse_leases') IS NULL THEN true"
           " ELSE has_table_privilege(to_regclass('kfuse_leases'), 'INSERT')"
           " AND has_table_privilege(to_regclass('kfuse_leases'), 'UPDATE')"
           " AND has_table_privilege(to_regclass('kfuse_leases'), 'DELETE') END),"
           " current_setting('transaction_read_only')::bool, pg_is_in_recovery(), current_user::text",
           none, "reading the login's privileges", AnswerTimeoutMs()));
  const PGresult* res = r->r;
  if (PQntuples(res) != 1 || PQnfields(res) != 4 || PQgetlength(res, 0, 0) != 1 || PQgetlength(res, 0, 1) != 1 ||
      PQgetlength(res, 0, 2) != 1) {
    return std::string();  // Unreadable: let the database judge each write.
  }
  const auto yes = [res](int column) { return *PQgetvalue(res, 0, column) != 0; };
  const std::string login(PQgetvalue(res, 0, 3), PQgetlength(res, 0, 3));
  if (yes(2)) return std::string("the server is a standby (in recovery)");
  if (yes(1)) return absl::StrCat("login ", login, "'s transactions are read-only (default_transaction_read_only)");
  if (!yes(0)) return absl::StrCat("login ", login, " may not write the fleet's tables (a reader role?)");
  return std::string();
}

bool FleetStore::read_only() const {
  return opts_.read_only || (login_read_only_.load() && NowMs() < writes_refused_until_ms_.load());
}

// A login that cannot write (a reader role on a node not started with
// --fleet_read_only, a standby) would have every publish and lease refused
// by the database, each a warning: the node reads only, said once, and
// lets a write through now and then to see whether it may again.
void FleetStore::NoteCannotWrite(const std::string& why) {
  absl::MutexLock lock(&write_state_mu_);  // The change and its callback in one order.
  writes_refused_until_ms_ = NowMs() + static_cast<int64_t>(opts_.write_probe_seconds * 1000);
  if (login_read_only_.exchange(true)) return;
  LogEvent(LogLevel::kWarning, "fleet_login_read_only",
           {{"dsn", DisplayDsn()},
            {"why", why},
            {"effect", "reading the fleet store only: no publishes, no tuning leases"},
            {"fix", "start with --fleet_read_only to say so, or log in as a writer to a primary"}});
  if (opts_.on_write_change) opts_.on_write_change(false, why);
}

void FleetStore::NoteCanWrite() {
  absl::MutexLock lock(&write_state_mu_);
  writes_refused_until_ms_ = 0;
  if (!login_read_only_.exchange(false)) return;
  LogEvent(LogLevel::kInfo, "fleet_login_writable", {{"dsn", DisplayDsn()}});
  if (opts_.on_write_change) opts_.on_write_change(true, "");
}

absl::Status FleetStore::Write(const std::function<absl::Status(PGconn*)>& body) {
  if (read_only()) return WritesRefused();
  // A refusal is the login's only if the login cannot write at all (a grant
  // revoked under an open connection): one that can (refused by a row
  // policy, a trigger, a column grant) fails that write alone.
  std::string cannot_write;
  absl::Status s = WithConnection([&](PGconn* c) -> absl::Status {
    if (read_only()) return WritesRefused();  // Found as this connection was made.
    absl::Status written = body(c);
    if (absl::IsPermissionDenied(written) && !opts_.read_only) {
      absl::StatusOr<std::string> why = CannotWrite(c);
      if (why.ok()) cannot_write = *why;
    }
    return written;
  });
  if (opts_.read_only) return s;
  if (s.ok()) {
    NoteCanWrite();
  } else if (!cannot_write.empty()) {
    NoteCannotWrite(cannot_write);
  }
  return s;
}

absl::Status FleetStore::WritesRefused() const {
  return absl::FailedPreconditionError(opts_.read_only ? "fleet store is read-only on this node"
                                                       : "fleet login cannot write (a reader role?): reading only");
}

absl::StatusOr<std::unique_ptr<FleetStore::Conn>> FleetStore::Acquire(bool* reused) {
  *reused = false;
  {
    absl::MutexLock lock(&mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Conn> c = std::move(idle_.back());
      idle_.pop_back();
      *reused = true;
      return c;
    }
    if (int64_t wait = retry_at_ms_ - NowMs(); wait > 0) {
      return absl::UnavailableError(
          absl::StrCat("fleet store unreachable; next attempt in ", (wait + 999) / 1000, " s"));
    }
  }
  absl::StatusOr<std::unique_ptr<Conn>> c = Connect();
  if (!c.ok()) NoteFailure(c.status());
  return c;
}

void FleetStore::Release(std::unique_ptr<Conn> conn) {
  if (PQstatus(conn->c) != CONNECTION_OK || PQtransactionStatus(conn->c) != PQTRANS_IDLE) return;
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(idle_.size()) < opts_.max_idle_connections) idle_.push_back(std::move(conn));
}

void FleetStore::NoteSuccess() {
  bool report = false;
  {
    absl::MutexLock lock(&mu_);
    pause_seconds_ = 0;
    retry_at_ms_ = 0;
    report = !up_ || !reported_;
    up_ = ever_up_ = reported_ = true;
  }
  if (report && opts_.on_state_change) opts_.on_state_change(true, absl::OkStatus());
}

void FleetStore::NoteFailure(const absl::Status& why) {
  bool report = false;
  std::vector<std::unique_ptr<Conn>> dropped;
  {
    absl::MutexLock lock(&mu_);
    pause_seconds_ = pause_seconds_ == 0 ? opts_.retry_min_seconds
                                         : std::min(pause_seconds_ * 2, opts_.retry_max_seconds);
    retry_at_ms_ = NowMs() + static_cast<int64_t>(pause_seconds_ * 1000);
    report = up_ || !reported_;
    up_ = false;
    reported_ = true;
    dropped.swap(idle_);  // Likely dead too; closed outside the lock.
  }
  if (report && opts_.on_state_change) opts_.on_state_change(false, why);
}

absl::Status FleetStore::WithConnection(const std::function<absl::Status(PGconn*)>& body) {
  bool reused = false;
  KFUSE_ASSIGN_OR_RETURN(std::unique_ptr<Conn> conn, Acquire(&reused));
  absl::Status s = body(conn->c);
  // A pooled connection the server has closed since (an idle timeout, a
  // proxy, a failover) fails its first statement: that alone is no outage,
  // so the call is made once more on a new connection. Every body is safe
  // to repeat (reads, publishes that never rewrite, lease takes that extend
  // our own).
  if (reused && PQstatus(conn->c) == CONNECTION_BAD) {
    std::vector<std::unique_ptr<Conn>> stale;
    {
      absl::MutexLock lock(&mu_);
      stale.swap(idle_);  // Closed by the same cause, most likely.
    }
    stale.clear();
    absl::StatusOr<std::unique_ptr<Conn>> fresh = Connect();
    if (!fresh.ok()) {
      NoteFailure(fresh.status());
      return fresh.status();
    }
    conn = *std::move(fresh);
    s = body(conn->c);
  }
  if (absl::IsUnavailable(s) || PQstatus(conn->c) != CONNECTION_OK) {
    NoteFailure(s.ok() ? absl::UnavailableError("fleet store connection lost") : s);
    return s.ok() ? absl::UnavailableError("fleet store connection lost") : s;
  }
  NoteSuccess();
  Release(std::move(conn));
  return s;
}

absl::Status FleetStore::Ping() {
  return WithConnection([](PGconn*) { return absl::OkStatus(); });
}

bool FleetStore::up() const {
  absl::MutexLock lock(&mu_);
  return up_;
}

absl::StatusOr<std::vector<v1::StoreEntry>> FleetStore::Get(Store::Kind kind, const std::string& key,
                                                             const std::vector<std::string>& signers) {
  std::vector<v1::StoreEntry> out;
  if (signers.empty()) return out;
  KFUSE_RETURN_IF_ERROR(WithConnection([&](PGconn* c) -> absl::Status {
    Params p;
    p.Bytes(kind == Store::Kind::kDecision ? "decision" : "artifact");
    p.Bytes(key);
    std::vector<std::string> hex;
    for (const std::string& s : signers) hex.push_back(absl::BytesToHexString(s));
    p.Text(TextArray(hex));
    KFUSE_ASSIGN_OR_RETURN(std::unique_ptr<Result> r, Exec(c, kGetSql, p, "reading an entry", AnswerTimeoutMs()));
    const PGresult* res = r->r;
    out.clear();  // A retried call starts again.
    for (int row = 0; row < PQntuples(res); ++row) {
      auto field = [&](int col) { return std::string(PQgetvalue(res, row, col), PQgetlength(res, row, col)); };
      v1::StoreEntry& e = out.emplace_back();
      e.set_kind(field(0));
      e.set_key(field(1));
      e.set_chain(field(2));
      e.set_spec(field(3));
      e.set_device(field(4));
      e.set_toolchain(field(5));
      e.set_generator(field(6));
      e.set_family(field(7));
      e.set_arch(field(8));
      e.set_device_name(field(9));
      e.set_state(field(10));
      e.set_description(field(11));
      e.set_blob(field(12));
      e.set_blob_sha256(field(13));
      e.set_node(field(14));
      e.set_created_unix_ms(Int8Field(res, row, 15));
      e.set_kfuse_version(field(16));
      e.set_signer(field(17));
      e.set_signature(field(18));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<int64_t> FleetStore::Count(Store::Kind kind, const std::string& key) {
  int64_t n = 0;
  KFUSE_RETURN_IF_ERROR(WithConnection([&](PGconn* c) -> absl::Status {
    Params p;
    p.Bytes(kind == Store::Kind::kDecision ? "decision" : "artifact");
    p.Bytes(key);
    KFUSE_ASSIGN_OR_RETURN(std::unique_ptr<Result> r, Exec(c, kCountSql, p, "counting entries", AnswerTimeoutMs()));
    n = PQntuples(r->r) == 1 ? Int8Field(r->r, 0, 0) : 0;
    return absl::OkStatus();
  }));
  return n;
}

absl::StatusOr<bool> FleetStore::Publish(const v1::StoreEntry& e) {
  bool published = false;
  KFUSE_RETURN_IF_ERROR(Write([&](PGconn* c) -> absl::Status {
    Params p;
    p.Bytes(e.blob_sha256());
    p.Int(static_cast<int64_t>(e.blob().size()));
    p.Bytes(e.blob());
    for (const std::string* s : {&e.kind(), &e.key(), &e.chain(), &e.spec(), &e.device(), &e.toolchain(),
                                 &e.generator(), &e.family(), &e.arch(), &e.device_name(), &e.state(),
                                 &e.description(), &e.node()}) {
      p.Bytes(*s);
    }
    p.Int(e.created_unix_ms());
    p.Bytes(e.kfuse_version());
    p.Bytes(e.signer());
    p.Bytes(e.signature());
    KFUSE_ASSIGN_OR_RETURN(std::unique_ptr<Result> r, Exec(c, kPublishSql, p, "publishing an entry", AnswerTimeoutMs()));
    published = PQntuples(r->r) == 1 && Int8Field(r->r, 0, 0) == 1;
    return absl::OkStatus();
  }));
  return published;
}

absl::StatusOr<bool> FleetStore::TryLease(const std::string& key, double ttl_seconds) {
  bool ours = false;
  KFUSE_RETURN_IF_ERROR(Write([&](PGconn* c) -> absl::Status {
    Params p;
    p.Bytes(key);
    p.Bytes(opts_.holder);
    p.Double(ttl_seconds);
    KFUSE_ASSIGN_OR_RETURN(std::unique_ptr<Result> r, Exec(c, kLeaseSql, p, "taking a tuning lease", AnswerTimeoutMs()));
    ours = PQntuples(r->r) == 1;
    return absl::OkStatus();
  }));
  return ours;
}

absl::StatusOr<std::vector<std::string>> FleetStore::RenewLeases(const std::vector<std::string>& keys,
                                                                 double ttl_seconds) {
  std::vector<std::string> renewed;
  if (keys.empty()) return renewed;
  KFUSE_RETURN_IF_ERROR(Write([&](PGconn* c) -> absl::Status {
    Params p;
    p.Bytes(opts_.holder);
    p.Text(TextArray(keys));
    p.Double(ttl_seconds);
    KFUSE_ASSIGN_OR_RETURN(std::unique_ptr<Result> r, Exec(c, kRenewSql, p, "renewing tuning leases", AnswerTimeoutMs()));
    renewed.clear();  // A retried call starts again.
    for (int i = 0; i < PQntuples(r->r); ++i) {
      renewed.emplace_back(PQgetvalue(r->r, i, 0), PQgetlength(r->r, i, 0));
    }
    return absl::OkStatus();
  }));
  return renewed;
}

absl::Status FleetStore::ReleaseLease(const std::string& key) {
  // A node configured read-only took none; one whose login was found
  // unable to write since may hold one from before: it tries.
  if (opts_.read_only) return absl::OkStatus();
  return WithConnection([&](PGconn* c) -> absl::Status {
    Params p;
    p.Bytes(key);
    p.Bytes(opts_.holder);
    return Exec(c, kReleaseSql, p, "releasing a tuning lease", AnswerTimeoutMs()).status();
  });
}

}  // namespace kfuse
