#include "cache/store.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cache/schema.h"
#include "cache/store_sql.h"
#include "core/log.h"
#include "core/status.h"

namespace kfuse {

using cache::CollectBlob;
using cache::ConfigureReader;
using cache::ConfigureWriter;
using cache::Db;
using cache::KeyColumns;
using cache::KeyOf;
using cache::KindName;
using cache::Migrate;
using cache::Probe;
using cache::Stmt;
using cache::Table;

namespace {

constexpr size_t kMaxIdleReaders = 8;
constexpr int kQuarantineKeep = 100;  // Rows kept in the quarantine table.

// Renames `from` to `to` if it exists.
absl::Status RenameIfPresent(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) == 0 || errno == ENOENT) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("cannot move ", from, " to ", to, ": ", std::strerror(errno)));
}

}  // namespace

Store::Reader::~Reader() {
  if (db_ == nullptr) return;
  absl::MutexLock l(&store_->pool_mu_);
  --store_->readers_out_;
  if (store_->idle_readers_.size() < kMaxIdleReaders) {
    store_->idle_readers_.push_back(std::move(db_));
  }
}

Store::Store(const StoreOptions& options) : opts_(options) {}

namespace {

// `path`, or the file it names when it is a symbolic link (followed to the
// end, not normalised: a folder on the way may be a link too), where
// SQLite keeps the -wal and -shm. A corrupt file is moved aside there, the
// link left alone (moving the link aside left the corrupt file in place).
std::string FollowLinks(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = path;
  for (int hops = 0; hops < 40 && std::filesystem::is_symlink(p, ec); ++hops) {
    const std::filesystem::path target = std::filesystem::read_symlink(p, ec);
    if (ec) return path;
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  return p.string();
}

// `st`, a failed open of the store at `path`, saying so when the disk that
// holds it is (nearly) full: SQLite reports that as an I/O error at the
// first statement (the -shm file cannot grow), which names no cause.
absl::Status WithFreeSpace(const absl::Status& st, const std::string& path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  struct statvfs fs {};
  if (::statvfs(dir.empty() ? "." : dir.c_str(), &fs) != 0) return st;
  const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free_bytes >= (uint64_t{1} << 20)) return st;
  return absl::Status(st.code(), absl::StrCat(st.message(), " (the disk holding ", dir.empty() ? "." : dir.string(),
                                              " has ", free_bytes, " bytes free: free some space; a store "
                                              "cannot open, even to serve, without room for its -shm file)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("cache: StoreOptions.path is empty");
  // SQLite reads ":memory:" (and names starting with ':') as a database in
  // memory, and opens a device as a file, leaving a journal beside it in
  // /dev: a store is a regular file, or none yet.
  if (options.path[0] == ':') {
    return absl::InvalidArgumentError(absl::StrCat("cache database ", options.path,
                                                   ": a store is a file; give a path (./", options.path, ")"));
  }
  if (struct stat st; ::stat(options.path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        S_ISDIR(st.st_mode)
            ? absl::StrCat("cache database ", options.path, " is a folder; give a file in it (", options.path,
                           "/kfuse.db)")
            : absl::StrCat("cache database ", options.path, " is not a regular file (a device, socket or pipe)"));
  }
  if (options.max_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache: max_bytes must be positive, got ", options.max_bytes));
  }
  std::unique_ptr<Store> store(new Store(options));
  {
    absl::MutexLock l(&store->db_mu_);
    absl::Status st = store->OpenFile();
    if (absl::IsDataLoss(st) && !options.read_only && !cache::LooksLikeKfuseStore(options.path)) {
      // A path to another file (a typo, a text file): not kfuse's to move.
      st = absl::FailedPreconditionError(absl::StrCat("cache database ", options.path,
                                                      " is not a kfuse store (SQLite cannot read it: ",
                                                      st.message(), "); kfuse left it as it is: point --store "
                                                      "at a new file or a kfuse store"));
    }
    if (absl::IsDataLoss(st)) {
      KFUSE_RETURN_IF_ERROR(store->MoveCorruptAside(st));
      st = store->OpenFile();
    }
    if (!st.ok()) {
      store->CloseFile();
      return WithFreeSpace(st, options.path);
    }
  }
  store->PollInvalidations().IgnoreError();  // The counter as opened: nothing stale yet.
  store->flusher_ = std::thread(&Store::FlusherLoop, store.get());
  return store;
}

Store::~Store() {
  {
    absl::MutexLock l(&stop_mu_);
    stop_ = true;
  }
  if (flusher_.joinable()) flusher_.join();
  absl::Status st = FlushHits();
  if (!st.ok()) {
    LogEvent(LogLevel::kWarning, "store_hits_not_saved", {{"store", opts_.path}, {"error", st.ToString()}});
  }
  absl::MutexLock l(&db_mu_);
  CloseFile();
}

int64_t Store::Now() const {
  return opts_.now_ms ? opts_.now_ms() : absl::ToUnixMillis(absl::Now());
}

namespace {

// SQLite's URI for `path` opened immutable: a read-only store in a folder
// this process cannot write, where WAL mode could not create its -shm file.
std::string ImmutableUri(const std::string& path) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      absl::StrAppend(&uri, "%", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    } else {
      uri.push_back(c);
    }
  }
  return uri + "?immutable=1";
}

bool FolderWritable(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return access(dir.empty() ? "." : dir.c_str(), W_OK) == 0;
}

}  // namespace

absl::Status Store::OpenFile() {
  absl::MutexLock w(&writer_mu_);
  absl::MutexLock p(&pool_mu_);
  if (opts_.read_only) {
    // A plain read-only open first: it reads a live file (another process
    // writing it, its write-ahead log) with SQLite's locks.
    reader_uri_.clear();
    RememberFile();  // Before the open: a file put there meanwhile is followed later.
    absl::Status plain = OpenReader();
    if (plain.ok() || FolderWritable(opts_.path)) return plain;
    // WAL readers need a -shm file beside the database, which cannot be
    // made in a folder this process may not write (an image's read-only
    // mount). There the file is read immutable, which ignores any log and
    // takes no locks: only a file nothing writes, with its log checkpointed.
    struct stat wal;
    if (::stat((opts_.path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cache database ", opts_.path, " cannot be read here (", plain.message(),
          ") and its write-ahead log ", opts_.path,
          "-wal holds entries a read-only folder cannot replay; checkpoint it before baking "
          "(sqlite3 FILE 'PRAGMA wal_checkpoint(TRUNCATE)')"));
    }
    reader_uri_ = ImmutableUri(opts_.path);
    return OpenReader();
  }
  const std::filesystem::path folder = std::filesystem::path(opts_.path).parent_path();
  if (std::error_code ec; !folder.empty() && !std::filesystem::is_directory(folder, ec)) {
    return absl::NotFoundError(absl::StrCat("cache database ", opts_.path, ": the folder ", folder.string(),
                                            " does not exist (create it, or pass another --store)"));
  }
  KFUSE_ASSIGN_OR_RETURN(auto db, Db::Open(opts_.path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                                           opts_.busy_timeout_ms));
  // SQLite opens a file it may not write read-only without saying so; a
  // store that takes no Put must be asked for as such.
  if (sqlite3_db_readonly(db->raw(), "main") == 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cache database ", opts_.path,
        " is not writable by this process (its mode, owner or file system); open it "
        "read-only (kfused --read_only) or fix its permissions"));
  }
  KFUSE_RETURN_IF_ERROR(cache::CheckOwnFile(*db, opts_.path));  // Before the first write.
  KFUSE_RETURN_IF_ERROR(ConfigureWriter(*db));
  KFUSE_RETURN_IF_ERROR(Migrate(*db, opts_.path, /*read_only=*/false, &schema_version_));
  KFUSE_RETURN_IF_ERROR(Probe(*db, opts_.path, schema_version_));
  KFUSE_RETURN_IF_ERROR(cache::ReconcileTotal(*db));
  writer_ = std::move(db);
  RememberFile();
  return absl::OkStatus();
}

