// `kfuse tune`: Tune with progress (a bar on a TTY, lines otherwise, JSON
// lines with --json) and the final summary.
#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "clients/cli.h"
#include "clients/cli_format.h"
#include "clients/json.h"
#include "core/status.h"

namespace kfuse::client {
namespace {

constexpr int kBarWidth = 24;

absl::StatusOr<kfuse::v1::CompileRequest> BuildRequest(const TuneOptions& o) {
  KFUSE_ASSIGN_OR_RETURN(kfuse::v1::CompileRequest request,
                         LoadCompileRequest(o.chain_path));
  if (!o.arch.empty()) {
    KFUSE_ASSIGN_OR_RETURN(*request.mutable_target(), ParseArch(o.arch));
  }
  // Tuning modes only: the heuristic variant is `kfuse compile --policy heuristic`.
  const std::string m = absl::AsciiStrToLower(o.mode);
  if (m != "quick" && m != "full") {
    return absl::InvalidArgumentError(
        absl::StrCat("--mode '", o.mode, "': expected quick or full",
                     m == "heuristic" ? " (kfuse compile --policy heuristic does not tune)" : ""));
  }
  KFUSE_ASSIGN_OR_RETURN(kfuse::v1::TuningPolicy::Mode mode,
                         ParsePolicyMode(o.mode, "--mode"));
  KFUSE_RETURN_IF_ERROR(CheckBudget(o.budget_seconds));
  auto& policy = *request.mutable_policy();
  policy.set_mode(mode);
  if (o.budget_seconds > 0) policy.set_budget_seconds(o.budget_seconds);
  if (o.force) policy.set_force(true);
  return request;
}

}  // namespace

int RunTune(const GlobalOptions& g, const TuneOptions& o, CliIo& io) {
  auto request = BuildRequest(o);
  if (!request.ok()) {
    ReportError(g, request.status(), io);
    return kExitUsage;
  }
  auto client = ConnectFromFlags(g);
  if (!client.ok()) return ReportUsageError(g, client.status(), io);
  const bool bar = io.out_is_tty && !g.json;
  // The time of each variant of the kernel being tuned that passed so far:
  // one that fails the check at another size later ("check") leaves, and
  // with it maybe the best. Each kernel of a plan has its own.
  std::map<std::pair<uint32_t, std::string>, double> passed;
  double best = 0;
  size_t last_width = 0;
  auto on_progress = [&](const kfuse::v1::TuneProgress& p) {
    if (p.has_trial()) {
      const auto& t = p.trial();
      const std::pair<uint32_t, std::string> variant{p.kernel(), FormatVariant(t.variant())};
      if (t.outcome() == kfuse::v1::Trial::OUTCOME_OK && t.median_seconds() > 0) {
        passed[variant] = t.median_seconds();
      } else {
        passed.erase(variant);
      }
      best = 0;
      for (const auto& [v, seconds] : passed)
        if (v.first == p.kernel() && (best == 0 || seconds < best)) best = seconds;
    }
    if (g.json) {
      kfuse::v1::TuneProgress copy = p;
      if (copy.has_result()) {
        *copy.mutable_result() = WithoutBinaries(copy.result());
      }
      io.out << ToJson(copy, /*pretty=*/false) << "\n" << std::flush;
      return;
    }
    // Nothing to report: no trials ran (a stored answer, or no GPU).
    if (p.total() == 0 && !p.has_trial()) return;
    std::string line = FormatProgressLine(p, best);
    if (!bar) {
      io.out << line << "\n" << std::flush;
      return;
    }
    line = absl::StrCat(FormatProgressBar(p.done(), p.total(), kBarWidth), " ",
                        line);
    constexpr size_t kMax = 110;  // Keep the bar on one terminal line.
    if (line.size() > kMax) line = line.substr(0, kMax - 3) + "...";
    const size_t width = line.size();
    line.append(last_width > width ? last_width - width : 0, ' ');
    last_width = width;
    io.out << "\r" << line << std::flush;
  };
  auto response = (*client)->Tune(*std::move(request), on_progress);
  if (bar && last_width > 0) io.out << "\n";
  if (!response.ok()) return ReportError(g, response.status(), io);
  if (!g.json) io.out << FormatPlanSummary(*response);
  // An untimed answer (no GPU, the GPU busy past the wait) is not what was
  // asked for: scripts see exit 1, as `kfuse tune --manifest` gives.
  const auto& prov = response->plan().provenance();
  if (prov.state() == kfuse::v1::TUNE_STATE_HEURISTIC) {
    io.err << "kfuse: not tuned: heuristic ("
           << (prov.reason().empty() ? "untimed" : prov.reason()) << ")\n";
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace kfuse::client
