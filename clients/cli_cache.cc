// `kfuse cache ls|show|rm`: the store, through ListKernels and DeleteKernels.
// There is no lookup by key in the API; a key (or a unique prefix of one, as
// `ls` prints) is resolved with ListKernels(key_prefix).
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "clients/cli.h"
#include "clients/cli_format.h"
#include "clients/json.h"
#include "core/status.h"

namespace kfuse::client {
namespace {

// The one entry whose key is `key` or starts with it.
absl::StatusOr<kfuse::v1::KernelSummary> Resolve(Client& client,
                                                 const std::string& key) {
  if (key.empty()) return absl::InvalidArgumentError("empty key");
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
  if (!client.ok()) return ReportError(g, client.status(), io);
  kfuse::v1::ListKernelsRequest req;
  req.set_key_prefix(o.prefix);
  req.set_limit(o.limit);
  auto resp = (*client)->ListKernels(req);
  if (!resp.ok()) return ReportError(g, resp.status(), io);
  if (g.json) {
    io.out << ToJson(*resp, /*pretty=*/false) << "\n";
  } else {
    io.out << FormatKernelTable(*resp, absl::ToUnixMillis(absl::Now()));
  }
  return kExitOk;
}

int RunCacheShow(const GlobalOptions& g, const std::string& key, CliIo& io) {
  auto client = ConnectFromFlags(g);
  if (!client.ok()) return ReportError(g, client.status(), io);
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
  if (!client.ok()) return ReportError(g, client.status(), io);
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
    io.out << ToJson(*resp, /*pretty=*/false) << "\n";
  } else {
    io.out << "deleted " << resp->deleted()
           << (resp->deleted() == 1 ? " kernel\n" : " kernels\n");
  }
  return kExitOk;
}

}  // namespace kfuse::client