void Store::RememberFile() {
  struct stat st;
  if (::stat(opts_.path.c_str(), &st) != 0) return;
  file_dev_ = static_cast<uint64_t>(st.st_dev);
  file_ino_ = static_cast<uint64_t>(st.st_ino);
}

bool Store::PathWasReplaced() {
  struct stat st;
  if (file_ino_ == 0 || ::stat(opts_.path.c_str(), &st) != 0) return false;
  return static_cast<uint64_t>(st.st_dev) != file_dev_ || static_cast<uint64_t>(st.st_ino) != file_ino_;
}

bool Store::PathWasDeleted() {
  struct stat st;
  return file_ino_ != 0 && ::stat(opts_.path.c_str(), &st) != 0 && errno == ENOENT;
}

void Store::FollowReplacedFile() {
  {
    absl::ReaderMutexLock l(&db_mu_);
    if (!PathWasReplaced()) {
      if (!opts_.read_only && lost_.ok() && PathWasDeleted() && deleted_said_ino_ != file_ino_) {
        // A store deleted by hand while this process writes it (rm
        // kfuse.db*, to clear it). A new file is not made here: another
        // process still on the deleted one keeps its -shm and -wal at the
        // path, and a new database would share them with the old. What is
        // built from now on lasts until this process stops.
        deleted_said_ino_ = file_ino_;
        LogEvent(LogLevel::kWarning, "store_file_deleted",
                 {{"store", opts_.path},
                  {"now", "writing on into the deleted file: what is built is lost when kfused stops; restart "
                          "it for a new store (kfuse cache rm --all clears a store in use)"}});
      }
      return;
    }
  }
  absl::MutexLock l(&db_mu_);
  if (!PathWasReplaced()) return;
  if (opts_.read_only) {
    FollowReplacedReadOnlyFile();
    return;
  }
  CloseFile();
  absl::Status st = OpenFile();
  ++generation_;
  lost_ = st;  // OK: open again, whatever failed before.
  if (!st.ok()) {
    CloseFile();
    reopen_at_ = absl::Now() + absl::Seconds(1);
  }
  LogEvent(st.ok() ? LogLevel::kInfo : LogLevel::kWarning, "store_reopened",
           {{"store", opts_.path},
            {"why", "the file at the path was replaced (another process moved a corrupt store aside)"},
            {"error", st.ok() ? "" : st.ToString()}});
}

