// `kfuse tune --manifest`: offline tuning of a list of chains and shape
// buckets through the Tune stream, with a total budget and a state file so
// that a rerun resumes where the last one stopped. Parsing and bookkeeping
// are plain functions (cli.h), tested without a server.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "clients/cli.h"
#include "clients/cli_format.h"
#include "clients/json.h"
#include "core/decimal.h"
#include "core/key.h"
#include "core/limits.h"
#include "core/proto_bytes.h"
#include "core/status.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace kfuse::client {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

constexpr int kBarWidth = 16;

absl::Status Bad(const std::string& where, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", why));
}

// A whole number in (0, 2^53]: JSON numbers are doubles.
absl::StatusOr<int64_t> PositiveInt(const Value& v, const std::string& where) {
  if (v.kind_case() != Value::kNumberValue || !(v.number_value() > 0) ||
      std::floor(v.number_value()) != v.number_value()) {
    return Bad(where, "expected a positive whole number");
  }
  if (v.number_value() > 9007199254740992.0) {
    return Bad(where, "past 2^53, beyond what a JSON number holds exactly (a chain holds at most 2^40 elements)");
  }
  return static_cast<int64_t>(v.number_value());
}

absl::StatusOr<std::string> String(const Value& v, const std::string& where) {
  if (v.kind_case() != Value::kStringValue) return Bad(where, "expected a string");
  return v.string_value();
}

// quick|full into the policy's mode.
absl::StatusOr<kfuse::v1::TuningPolicy::Mode> TuneMode(const std::string& mode, const std::string& where) {
  absl::StatusOr<kfuse::v1::TuningPolicy::Mode> m = ParsePolicyMode(mode);
  if (!m.ok() || (*m != kfuse::v1::TuningPolicy::MODE_QUICK && *m != kfuse::v1::TuningPolicy::MODE_FULL)) {
    return Bad(where, absl::StrCat("'", mode, "': expected quick or full"));
  }
  return *m;
}

// The entry's chain: a path (relative to the manifest) or an inline object,
// read from the manifest's text (`json`, from `what`) at `span`.
absl::StatusOr<kfuse::v1::CompileRequest> EntryChain(const Value& v, const std::string& where,
                                                     const std::string& base_dir, const std::string& json,
                                                     const std::string& what, std::pair<size_t, size_t> span,
                                                     std::string* name) {
  if (v.kind_case() == Value::kStringValue) {
    std::filesystem::path path(v.string_value());
    if (path.is_relative() && !base_dir.empty()) path = std::filesystem::path(base_dir) / path;
    *name = v.string_value();
    absl::StatusOr<kfuse::v1::CompileRequest> r = LoadCompileRequest(path.string());
    if (!r.ok()) return Bad(where, std::string(r.status().message()));
    return r;
  }
  if (v.kind_case() != Value::kStructValue)
    return Bad(where, "expected a file name or a kfuse.v1.Chain object");
  // From the text, not the Struct: its numbers are doubles, and errors give
  // the manifest's line and column.
  if (span.first == std::string::npos) return Bad(where, "cannot find the inline chain in the manifest's text");
  absl::StatusOr<kfuse::v1::CompileRequest> r = ParseCompileRequestIn(json, span.first, span.second, what);
  if (!r.ok()) return Bad(where, std::string(r.status().message()));
  return r;
}

// The buckets of an entry, each a list of (symbol, hint).
absl::StatusOr<std::vector<std::vector<std::pair<std::string, int64_t>>>> Buckets(const Value& v,
                                                                                  const std::string& where) {
  if (v.kind_case() != Value::kListValue) return Bad(where, "expected a list of {\"symbol\": size} objects");
  std::vector<std::vector<std::pair<std::string, int64_t>>> out;
  for (int j = 0; j < v.list_value().values_size(); ++j) {
    const std::string at = absl::StrCat(where, "[", j, "]");
    const Value& b = v.list_value().values(j);
    if (b.kind_case() != Value::kStructValue || b.struct_value().fields().empty()) {
      return Bad(at, "expected an object of symbol sizes, e.g. {\"n\": 4096}");
    }
    // Sorted by symbol, so labels and ids do not depend on the JSON's order.
    std::map<std::string, int64_t> sizes;
    for (const auto& [symbol, size] : b.struct_value().fields()) {
      KFUSE_ASSIGN_OR_RETURN(sizes[symbol], PositiveInt(size, absl::StrCat(at, ".", symbol)));
    }
    out.emplace_back(sizes.begin(), sizes.end());
  }
  return out;
}

