// Renderings for the store and device subcommands and tuning progress; the
// plan summary lives in cli_format.cc.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "clients/cli_format.h"

namespace kfuse::client {
namespace {

std::string Ago(int64_t then_ms, int64_t now_ms) {
  if (then_ms <= 0) return "-";
  const int64_t s = std::max<int64_t>(0, (now_ms - then_ms) / 1000);
  if (s < 60) return absl::StrCat(s, "s ago");
  if (s < 3600) return absl::StrCat(s / 60, "m ago");
  if (s < 86400) return absl::StrCat(s / 3600, "h ago");
  return absl::StrCat(s / 86400, "d ago");
}

std::string Timestamp(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                          absl::FromUnixMillis(unix_ms), absl::UTCTimeZone());
}

std::string Fingerprint(const kfuse::v1::DeviceFingerprint& d) {
  return absl::StrCat(d.name(), ", sm_", d.cc_major(), d.cc_minor(), ", ",
                      d.sm_count(), " SMs, ", FormatBytes(d.memory_bytes()),
                      ", L2 ", FormatBytes(d.l2_bytes()),
                      d.mig() ? ", MIG" : "", d.ecc() ? ", ECC" : "");
}

// One line of at most `max` characters: a listing row must stay a row even
// when the server's description spans lines.
std::string OneLine(const std::string& text, size_t max) {
  std::string out;
  bool space = false;
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t') {
      if (!out.empty()) space = true;
      continue;
    }
    if (space) {
      out += "; ";
      space = false;
    }
    out += c;
  }
  if (out.size() > max) out = out.substr(0, max - 3) + "...";
  return out;
}

}  // namespace

std::string FormatKernelTable(const kfuse::v1::ListKernelsResponse& r,
                              int64_t now_unix_ms, const std::string& prefix) {
  if (r.kernels().empty()) {
    return prefix.empty() ? "no kernels in the store\n"
                          : absl::StrCat("no kernel key starts with ", prefix, "\n");
  }
  std::vector<std::vector<std::string>> rows;
  rows.push_back(
      {"KEY", "FAMILY", "ARCH", "STATE", "SIZE", "HITS", "USED", "CHAIN"});
  for (const auto& k : r.kernels()) {
    rows.push_back(
        {k.key().substr(0, 16), FamilyName(k.family()), k.arch(),
         TuneStateName(k.state()), FormatBytes(static_cast<double>(k.bytes())),
         absl::StrCat(k.hits()), Ago(k.last_used_unix_ms(), now_unix_ms),
         OneLine(k.description(), 60)});
  }
  const std::string shown =
      r.more() ? absl::StrCat("the first ", r.kernels_size(), r.kernels_size() == 1 ? " entry" : " entries",
                              " (more match: --limit N lists up to 10000), ")
               : absl::StrCat(r.kernels_size(), r.kernels_size() == 1 ? " entry, " : " entries, ");
  return absl::StrCat(FormatTable(rows), shown,
                      FormatBytes(static_cast<double>(r.total_bytes())),
                      " in the store\n");
}

std::string FormatKernelSummary(const kfuse::v1::KernelSummary& k) {
  std::vector<std::vector<std::string>> rows = {
      {"key", k.key()},
      {"chain hash", k.chain_hash()},
      {"family", FamilyName(k.family())},
      {"arch", k.arch()},
      {"device", k.device()},
      {"state", TuneStateName(k.state())},
      {"size", FormatBytes(static_cast<double>(k.bytes()))},
      {"hits", absl::StrCat(k.hits())},
      {"created", Timestamp(k.created_unix_ms())},
      {"last used", Timestamp(k.last_used_unix_ms())},
  };
  std::string out = FormatTable(rows);
  if (!k.description().empty()) {
    out += "chain\n";
    std::string line;
    for (char c : k.description() + "\n") {
      if (c != '\n') {
        line += c;
      } else if (!line.empty()) {
        absl::StrAppend(&out, "  ", Printable(line), "\n");  // Entry text: imports and the fleet's too.
        line.clear();
      }
    }
  }
  return out;
}