void Store::FollowReplacedReadOnlyFile() {
  // A file put in place of the one served (a new store shipped to serving
  // nodes): served from now on. One that cannot be read (copied halfway,
  // not a kfuse store) is not: the old file keeps serving, and the new one
  // is tried again each second, said once.
  std::vector<std::unique_ptr<Db>> old_readers;
  {
    absl::MutexLock p(&pool_mu_);
    old_readers.swap(idle_readers_);
  }
  const std::string old_uri = reader_uri_;
  const int64_t old_version = schema_version_;
  const uint64_t old_dev = file_dev_, old_ino = file_ino_;
  absl::Status st = OpenFile();
  if (!st.ok()) {
    const uint64_t refused_ino = file_ino_;
    {
      absl::MutexLock p(&pool_mu_);
      idle_readers_.swap(old_readers);
    }
    reader_uri_ = old_uri;
    schema_version_ = old_version;
    file_dev_ = old_dev;
    file_ino_ = old_ino;
    if (refused_ino != refused_ino_) {
      refused_ino_ = refused_ino;
      LogEvent(LogLevel::kWarning, "store_not_reopened",
               {{"store", opts_.path}, {"error", st.ToString()},
                {"now", "serving the file opened before; trying the new one each second"}});
    }
    return;
  }
  ++generation_;
  refused_ino_ = 0;
  // What callers keep of the old file in memory is stale: the new file's
  // counter is read afresh.
  invalidations_seen_ = -1;
  ++invalidations_;
  LogEvent(LogLevel::kInfo, "store_reopened",
           {{"store", opts_.path}, {"why", "the file at the path was replaced: serving the new one"}});
}