std::string BucketLabel(const std::vector<std::pair<std::string, int64_t>>& bucket) {
  return absl::StrJoin(bucket, ",", [](std::string* out, const std::pair<std::string, int64_t>& p) {
    absl::StrAppend(out, p.first, "=", p.second);
  });
}

}  // namespace

absl::Status ApplyBucket(const std::vector<std::pair<std::string, int64_t>>& bucket,
                         kfuse::v1::Chain* chain) {
  std::set<std::string> symbols;
  auto apply = [&](kfuse::v1::Dim& d) {
    if (d.kind_case() != kfuse::v1::Dim::kSymbol) return;
    symbols.insert(d.symbol());
    for (const auto& [symbol, size] : bucket) {
      if (d.symbol() == symbol) d.set_hint(size);
    }
  };
  for (auto& in : *chain->mutable_inputs()) {
    for (auto& d : *in.mutable_shape()) apply(d);
  }
  for (auto& op : *chain->mutable_ops()) {
    if (!op.has_shape()) continue;
    for (auto& d : *op.mutable_shape()->mutable_shape()) apply(d);
  }
  for (const auto& [symbol, size] : bucket) {
    if (symbols.count(symbol) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", symbol, "' is not a symbol of the chain",
          symbols.empty() ? " (it has none)" : absl::StrCat(" (it has ", absl::StrJoin(symbols, ", "), ")")));
    }
  }
  return absl::OkStatus();
}

std::string ManifestItemId(const kfuse::v1::CompileRequest& request) {
  return Sha256Hex(absl::StrCat(DeterministicBytes(request.chain()), "\x1f", request.policy().mode(), "\x1f",
                                DeterministicBytes(request.target())));
}