std::string FormatExplain(const kfuse::v1::ExplainResponse& r) {
  std::vector<std::vector<std::string>> head = {
      {"key", r.key()},
      {"stored", r.found() ? "yes (a hit)" : "no (a miss)"},
      {"nearest", r.nearest_key().empty() ? "-" : r.nearest_key()},
  };
  if (!r.fleet().empty()) head.push_back({"fleet", r.fleet()});
  std::string out = FormatTable(head);
  std::vector<std::vector<std::string>> rows = {
      {" ", "PART", "THIS REQUEST", "NEAREST STORED"}};
  for (const auto& p : r.parts()) {
    bool differs = false;
    for (const std::string& d : r.differing_parts()) differs |= d == p.name();
    const std::string nearest = p.nearest_value().empty() ? "-"
                                : p.nearest_value() == p.value()
                                    ? "(same)"
                                    : OneLine(p.nearest_value(), 64);
    rows.push_back(
        {differs ? "*" : " ", p.name(), OneLine(p.value(), 64), nearest});
  }
  if (r.parts_size() > 0) absl::StrAppend(&out, "\n", FormatTable(rows));
  if (!r.text().empty()) {
    absl::StrAppend(&out, "\n", r.text(), r.text().back() == '\n' ? "" : "\n");
  }
  return out;
}

std::string FormatImportResult(const kfuse::v1::ImportKernelsResponse& r) {
  std::string out;
  for (const std::string& line : r.rejected()) {
    absl::StrAppend(&out, "rejected ", OneLine(line, 300), "\n");
  }
  absl::StrAppend(&out, "imported ", r.imported(), ", already present ",
                  r.already_present(), ", rejected ", r.rejected_size(), "\n");
  if (r.evicted() > 0) {
    absl::StrAppend(&out, r.evicted(), " of the ", r.imported(),
                    " imported were evicted again by the store's cap (kfused --store_max_bytes) to make room "
                    "for the rest\n");
  }
  return out;
}

std::string FormatDeviceInfo(const kfuse::v1::DeviceInfo& d) {
  std::vector<std::vector<std::string>> rows;
  if (d.has_gpu()) {
    rows.push_back({"gpu", Fingerprint(d.device())});
    rows.push_back({"fingerprint", d.device().digest()});
  } else {
    // The reason may hold parentheses of its own: a colon, not a nesting.
    rows.push_back({"gpu", absl::StrCat("none: ",
                                        d.reason().empty() ? "no reason given"
                                                           : d.reason(),
                                        "; answers are heuristic, untuned")});
  }
  rows.push_back(
      {"driver", d.driver_version() == 0
                     ? "-"
                     : absl::StrCat(d.driver_version() / 1000, ".",
                                    (d.driver_version() % 1000) / 10)});
  rows.push_back(
      {"nvrtc", d.nvrtc_version().empty() ? "-" : d.nvrtc_version()});
  rows.push_back({"archs", absl::StrJoin(d.supported_archs(), " ")});
  if (d.has_ceilings()) {
    const auto& c = d.ceilings();
    rows.push_back(
        {"ceilings",
         absl::StrCat("read ", FormatBytes(c.read_bytes_per_second()),
                      "/s, write ", FormatBytes(c.write_bytes_per_second()),
                      "/s, copy ", FormatBytes(c.copy_bytes_per_second()),
                      "/s; fma ", FormatCount(c.fma_flops()),
                      "FLOP/s, special ", FormatCount(c.special_flops()),
                      "FLOP/s, tensor ", FormatCount(c.tensor_flops()),
                      "FLOP/s (", c.measured() ? "measured" : "nominal", ")")});
  }
  rows.push_back({"generator", d.generator_version()});
  rows.push_back({"server", d.server_version()});
  return FormatTable(rows);
}

std::string FormatProgressLine(const kfuse::v1::TuneProgress& p,
                               double best_seconds) {
  const int w = static_cast<int>(absl::StrCat(p.total()).size());
  std::string line =
      absl::StrFormat("[%*u/%u] %-7s", w, p.done(), p.total(), p.phase());
  // A plan of several kernels tunes each in turn: say which.
  if (p.kernels() > 1) line = absl::StrCat("kernel ", p.kernel() + 1, "/", p.kernels(), " ", line);
  if (p.has_trial()) {
    const auto& t = p.trial();
    absl::StrAppend(&line, " ", FormatVariant(t.variant()), "  ");
    if (t.outcome() == kfuse::v1::Trial::OUTCOME_OK) {
      absl::StrAppend(&line, FormatSeconds(t.median_seconds()));
    } else {
      absl::StrAppend(&line, TrialOutcomeName(t.outcome()));
      if (!t.message().empty()) absl::StrAppend(&line, ": ", t.message());
    }
  }
  if (best_seconds > 0) {
    absl::StrAppend(&line, "  best ", FormatSeconds(best_seconds));
  }
  return line;
}

std::string FormatProgressBar(uint32_t done, uint32_t total, int width) {
  if (width < 1) width = 1;
  const int filled =
      total == 0
          ? 0
          : static_cast<int>(static_cast<uint64_t>(std::min(done, total)) *
                             width / total);
  return absl::StrCat("[", std::string(filled, '#'),
                      std::string(width - filled, '.'), "]");
}

}  // namespace kfuse::client