absl::Status Store::OpenReader() {
  idle_readers_.clear();
  const bool uri = !reader_uri_.empty();
  KFUSE_ASSIGN_OR_RETURN(auto db, Db::Open(uri ? reader_uri_ : opts_.path,
                                           SQLITE_OPEN_READONLY | (uri ? SQLITE_OPEN_URI : 0),
                                           opts_.busy_timeout_ms));
  KFUSE_RETURN_IF_ERROR(ConfigureReader(*db));
  KFUSE_RETURN_IF_ERROR(cache::CheckOwnFile(*db, opts_.path));
  KFUSE_RETURN_IF_ERROR(Migrate(*db, opts_.path, /*read_only=*/true, &schema_version_));
  KFUSE_RETURN_IF_ERROR(Probe(*db, opts_.path, schema_version_));
  idle_readers_.push_back(std::move(db));
  return absl::OkStatus();
}

void Store::CloseFile() {
  absl::MutexLock w(&writer_mu_);
  absl::MutexLock p(&pool_mu_);
  writer_.reset();
  idle_readers_.clear();
}

absl::Status Store::MoveCorruptAside(const absl::Status& why) {
  const bool replaced = PathWasReplaced();
  CloseFile();
  if (opts_.read_only) {
    return absl::DataLossError(absl::StrCat("cache database ", opts_.path, " is corrupt (",
                                            why.message(),
                                            "); a read-only store cannot replace it"));
  }
  if (replaced) {
    // Another process on the file found it corrupt first and made a fresh
    // one: that one is not ours to move. The caller opens it.
    LogEvent(LogLevel::kWarning, "store_corrupt",
             {{"store", opts_.path}, {"error", std::string(why.message())},
              {"now", "another process replaced it already; opening its fresh file"}});
    ++generation_;
    return absl::OkStatus();
  }
  // The wall clock, not opts_.now_ms: names must not collide across recoveries.
  // The file itself where --store is a link: the link stays, and the fresh
  // file is made where the link points.
  const std::string file = FollowLinks(opts_.path);
  std::string aside = absl::StrCat(file, ".corrupt-", absl::ToUnixMillis(absl::Now()));
  for (int i = 1; access(aside.c_str(), F_OK) == 0; ++i) {
    aside = absl::StrCat(file, ".corrupt-", absl::ToUnixMillis(absl::Now()), "-", i);
  }
  KFUSE_RETURN_IF_ERROR(RenameIfPresent(file, aside));
  // The old WAL must not be replayed into the fresh file.
  KFUSE_RETURN_IF_ERROR(RenameIfPresent(file + "-wal", aside + "-wal"));
  std::remove((file + "-shm").c_str());
  LogEvent(LogLevel::kWarning, "store_corrupt",
           {{"store", opts_.path}, {"error", std::string(why.message())}, {"moved_to", aside},
            {"now", "starting empty"}});
  ++generation_;
  return absl::OkStatus();
}

absl::Status Store::ReopenIfLost() {
  {
    absl::ReaderMutexLock l(&db_mu_);
    if (lost_.ok()) return absl::OkStatus();
  }
  absl::MutexLock l(&db_mu_);
  if (lost_.ok()) return absl::OkStatus();  // Another thread reopened it.
  if (absl::Now() >= reopen_at_) {
    absl::Status st = OpenFile();
    if (st.ok()) {
      lost_ = absl::OkStatus();
      ++generation_;
      LogEvent(LogLevel::kInfo, "store_recreated", {{"store", opts_.path}});
      return absl::OkStatus();
    }
    CloseFile();
    lost_ = st;
    reopen_at_ = absl::Now() + absl::Seconds(1);
  }
  return LostStatus();
}