absl::StatusOr<std::vector<ManifestItem>> ParseManifest(const std::string& json, const std::string& what,
                                                        const std::string& base_dir,
                                                        const ManifestDefaults& defaults) {
  KFUSE_ASSIGN_OR_RETURN(kfuse::v1::TuningPolicy::Mode default_mode, TuneMode(defaults.mode, "--mode"));
  Struct root;
  KFUSE_RETURN_IF_ERROR(ParseJson(json, what, &root));
  for (const auto& [field, value] : root.fields()) {
    if (field != "entries") return Bad(what, absl::StrCat("unknown field '", field, "' (expected entries)"));
  }
  auto entries = root.fields().find("entries");
  if (entries == root.fields().end() || entries->second.kind_case() != Value::kListValue) {
    return Bad(what, "expected {\"entries\": [...]}");
  }
  std::vector<ManifestItem> items;
  const auto& list = entries->second.list_value();
  // Where each entry's chain is written: one an object, in order, so entry
  // i's while entries 0 to i are objects (checked as they are read).
  const std::vector<std::pair<size_t, size_t>> chain_spans = JsonValueSpans(json, "chain", 3);
  for (int i = 0; i < list.values_size(); ++i) {
    const std::string where = absl::StrCat("entries[", i, "]");
    if (list.values(i).kind_case() != Value::kStructValue) return Bad(where, "expected an object");
    const auto& fields = list.values(i).struct_value().fields();
    for (const auto& [field, value] : fields) {
      if (field != "chain" && field != "buckets" && field != "mode" && field != "budget_seconds" &&
          field != "arch") {
        return Bad(where, absl::StrCat("unknown field '", field,
                                       "' (expected chain, buckets, mode, budget_seconds, arch)"));
      }
    }
    auto chain = fields.find("chain");
    if (chain == fields.end()) return Bad(absl::StrCat(where, ".chain"), "missing");
    std::string name = where;
    KFUSE_ASSIGN_OR_RETURN(kfuse::v1::CompileRequest request,
                           EntryChain(chain->second, absl::StrCat(where, ".chain"), base_dir, json, what,
                                      i < static_cast<int>(chain_spans.size())
                                          ? chain_spans[i]
                                          : std::make_pair(std::string::npos, std::string::npos),
                                      &name));

    kfuse::v1::TuningPolicy::Mode mode = default_mode;
    if (auto m = fields.find("mode"); m != fields.end()) {
      KFUSE_ASSIGN_OR_RETURN(std::string text, String(m->second, absl::StrCat(where, ".mode")));
      KFUSE_ASSIGN_OR_RETURN(mode, TuneMode(text, absl::StrCat(where, ".mode")));
    }
    request.mutable_policy()->set_mode(mode);
    double budget = defaults.budget_seconds;
    if (auto b = fields.find("budget_seconds"); b != fields.end()) {
      if (b->second.kind_case() != Value::kNumberValue || !(b->second.number_value() >= 0) ||
          b->second.number_value() > kMaxBudgetSeconds) {
        return Bad(absl::StrCat(where, ".budget_seconds"),
                   absl::StrCat("expected a number of seconds from 0 to ", kMaxBudgetSeconds));
      }
      budget = b->second.number_value();
    }
    if (budget > 0) request.mutable_policy()->set_budget_seconds(budget);
    std::string arch = defaults.arch;
    if (auto a = fields.find("arch"); a != fields.end()) {
      KFUSE_ASSIGN_OR_RETURN(arch, String(a->second, absl::StrCat(where, ".arch")));
      if (arch.empty()) return Bad(absl::StrCat(where, ".arch"), "must name a target (sm_90, sm_90a, ..., or native)");
    }
    if (!arch.empty()) {
      absl::StatusOr<kfuse::v1::Target> target = ParseArch(arch, "");
      if (!target.ok()) return Bad(absl::StrCat(where, ".arch"), std::string(target.status().message()));
      *request.mutable_target() = *target;
    }

    std::vector<std::vector<std::pair<std::string, int64_t>>> buckets;
    if (auto b = fields.find("buckets"); b != fields.end()) {
      KFUSE_ASSIGN_OR_RETURN(buckets, Buckets(b->second, absl::StrCat(where, ".buckets")));
    }
    if (buckets.empty()) {
      items.push_back({i, -1, name, request, ManifestItemId(request)});
      continue;
    }
    for (size_t j = 0; j < buckets.size(); ++j) {
      ManifestItem item{i, static_cast<int>(j), absl::StrCat(name, " ", BucketLabel(buckets[j])), request,
                        ""};
      if (absl::Status s = ApplyBucket(buckets[j], item.request.mutable_chain()); !s.ok()) {
        return Bad(absl::StrCat(where, ".buckets[", j, "]"), std::string(s.message()));
      }
      item.id = ManifestItemId(item.request);
      items.push_back(std::move(item));
    }
  }
  return items;
}

absl::StatusOr<std::vector<ManifestItem>> LoadManifest(const std::string& path,
                                                       const ManifestDefaults& defaults) {
  KFUSE_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseManifest(text, path, std::filesystem::path(path).parent_path().string(), defaults);
}

absl::StatusOr<std::set<std::string>> LoadTuneState(const std::string& path) {
  std::set<std::string> done;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return done;
  KFUSE_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    Struct record;
    if (line.empty() || !ParseJson(line, path, &record).ok()) continue;
    auto id = record.fields().find("id");
    if (id != record.fields().end() && id->second.kind_case() == Value::kStringValue) {
      done.insert(id->second.string_value());
    }
  }
  return done;
}

