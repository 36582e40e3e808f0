// `kfuse cache ls|show|rm|explain|export|import`: the store, through
// ListKernels, DeleteKernels, Explain, ExportKernels and ImportKernels. There
// is no lookup by key in the API; a key (or a unique prefix of one, as `ls`
// prints) is resolved with ListKernels(key_prefix). Bundles are streamed:
// neither export nor import holds more than one batch of entries (an
// import from a pipe reads it into a temporary file first).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "clients/cli.h"
#include "clients/cli_format.h"
#include "clients/json.h"
#include "core/status.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/delimited_message_util.h"

namespace kfuse::client {
namespace {

// The one entry whose key is `key` or starts with it.
absl::StatusOr<kfuse::v1::KernelSummary> Resolve(Client& client,
                                                 const std::string& given) {
  if (given.empty()) return absl::InvalidArgumentError("empty key");
  const std::string key = absl::AsciiStrToLower(given);  // Keys are lowercase hex.
  kfuse::v1::ListKernelsRequest req;
  req.set_key_prefix(key);
  req.set_limit(10);
  KFUSE_ASSIGN_OR_RETURN(kfuse::v1::ListKernelsResponse resp,
                         client.ListKernels(req));
  std::vector<std::string> matches;
  for (const auto& k : resp.kernels()) {
    if (k.key() == key) return k;
    if (k.key().rfind(key, 0) == 0) matches.push_back(k.key());
  }
  if (matches.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no kernel in the store has a key starting with ", key,
                     " (see kfuse cache ls)"));
  }
  if (matches.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key prefix ", key, " is ambiguous: ", absl::StrJoin(matches, ", "),
        "; give more characters"));
  }
  for (const auto& k : resp.kernels()) {
    if (k.key() == matches[0]) return k;
  }
  return absl::InternalError("unreachable");
}

}  // namespace

int RunCacheLs(const GlobalOptions& g, const CacheLsOptions& o, CliIo& io) {
  auto client = ConnectFromFlags(g);
  if (!client.ok()) return ReportUsageError(g, client.status(), io);
  kfuse::v1::ListKernelsRequest req;
  req.set_key_prefix(absl::AsciiStrToLower(o.prefix));
  req.set_limit(o.limit);
  auto resp = (*client)->ListKernels(req);
  if (!resp.ok()) return ReportError(g, resp.status(), io);
  if (g.json) {
    io.out << ToJson(*resp, /*pretty=*/false) << "\n";
  } else {
    io.out << FormatKernelTable(*resp, absl::ToUnixMillis(absl::Now()), o.prefix);
  }
  return kExitOk;
}

int RunCacheShow(const GlobalOptions& g, const std::string& key, CliIo& io) {
  auto client = ConnectFromFlags(g);
  if (!client.ok()) return ReportUsageError(g, client.status(), io);
  auto summary = Resolve(**client, key);
  if (!summary.ok()) return ReportError(g, summary.status(), io);
  if (g.json) {
    io.out << ToJson(*summary, /*pretty=*/false) << "\n";
  } else {
    io.out << FormatKernelSummary(*summary);
  }
  return kExitOk;
}

int RunCacheRm(const GlobalOptions& g, const CacheRmOptions& o, CliIo& io) {
  if (o.all == !o.keys.empty()) {
    ReportError(g,
                absl::InvalidArgumentError(
                    "cache rm: give KEY... or --all (not both, not neither)"),
                io);
    return kExitUsage;
  }
  auto client = ConnectFromFlags(g);
  if (!client.ok()) return ReportUsageError(g, client.status(), io);
  kfuse::v1::DeleteKernelsRequest req;
  req.set_all(o.all);
  for (const std::string& key : o.keys) {
    auto summary = Resolve(**client, key);
    if (!summary.ok()) return ReportError(g, summary.status(), io);
    req.add_keys(summary->key());
  }
  auto resp = (*client)->DeleteKernels(req);
  if (!resp.ok()) return ReportError(g, resp.status(), io);
  if (g.json) {
    io.out << ToJson(*resp, /*pretty=*/false, /*with_defaults=*/true) << "\n";
  } else {
    // Kernels and the tuning decisions beside them, which `cache ls` does
    // not list: --all empties the store, a kernel takes its decision along.
    const bool one = resp->deleted() == 1;
    io.out << "deleted " << resp->deleted() << (one ? " store entry" : " store entries")
           << (o.all ? " (kernels and tuning decisions)\n" : " (kernels and the tuning decisions they were built from)\n");
  }
  return kExitOk;
}

// --- Bundles.