absl::Status Store::Guarded(const std::function<absl::Status()>& op) {
  KFUSE_RETURN_IF_ERROR(ReopenIfLost());
  uint64_t generation;
  absl::Status st;
  {
    absl::ReaderMutexLock l(&db_mu_);
    KFUSE_RETURN_IF_ERROR(LostStatus());
    generation = generation_;
    st = op();
  }
  if (!absl::IsDataLoss(st)) return st;
  {
    absl::MutexLock l(&db_mu_);
    if (generation_ == generation) {  // Else another thread already recovered.
      KFUSE_RETURN_IF_ERROR(MoveCorruptAside(st));
      if (absl::Status made = OpenFile(); !made.ok()) {
        CloseFile();
        lost_ = made;
        reopen_at_ = absl::Now() + absl::Seconds(1);
        LogEvent(LogLevel::kWarning, "store_not_recreated",
                 {{"store", opts_.path}, {"error", made.ToString()}, {"now", "retrying once a second"}});
        return absl::UnavailableError(absl::StrCat("cache ", opts_.path, " could not be re-created: ", made.message()));
      }
    }
  }
  absl::ReaderMutexLock l(&db_mu_);
  KFUSE_RETURN_IF_ERROR(LostStatus());  // Another thread's recovery may have failed.
  return op();
}

absl::Status Store::LostStatus() const {
  if (lost_.ok()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "cache ", opts_.path, " has no file open (it was moved aside as corrupt, or replaced) and a fresh one "
      "could not be made yet: ", lost_.message()));
}

absl::StatusOr<Store::Reader> Store::AcquireReader() {
  {
    absl::MutexLock l(&pool_mu_);
    if (!idle_readers_.empty()) {
      std::unique_ptr<Db> db = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      ++readers_out_;
      return Reader(this, std::move(db));
    }
  }
  if (opts_.read_only && PathWasReplaced()) {
    // The path names another file than the one served (one moved in: it is
    // followed within a second, unless it cannot be read). A connection
    // opened by path would read that one: wait for one of the served file's.
    absl::MutexLock l(&pool_mu_);
    const bool came = pool_mu_.AwaitWithTimeout(absl::Condition(this, &Store::ReaderIdleOrNoneOut),
                                                absl::Milliseconds(opts_.busy_timeout_ms));
    if (idle_readers_.empty()) {
      return absl::UnavailableError(absl::StrCat(
          "cache ", opts_.path, ": its file was replaced and ",
          came ? "no connection to the one served is open (it is followed once the new one can be read)"
               : "every connection to the one served is busy"));
    }
    std::unique_ptr<Db> db = std::move(idle_readers_.back());
    idle_readers_.pop_back();
    ++readers_out_;
    return Reader(this, std::move(db));
  }
  int flags = opts_.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (!reader_uri_.empty()) flags |= SQLITE_OPEN_URI;
  KFUSE_ASSIGN_OR_RETURN(
      auto db, Db::Open(reader_uri_.empty() ? opts_.path : reader_uri_, flags, opts_.busy_timeout_ms));
  KFUSE_RETURN_IF_ERROR(ConfigureReader(*db));
  absl::MutexLock l(&pool_mu_);
  ++readers_out_;
  return Reader(this, std::move(db));
}

absl::Status Store::Write(const std::function<absl::Status(Db&)>& body, int busy_timeout_ms) {
  if (busy_timeout_ms == 0) {
    // Not waiting: not on this process's own writer either (the flusher or
    // a Put may hold it while they wait on another process's lock).
    if (!writer_mu_.TryLock()) return absl::UnavailableError(absl::StrCat("cache ", opts_.path, ": the writer is busy"));
    absl::Status st = WriteLocked(body, busy_timeout_ms);
    writer_mu_.Unlock();
    return st;
  }
  absl::MutexLock l(&writer_mu_);
  return WriteLocked(body, busy_timeout_ms);
}

absl::Status Store::WriteLocked(const std::function<absl::Status(Db&)>& body, int busy_timeout_ms) {
  if (writer_ == nullptr) {
    return absl::FailedPreconditionError(
        opts_.read_only ? absl::StrCat("cache ", opts_.path, " is open read-only")
                        : absl::StrCat("cache ", opts_.path, " is not open"));
  }
  Db& db = *writer_;
  if (busy_timeout_ms < 0 || busy_timeout_ms == opts_.busy_timeout_ms) {
    return db.Transaction([&] { return body(db); });
  }
  sqlite3_busy_timeout(db.raw(), busy_timeout_ms);
  absl::Status st = db.Transaction([&] { return body(db); }, /*attempts=*/1);
  sqlite3_busy_timeout(db.raw(), opts_.busy_timeout_ms);
  return st;
}