absl::Status AppendTuneState(const std::string& path, const ManifestItem& item, const std::string& outcome,
                             const std::string& key) {
  Struct record;
  auto& f = *record.mutable_fields();
  f["id"].set_string_value(item.id);
  f["entry"].set_number_value(item.entry);
  if (item.bucket >= 0) f["bucket"].set_number_value(item.bucket);
  f["label"].set_string_value(item.label);
  f["outcome"].set_string_value(outcome);
  f["key"].set_string_value(key);
  f["unix_ms"].set_number_value(static_cast<double>(absl::ToUnixMillis(absl::Now())));
  // One write on an append descriptor: runs appending at once never mix
  // their records. A line torn by a run killed mid-write is ended first, so
  // that this record starts a line of its own (torn lines are skipped when
  // read; an empty line a race may leave is too).
  const int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return absl::PermissionDeniedError(absl::StrCat("cannot append to the state file ", path));
  bool at_line_start = true;
  if (std::ifstream in(path, std::ios::binary); in && in.seekg(-1, std::ios::end)) {
    at_line_start = in.get() == '\n';
  }
  const std::string line = absl::StrCat(at_line_start ? "" : "\n", ToJson(record, /*pretty=*/false), "\n");
  ssize_t wrote;
  do {
    wrote = write(fd, line.data(), line.size());
  } while (wrote < 0 && errno == EINTR);
  const bool ok = wrote == static_cast<ssize_t>(line.size());
  if (close(fd) != 0 || !ok) {
    return absl::PermissionDeniedError(absl::StrCat("cannot append to the state file ", path));
  }
  return absl::OkStatus();
}

std::string FormatDuration(double seconds) {
  const int64_t s = seconds > 0 ? static_cast<int64_t>(std::llround(seconds)) : 0;
  if (s < 60) return absl::StrCat(s, "s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm%02ds", s / 3600, (s / 60) % 60, s % 60);
}

std::string FormatManifestProgress(size_t index, size_t count, const std::string& label, uint32_t done,
                                   uint32_t total, double elapsed_seconds, double eta_seconds) {
  return absl::StrCat("[", index, "/", count, "] ", label, "  trials ",
                      total == 0 ? "-" : absl::StrCat(done, "/", total), "  elapsed ",
                      FormatDuration(elapsed_seconds), "  ETA ",
                      eta_seconds < 0 ? "-" : FormatDuration(eta_seconds));
}

namespace {

// What became of the items of one run.
struct Tally {
  int tuned = 0, stored = 0, untuned = 0, skipped = 0, failed = 0, not_started = 0, repeated = 0;
};

void PrintItemJson(CliIo& io, size_t index, const ManifestItem& item, const std::string& outcome,
                   const std::string& key, const std::string& error, size_t repeat_of = 0) {
  Struct line;
  auto& f = *line.mutable_fields();
  f["item"].set_number_value(static_cast<double>(index));
  f["label"].set_string_value(item.label);
  f["id"].set_string_value(item.id);
  f["outcome"].set_string_value(outcome);
  if (!key.empty()) f["key"].set_string_value(key);
  if (!error.empty()) f["error"].set_string_value(error);
  if (repeat_of > 0) f["repeat_of"].set_number_value(static_cast<double>(repeat_of));
  io.out << ToJson(line, /*pretty=*/false) << "\n" << std::flush;
}

}  // namespace