namespace {

// Reads kBundleMagic's bytes from `in`; DATA_LOSS naming `path` if they differ.
absl::Status ReadBundleMagic(const std::string& path, std::istream& in) {
  std::string magic(kBundleMagicSize, '\0');
  in.read(magic.data(), static_cast<std::streamsize>(magic.size()));
  if (in.gcount() != static_cast<std::streamsize>(magic.size()) ||
      magic != std::string(kBundleMagic, kBundleMagicSize)) {
    return absl::DataLossError(absl::StrCat(
        path,
        ": not a kfuse bundle (offset 0: expected \"KFUSE-BUNDLE-v1\\n\")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<BundleReader>> BundleReader::Open(
    const std::string& path) {
  KFUSE_ASSIGN_OR_RETURN(std::unique_ptr<std::ifstream> in, OpenForReading(path));
  KFUSE_RETURN_IF_ERROR(ReadBundleMagic(path, *in));
  std::unique_ptr<BundleReader> r(new BundleReader(path, std::move(in)));
  r->offset_ = static_cast<int64_t>(kBundleMagicSize);
  return r;
}

absl::Status BundleReader::Damaged(int64_t at, const std::string& why) const {
  return absl::DataLossError(
      absl::StrCat(path_, ": entry ", entries_, " at offset ", at, ": ", why));
}

absl::StatusOr<bool> BundleReader::Next(kfuse::v1::StoreEntry* entry) {
  const int64_t start = offset_;
  uint64_t size = 0;
  for (int shift = 0;; shift += 7) {
    const int c = in_->get();
    if (c == std::char_traits<char>::eof()) {
      if (shift == 0) return false;  // A clean end between entries.
      return Damaged(start, "the file ends inside the entry's length");
    }
    ++offset_;
    if (shift > 63) return Damaged(start, "the entry's length is not a varint");
    size |= static_cast<uint64_t>(c & 0x7f) << shift;
    if ((c & 0x80) == 0) break;
  }
  if (size > static_cast<uint64_t>(kMaxBundleEntryBytes)) {
    return Damaged(start, absl::StrCat("an entry of ", size, " bytes (at most ",
                                       kMaxBundleEntryBytes, ")"));
  }
  // Read a piece at a time: a damaged length does not allocate what the
  // file does not hold (a 23-byte file once claimed a gigabyte).
  constexpr uint64_t kPiece = uint64_t{1} << 20;
  std::string bytes;
  int64_t got = 0;
  while (static_cast<uint64_t>(got) < size) {
    const uint64_t want = std::min(kPiece, size - static_cast<uint64_t>(got));
    bytes.resize(static_cast<size_t>(got) + want);
    in_->read(bytes.data() + got, static_cast<std::streamsize>(want));
    got += in_->gcount();
    if (static_cast<uint64_t>(in_->gcount()) != want) break;
  }
  bytes.resize(static_cast<size_t>(got));
  offset_ += got;
  if (got != static_cast<int64_t>(size)) {
    return Damaged(start, absl::StrCat("truncated: ", size, " bytes expected, ",
                                       got, " left in the file"));
  }
  if (!entry->ParseFromString(bytes)) {
    return Damaged(start, "not a kfuse.v1.StoreEntry");
  }
  ++entries_;
  return true;
}

namespace {

// Import requests stay under these (the server takes at most 10000 entries
// a request; 8 MiB keeps requests well under message limits).
constexpr size_t kImportBatchBytes = size_t{8} << 20;
constexpr int kImportBatchEntries = 10000;

void Add(const kfuse::v1::ImportKernelsResponse& r,
         kfuse::v1::ImportKernelsResponse* total) {
  total->set_imported(total->imported() + r.imported());
  total->set_already_present(total->already_present() + r.already_present());
  total->set_evicted(total->evicted() + r.evicted());
  for (const std::string& line : r.rejected()) total->add_rejected(line);
}

}  // namespace

int RunCacheExplain(const GlobalOptions& g, const CacheExplainOptions& o,
                    CliIo& io) {
  auto request = LoadCompileRequest(o.chain_path);
  if (request.ok() && !o.arch.empty()) {
    auto target = ParseArch(o.arch);
    if (target.ok()) {
      *request->mutable_target() = *target;
    } else {
      request = target.status();
    }
  }
  if (request.ok() && !o.policy.empty()) {
    auto mode = ParsePolicyMode(o.policy);
    if (mode.ok()) {
      request->mutable_policy()->set_mode(*mode);
    } else {
      request = mode.status();
    }
  }
  if (!request.ok()) {
    ReportError(g, request.status(), io);
    return kExitUsage;
  }
  auto client = ConnectFromFlags(g);
  if (!client.ok()) return ReportUsageError(g, client.status(), io);
  auto resp = (*client)->Explain(*std::move(request));
  if (!resp.ok()) return ReportError(g, resp.status(), io);
  io.out << (g.json ? ToJson(*resp, /*pretty=*/false) + "\n"
                    : FormatExplain(*resp));
  return kExitOk;
}

int RunCacheExport(const GlobalOptions& g, const CacheExportOptions& o,
                   CliIo& io) {
  // "-" (or a name of this process's stdout) is written to standard output
  // itself, not reopened: a reopened /dev/stdout has an offset of its own,
  // so it truncated, or was overwritten after, a file the shell redirected
  // it to (`>> f`, `{ ...; } > f`).
  const bool to_stdout =
      o.out == "-" || o.out == "/dev/stdout" || o.out == "/dev/fd/1" || o.out == "/proc/self/fd/1";
  // A file is written beside the target and renamed at the end: a failed
  // export leaves no bundle that looks whole. Anything else that exists (a
  // link, a pipe, a device) is written in place, never replaced; it may be
  // this process's stdout, so then what the command says (the summary, an
  // error, JSON or not) goes to stderr and the bundle stays whole.
  struct stat st;
  const bool in_place =
      to_stdout || (!o.out.empty() && ::lstat(o.out.c_str(), &st) == 0 && !S_ISREG(st.st_mode));
  CliIo said{in_place ? io.err : io.out, io.err, false};
  const int given = !o.keys.empty() + !o.prefix.empty() + o.all;
  if (given != 1 || o.out.empty()) {
    return ReportUsageError(g,
                            absl::InvalidArgumentError(
                                given != 1 ? "cache export: give exactly one of KEY..., "
                                             "--prefix and --all"
                                           : "cache export: -o FILE is required"),
                            said);
  }
  auto client = ConnectFromFlags(g);
  if (!client.ok()) return ReportUsageError(g, client.status(), said);
  kfuse::v1::ExportKernelsRequest req;
  for (const std::string& k : o.keys) req.add_keys(absl::AsciiStrToLower(k));
  req.set_key_prefix(absl::AsciiStrToLower(o.prefix));
  req.set_all(o.all);

  const std::string target = to_stdout ? "standard output" : in_place ? o.out : o.out + ".partial";
  std::ofstream file;
  if (!to_stdout) {
    file.open(target, std::ios::binary | std::ios::trunc);
    if (!file) return ReportError(g, FileError(absl::StrCat("cannot write ", target), errno), said);
  }
  std::ostream& out = to_stdout ? io.out : file;
  // The magic goes out with the first entry (or at the end of a stream of
  // none), so a selection the server refuses writes nothing to stdout or a
  // file written in place.
  bool started = false;
  auto start = [&] {
    if (!started) out.write(kBundleMagic, kBundleMagicSize);
    started = true;
  };
  int decisions = 0, artifacts = 0;
  int64_t bytes = kBundleMagicSize;
  absl::Status s = (*client)->ExportKernels(
      req, [&](kfuse::v1::StoreEntry& e) -> absl::Status {
        start();
        if (!google::protobuf::util::SerializeDelimitedToOstream(e, &out)) {
          return absl::DataLossError(
              absl::StrCat("writing ", target, " failed"));
        }
        const size_t size = e.ByteSizeLong();
        bytes += static_cast<int64_t>(
            size + google::protobuf::io::CodedOutputStream::VarintSize64(size));
        ++(e.kind() == "decision" ? decisions : artifacts);
        return absl::OkStatus();
      });
  if (s.ok()) start();
  if (to_stdout) {
    out.flush();
  } else {
    file.close();
  }
  if (s.ok() && !out)
    s = absl::DataLossError(absl::StrCat("writing ", target, " failed"));
  if (s.ok() && !in_place && std::rename(target.c_str(), o.out.c_str()) != 0) {
    s = FileError(absl::StrCat("cannot rename ", target, " to ", o.out), errno);
  }
  if (!s.ok()) {
    if (!in_place) std::remove(target.c_str());
    return ReportError(g, s, said);
  }
  if (g.json) {
    google::protobuf::Struct summary;
    auto& f = *summary.mutable_fields();
    f["file"].set_string_value(o.out);
    f["decisions"].set_number_value(decisions);
    f["artifacts"].set_number_value(artifacts);
    f["bytes"].set_number_value(static_cast<double>(bytes));
    said.out << ToJson(summary, /*pretty=*/false) << "\n";
  } else {
    const auto counted = [](int n, const char* one, const char* many) { return absl::StrCat(n, " ", n == 1 ? one : many); };
    said.out << "exported " << counted(decisions + artifacts, "entry", "entries") << " ("
           << counted(decisions, "decision", "decisions") << ", " << counted(artifacts, "artifact", "artifacts") << "), "
           << FormatBytes(static_cast<double>(bytes)) << " to "
           << (to_stdout ? "standard output" : o.out) << "\n";
  }
  return kExitOk;
}

namespace {

// `in`'s bytes in a new temporary file (under $TMPDIR, else /tmp); its path.
absl::StatusOr<std::string> CopyToTemporaryFile(const std::string& in_path) {
  KFUSE_ASSIGN_OR_RETURN(std::unique_ptr<std::ifstream> in, OpenForReading(in_path));
  // The magic first: what is no bundle (/dev/zero) is not copied to its end.
  KFUSE_RETURN_IF_ERROR(ReadBundleMagic(in_path, *in));
  const char* dir = std::getenv("TMPDIR");
  std::string path = absl::StrCat(dir != nullptr && *dir != '\0' ? dir : "/tmp", "/kfuse-import-XXXXXX");
  const int fd = ::mkstemp(path.data());
  if (fd < 0) return FileError("cannot make a temporary copy of the bundle", errno);
  ::close(fd);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(kBundleMagic, kBundleMagicSize);
  // Not `out << in->rdbuf()`, which fails when nothing follows.
  std::vector<char> chunk(1 << 16);
  while (in->read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in->gcount() > 0) {
    out.write(chunk.data(), in->gcount());
  }
  out.close();
  if (!out || in->bad()) {
    std::remove(path.c_str());
    return absl::DataLossError(absl::StrCat(in_path, ": reading it into a temporary file failed"));
  }
  return path;
}

// `s` with the temporary copy's path replaced by the one the user gave.
absl::Status Named(const absl::Status& s, const std::string& read, const std::string& given) {
  if (read == given) return s;
  return absl::Status(s.code(), absl::StrReplaceAll(s.message(), {{read, given}}));
}

}  // namespace

int RunCacheImport(const GlobalOptions& g, const std::string& given_path,
                   CliIo& io) {
  // The whole bundle is read once before anything is sent (a damaged file
  // sends nothing), then again as it is sent. Anything but a regular file (a
  // pipe, /dev/stdin) can be read only once: it is copied to a temporary
  // file first, so memory holds one batch whatever the bundle's size.
  const std::string source = given_path == "-" ? "/dev/stdin" : given_path;  // "-": standard input.
  std::string bundle_path = source;
  struct stat st;
  std::unique_ptr<std::string, void (*)(std::string*)> copy(nullptr, [](std::string* path) {
    std::remove(path->c_str());
    delete path;
  });
  if (::stat(source.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    absl::StatusOr<std::string> path = CopyToTemporaryFile(source);
    if (!path.ok()) return ReportUsageError(g, path.status(), io);
    copy.reset(new std::string(*path));
    bundle_path = *path;
  }
  {
    auto reader = BundleReader::Open(bundle_path);
    if (!reader.ok()) return ReportUsageError(g, Named(reader.status(), bundle_path, given_path), io);
    kfuse::v1::StoreEntry e;
    for (;;) {
      absl::StatusOr<bool> more = (*reader)->Next(&e);
      if (!more.ok()) return ReportUsageError(g, Named(more.status(), bundle_path, given_path), io);
      if (!*more) break;
    }
  }
  auto client = ConnectFromFlags(g);
  if (!client.ok()) return ReportUsageError(g, client.status(), io);
  auto reader = BundleReader::Open(bundle_path);
  if (!reader.ok()) return ReportError(g, Named(reader.status(), bundle_path, given_path), io);
  kfuse::v1::ImportKernelsResponse total;
  kfuse::v1::ImportKernelsRequest batch;
  size_t batch_bytes = 0;
  auto send = [&]() -> absl::Status {
    if (batch.entries_size() == 0) return absl::OkStatus();
    KFUSE_ASSIGN_OR_RETURN(kfuse::v1::ImportKernelsResponse r,
                           (*client)->ImportKernels(batch));
    Add(r, &total);
    batch.Clear();
    batch_bytes = 0;
    return absl::OkStatus();
  };
  kfuse::v1::StoreEntry e;
  for (;;) {
    absl::StatusOr<bool> more = (*reader)->Next(&e);
    if (!more.ok()) return ReportError(g, Named(more.status(), bundle_path, given_path), io);
    if (!*more) break;
    const size_t size = e.ByteSizeLong();
    if (batch.entries_size() >= kImportBatchEntries ||
        (batch_bytes > 0 && batch_bytes + size > kImportBatchBytes)) {
      if (absl::Status s = send(); !s.ok()) return ReportError(g, s, io);
    }
    batch_bytes += size;
    *batch.add_entries() = std::move(e);
  }
  if (absl::Status s = send(); !s.ok()) return ReportError(g, s, io);
  io.out << (g.json ? ToJson(total, /*pretty=*/false, /*with_defaults=*/true) + "\n"
                    : FormatImportResult(total));
  return total.rejected_size() > 0 ? kExitFailed : kExitOk;
}

}  // namespace kfuse::client