absl::StatusOr<std::optional<std::string>> Store::GetDecision(const CacheKey& k) {
  return Get(Kind::kDecision, k.DecisionKey(), /*count_hit=*/true);
}
absl::StatusOr<std::optional<std::string>> Store::GetArtifact(const CacheKey& k) {
  return Get(Kind::kArtifact, k.ArtifactKey(), /*count_hit=*/true);
}
void Store::NoteArtifactHit(const std::string& artifact_key) {
  RecordHit(Kind::kArtifact, artifact_key);
}
absl::Status Store::PutDecision(const CacheKey& k, const std::string& blob, const EntryMeta& meta) {
  return Put(Kind::kDecision, k, blob, meta);
}
absl::Status Store::PutArtifact(const CacheKey& k, const std::string& blob, const EntryMeta& meta) {
  return Put(Kind::kArtifact, k, blob, meta);
}

absl::StatusOr<std::optional<std::string>> Store::Get(Kind kind, const std::string& key,
                                                      bool count_hit) {
  static const std::string* kSql[2] = {
      new std::string("SELECT e.blob_sha256, b.data FROM decisions e"
                      " JOIN blobs b ON b.sha256 = e.blob_sha256 WHERE e.key = ?1"),
      new std::string("SELECT e.blob_sha256, b.data FROM artifacts e"
                      " JOIN blobs b ON b.sha256 = e.blob_sha256 WHERE e.key = ?1")};
  std::optional<std::string> out;
  absl::Status st = Guarded([&]() -> absl::Status {
    out.reset();
    std::string sha, data;
    {
      KFUSE_ASSIGN_OR_RETURN(Reader r, AcquireReader());
      KFUSE_ASSIGN_OR_RETURN(Stmt s, r->Prepare(*kSql[kind == Kind::kArtifact]));
      s.Bind(1, key);
      KFUSE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return absl::OkStatus();
      sha = s.Text(0);
      data = s.Blob(1);
    }
    if (Sha256Hex(data) != sha) return Quarantine(kind, key, sha, data);
    out = std::move(data);
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  if (out && count_hit) RecordHit(kind, key);
  return out;
}

absl::Status Store::Put(Kind kind, const CacheKey& k, const std::string& blob,
                        const EntryMeta& meta) {
  if (opts_.read_only) {
    return absl::FailedPreconditionError(
        absl::StrCat("cache ", opts_.path, " is open read-only; cannot store ", kind == Kind::kArtifact ? "an " : "a ",
                     KindName(kind)));
  }
  if (static_cast<int64_t>(blob.size()) > opts_.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache: ", kind == Kind::kArtifact ? "an " : "a ", KindName(kind), " blob of ", blob.size(),
                     " bytes exceeds the store's cap of ", opts_.max_bytes, " bytes (max_bytes)"));
  }
  const std::string key = KeyOf(kind, k);
  const std::string sha = Sha256Hex(blob);
  const int64_t now = Now();
  const auto cols = KeyColumns(kind, k);
  std::string names, params;
  for (size_t i = 0; i < cols.size(); ++i) {
    absl::StrAppend(&names, ", ", cols[i].first);
    absl::StrAppend(&params, ", ?", i + 2);
  }
  const int m = static_cast<int>(cols.size()) + 2;  // First meta parameter.
  const std::string upsert = absl::StrCat(
      "INSERT INTO ", Table(kind), " (key", names,
      ", blob_sha256, family, arch, device_name, state, description, created_ms,"
      " last_used_ms, hits) VALUES (?1",
      params, ", ?", m, ", ?", m + 1, ", ?", m + 2, ", ?", m + 3, ", ?", m + 4, ", ?", m + 5, ", ?",
      m + 6, ", ?", m + 6,
      ", 0) ON CONFLICT(key) DO UPDATE SET blob_sha256 = excluded.blob_sha256,"
      " family = excluded.family, arch = excluded.arch, device_name = excluded.device_name,"
      " state = excluded.state, description = excluded.description,"
      " created_ms = excluded.created_ms, last_used_ms = excluded.last_used_ms");

  PendingMap hits = TakePending();
  absl::Status st = Guarded([&] {
    return Write([&](Db& db) -> absl::Status {
      KFUSE_RETURN_IF_ERROR(ApplyHits(db, hits));
      {
        // Re-writing the data heals a blob whose bytes went bad on disk.
        KFUSE_ASSIGN_OR_RETURN(
            Stmt s,
            db.Prepare(
                "INSERT INTO blobs (sha256, bytes, data) VALUES (?1, ?2, ?3) ON CONFLICT(sha256)"
                " DO UPDATE SET bytes = excluded.bytes, data = excluded.data"));
        s.Bind(1, sha);
        s.Bind(2, static_cast<int64_t>(blob.size()));
        s.BindBlob(3, blob);
        KFUSE_RETURN_IF_ERROR(s.Run());
      }
      std::string old_sha;
      {
        KFUSE_ASSIGN_OR_RETURN(Stmt s, db.Prepare(absl::StrCat("SELECT blob_sha256 FROM ",
                                                               Table(kind), " WHERE key = ?1")));
        s.Bind(1, key);
        KFUSE_ASSIGN_OR_RETURN(bool row, s.Step());
        if (row) old_sha = s.Text(0);
      }
      {
        KFUSE_ASSIGN_OR_RETURN(Stmt s, db.Prepare(upsert));
        s.Bind(1, key);
        for (size_t i = 0; i < cols.size(); ++i) s.Bind(static_cast<int>(i) + 2, cols[i].second);
        s.Bind(m, sha);
        s.Bind(m + 1, meta.family);
        s.Bind(m + 2, meta.arch);
        s.Bind(m + 3, meta.device);
        s.Bind(m + 4, meta.state);
        s.Bind(m + 5, meta.description);
        s.Bind(m + 6, now);
        KFUSE_RETURN_IF_ERROR(s.Run());
      }
      if (kind == Kind::kArtifact && !meta.decision_key.empty()) {
        KFUSE_ASSIGN_OR_RETURN(Stmt s, db.Prepare("UPDATE artifacts SET decision_key = ?2 WHERE key = ?1"));
        s.Bind(1, key);
        s.Bind(2, meta.decision_key);
        KFUSE_RETURN_IF_ERROR(s.Run());
      }
      if (!old_sha.empty() && old_sha != sha) KFUSE_RETURN_IF_ERROR(CollectBlob(db, old_sha));
      return Evict(db, kind, key);
    });
  });
  if (!st.ok()) RestorePending(std::move(hits));
  return st;
}