int RunTuneManifest(const GlobalOptions& g, const TuneOptions& o, CliIo& io) {
  auto usage = [&](const std::string& why) {
    ReportError(g, absl::InvalidArgumentError(why), io);
    return kExitUsage;
  };
  if (!o.chain_path.empty()) return usage("tune: give a chain or --manifest, not both");
  if (o.force) return usage("tune --manifest: --force is not supported; remove the state file to retune");
  if (absl::Status s = CheckBudget(o.budget_seconds, "--budget"); !s.ok()) return usage(std::string(s.message()));
  // The whole run's bound: no server default, no cap (an overnight warm-up).
  if (!std::isfinite(o.budget_total_seconds) || o.budget_total_seconds < 0) {
    return usage(absl::StrCat("--budget-total ", ShortestDecimal(o.budget_total_seconds),
                              ": expected a number of seconds, 0 or more (0: no limit)"));
  }
  absl::StatusOr<std::vector<ManifestItem>> items =
      LoadManifest(o.manifest, ManifestDefaults{o.mode, o.arch, o.budget_seconds});
  // A file that is not there is NOT_FOUND, as for a chain; exit 2 either way.
  if (!items.ok()) {
    ReportError(g, items.status(), io);
    return kExitUsage;
  }
  // Not an error (a generated manifest may have nothing to warm), but said:
  // the summary's zeros alone read as a run that tuned nothing it was given.
  if (items->empty()) io.err << "tune: " << Printable(o.manifest) << " lists no entries; nothing to tune\n";
  const std::string state_path = o.state.empty() ? o.manifest + ".state" : o.state;
  absl::StatusOr<std::set<std::string>> done = LoadTuneState(state_path);
  if (!done.ok()) {
    ReportError(g, done.status(), io);
    return kExitUsage;
  }
  auto client = ConnectFromFlags(g);
  if (!client.ok()) return ReportUsageError(g, client.status(), io);

  const bool bar = io.out_is_tty && !g.json;
  const size_t count = items->size();
  // An item whose id an earlier item of this run has (the same chain, bucket
  // hints, mode and target, listed twice; the budget is not in the id) is
  // that item's repeat: it is not sent again, whatever became of the first
  // (done before, tuned, failed or not started).
  std::map<std::string, size_t> first_index;
  size_t to_run = 0;
  for (size_t i = 0; i < items->size(); ++i) {
    const std::string& id = (*items)[i].id;
    if (first_index.emplace(id, i + 1).second) to_run += done->count(id) == 0;
  }
  const absl::Time start = absl::Now();
  auto elapsed = [&] { return absl::ToDoubleSeconds(absl::Now() - start); };
  Tally tally;
  size_t last_width = 0;
  auto clear_bar = [&] {
    if (bar && last_width > 0) io.out << "\r" << std::string(last_width, ' ') << "\r";
    last_width = 0;
  };
  int exit_code = kExitOk;
  for (size_t i = 0; i < count; ++i) {
    const ManifestItem& item = (*items)[i];
    const size_t index = i + 1;
    if (const size_t first = first_index.at(item.id); first != index) {
      ++tally.repeated;
      if (g.json) {
        PrintItemJson(io, index, item, "repeat", "", "", first);
      } else {
        io.out << "[" << index << "/" << count << "] " << item.label << ": the same request as item " << first
               << "\n";
      }
      continue;
    }
    if (done->count(item.id) > 0) {
      ++tally.skipped;
      if (g.json) PrintItemJson(io, index, item, "skipped", "", "");
      continue;
    }
    if ((o.budget_total_seconds > 0 && elapsed() >= o.budget_total_seconds) ||
        exit_code == kExitUnavailable) {
      ++tally.not_started;
      if (g.json) PrintItemJson(io, index, item, "not_started", "", "");
      continue;
    }
    const int finished = tally.tuned + tally.stored + tally.untuned + tally.failed;
    auto on_progress = [&](const kfuse::v1::TuneProgress& p) {
      if (!bar) return;
      const double fraction =
          (finished + (p.total() > 0 ? static_cast<double>(std::min(p.done(), p.total())) / p.total() : 0)) /
          static_cast<double>(to_run);
      double eta = fraction > 0 ? elapsed() * (1 - fraction) / fraction : -1;
      if (o.budget_total_seconds > 0 && eta >= 0)
        eta = std::min(eta, std::max(0.0, o.budget_total_seconds - elapsed()));
      std::string line =
          absl::StrCat(FormatProgressBar(p.done(), p.total(), kBarWidth), " ",
                       FormatManifestProgress(index, count, item.label, p.done(), p.total(), elapsed(), eta));
      constexpr size_t kMax = 110;  // One terminal line.
      if (line.size() > kMax) line = line.substr(0, kMax - 3) + "...";
      const size_t width = line.size();
      line.append(last_width > width ? last_width - width : 0, ' ');
      last_width = width;
      io.out << "\r" << line << std::flush;
    };
    const absl::Time item_start = absl::Now();
    absl::StatusOr<kfuse::v1::CompileResponse> r = (*client)->Tune(item.request, on_progress);
    clear_bar();
    const std::string took = FormatDuration(absl::ToDoubleSeconds(absl::Now() - item_start));
    if (!r.ok()) {
      ++tally.failed;
      const std::string error =
          absl::StrCat(absl::StatusCodeToString(r.status().code()), ": ", r.status().message());
      if (g.json) {
        PrintItemJson(io, index, item, "failed", "", error);
      } else {
        io.out << "[" << index << "/" << count << "] " << item.label << ": failed: " << error << "\n";
      }
      // No server: the items left are not started, and the exit code says why.
      if (r.status().code() == absl::StatusCode::kUnavailable) {
        exit_code = kExitUnavailable;
      }
      continue;
    }
    const auto& prov = r->plan().provenance();
    // An untimed answer (no GPU, the GPU busy past the wait, a policy) is not
    // what the item asked for: it is not recorded, so a rerun tunes it.
    const bool untuned = prov.state() == kfuse::v1::TUNE_STATE_HEURISTIC;
    const bool stored =
        r->cache() == kfuse::v1::CACHE_OUTCOME_HIT || r->cache() == kfuse::v1::CACHE_OUTCOME_FLEET_HIT;
    ++(untuned ? tally.untuned : stored ? tally.stored : tally.tuned);
    const std::string outcome = untuned ? "untuned" : stored ? "stored" : "tuned";
    if (!untuned) {
      if (absl::Status s = AppendTuneState(state_path, item, outcome, r->plan().key()); !s.ok()) {
        io.err << "kfuse: warning: " << s.message() << "\n";
      }
    }
    if (g.json) {
      PrintItemJson(io, index, item, outcome, r->plan().key(), "");
    } else {
      const std::string reason = prov.reason().empty() ? "untimed" : prov.reason();
      const std::string what = untuned  ? absl::StrCat("not tuned: heuristic (", reason, ")")
                               : stored ? "already stored"
                                        : "tuned";
      io.out << "[" << index << "/" << count << "] " << item.label << ": " << what << "  key "
             << r->plan().key().substr(0, 16) << "  (" << took << ")\n";
    }
  }
  if (g.json) {
    Struct summary;
    auto& f = *summary.mutable_fields();
    f["tuned"].set_number_value(tally.tuned);
    f["already_stored"].set_number_value(tally.stored);
    f["untuned"].set_number_value(tally.untuned);
    f["skipped"].set_number_value(tally.skipped);
    f["repeats"].set_number_value(tally.repeated);
    f["failed"].set_number_value(tally.failed);
    f["not_started"].set_number_value(tally.not_started);
    f["state"].set_string_value(state_path);
    io.out << ToJson(summary, /*pretty=*/false) << "\n";
  } else {
    io.out << "tuned " << tally.tuned << ", already stored " << tally.stored << ", failed " << tally.failed
           << ", not started " << tally.not_started;
    if (tally.not_started > 0) io.out << (exit_code == kExitUnavailable ? " (no server)" : " (budget)");
    if (tally.untuned > 0) io.out << ", not tuned " << tally.untuned << " (heuristic answers)";
    if (tally.skipped > 0)
      io.out << "; " << tally.skipped << " done in an earlier run (" << state_path << ")";
    if (tally.repeated > 0) io.out << "; " << tally.repeated << " repeating an earlier item, not sent again";
    io.out << "; " << FormatDuration(elapsed()) << "\n";
  }
  if (exit_code != kExitOk) return exit_code;
  return tally.failed > 0 || tally.untuned > 0 ? kExitFailed : kExitOk;
}

}  // namespace kfuse::client