absl::Status Store::Quarantine(Kind kind, const std::string& key, const std::string& sha,
                               const std::string& data) {
  const std::string reason =
      absl::StrCat("sha256 mismatch: blob hashes to ", Sha256Hex(data), ", stored as ", sha);
  if (opts_.read_only) {
    LogEvent(LogLevel::kWarning, "store_entry_corrupt",
             {{"kind", KindName(kind)}, {"key", key}, {"error", reason}, {"now", "left in place (read-only store)"}});
    return absl::OkStatus();
  }
  int64_t moved = 0;
  absl::Status st = Write([&](Db& db) -> absl::Status {
    moved = 0;
    {
      // A concurrent Put of the same content rewrites (heals) the blob.
      KFUSE_ASSIGN_OR_RETURN(Stmt s, db.Prepare("SELECT data FROM blobs WHERE sha256 = ?1"));
      s.Bind(1, sha);
      KFUSE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row || Sha256Hex(s.Blob(0)) == sha) return absl::OkStatus();
    }
    // Every entry sharing the bad blob goes with it.
    for (Kind k : {Kind::kDecision, Kind::kArtifact}) {
      KFUSE_ASSIGN_OR_RETURN(
          Stmt ins, db.Prepare(absl::StrCat(
                        "INSERT INTO quarantine (key, kind, reason, at_ms, data) SELECT key, '",
                        KindName(k), "', ?1, ?2, ?3 FROM ", Table(k), " WHERE blob_sha256 = ?4")));
      ins.Bind(1, reason);
      ins.Bind(2, Now());
      ins.BindBlob(3, data);
      ins.Bind(4, sha);
      KFUSE_RETURN_IF_ERROR(ins.Run());
      moved += db.changes();
      KFUSE_ASSIGN_OR_RETURN(
          Stmt del, db.Prepare(absl::StrCat("DELETE FROM ", Table(k), " WHERE blob_sha256 = ?1")));
      del.Bind(1, sha);
      KFUSE_RETURN_IF_ERROR(del.Run());
    }
    KFUSE_RETURN_IF_ERROR(CollectBlob(db, sha));
    if (moved > 0) KFUSE_RETURN_IF_ERROR(BumpInvalidations(db));
    KFUSE_RETURN_IF_ERROR(db.Exec(absl::StrCat(
        "DELETE FROM quarantine WHERE id <= (SELECT max(id) FROM quarantine) - ", kQuarantineKeep)));
    // Outside the cap, so bounded apart: the newest rows up to a sixteenth
    // of it (the newest one always, for inspection).
    KFUSE_ASSIGN_OR_RETURN(
        Stmt trim, db.Prepare("DELETE FROM quarantine WHERE id IN (SELECT id FROM (SELECT id, "
                              "SUM(length(data)) OVER (ORDER BY id DESC) - length(data) AS newer "
                              "FROM quarantine) WHERE newer >= ?1)"));
    trim.Bind(1, QuarantineMaxBytes(opts_.max_bytes));
    return trim.Run();
  });
  if (absl::IsDataLoss(st)) return st;
  if (!st.ok()) {
    LogEvent(LogLevel::kWarning, "store_entry_corrupt",
             {{"kind", KindName(kind)}, {"key", key}, {"error", reason},
              {"now", absl::StrCat("quarantine failed: ", st.ToString())}});
    return absl::OkStatus();  // Still a miss; the next read tries again.
  }
  quarantined_ += moved;
  if (moved > 0) {
    LogEvent(LogLevel::kWarning, "store_entry_corrupt",
             {{"kind", KindName(kind)}, {"key", key}, {"error", reason},
              {"now", absl::StrCat(moved, " entries moved to quarantine")}});
  }
  return absl::OkStatus();
}

absl::Status Store::Evict(Db& db, Kind keep_kind, const std::string& keep_key) {
  struct Victim {
    Kind kind;
    std::string key, sha;
  };
  for (;;) {
    KFUSE_ASSIGN_OR_RETURN(int64_t total,
                           db.QueryInt("SELECT total_bytes FROM stats WHERE id = 1"));
    if (total <= opts_.max_bytes) return absl::OkStatus();
    std::vector<Victim> victims;
    {
      KFUSE_ASSIGN_OR_RETURN(
          Stmt s,
          db.Prepare("SELECT kind, key, blob_sha256 FROM ("
                     " SELECT 0 AS kind, key, blob_sha256, last_used_ms FROM decisions UNION ALL"
                     " SELECT 1 AS kind, key, blob_sha256, last_used_ms FROM artifacts)"
                     " ORDER BY last_used_ms, key LIMIT 32"));
      for (;;) {
        KFUSE_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        Victim v{s.Int(0) == 0 ? Kind::kDecision : Kind::kArtifact, s.Text(1), s.Text(2)};
        if (v.kind == keep_kind && v.key == keep_key) continue;
        victims.push_back(std::move(v));
      }
    }
    if (victims.empty()) return absl::OkStatus();  // Only the new entry is left.
    for (const Victim& v : victims) {
      KFUSE_ASSIGN_OR_RETURN(
          Stmt del, db.Prepare(absl::StrCat("DELETE FROM ", Table(v.kind), " WHERE key = ?1")));
      del.Bind(1, v.key);
      KFUSE_RETURN_IF_ERROR(del.Run());
      KFUSE_RETURN_IF_ERROR(CollectBlob(db, v.sha));
      KFUSE_ASSIGN_OR_RETURN(total, db.QueryInt("SELECT total_bytes FROM stats WHERE id = 1"));
      if (total <= opts_.max_bytes) return absl::OkStatus();
    }
  }
}

}  // namespace kfuse
