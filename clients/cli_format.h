// Short, aligned human-readable renderings of kfuse.v1 messages for the
// `kfuse` CLI. Pure functions of the messages, so they are tested without a
// server.
//
//   std::cout << FormatPlanSummary(response);  // key, hit/miss, per kernel
#ifndef KFUSE_CLIENTS_CLI_FORMAT_H_
#define KFUSE_CLIENTS_CLI_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse::client {

// "ceil_div(N, 1024)"; symbols by their client names from `plan`
// (or "$3" when out of range); an unset expression reads "1".
std::string FormatExpr(const kfuse::v1::Expr& e,
                       const kfuse::v1::KernelPlan& plan);
// "(ceil_div(N, 1024), 1, 1)".
std::string FormatDim3(const kfuse::v1::Dim3& d,
                       const kfuse::v1::KernelPlan& plan);
// "pointwise{block=256, vec=4}", params sorted by name.
std::string FormatVariant(const kfuse::v1::Variant& v);

// 1536 -> "1.5 KiB"; 0 -> "0 B".
std::string FormatBytes(double bytes);
// Seconds with a unit a reader can take in: "850 ns", "4.10 us", "12.3 ms".
std::string FormatSeconds(double seconds);
// 2.1e9 -> "2.10 G".
std::string FormatCount(double n);

// The lower-case enum name without its prefix: CACHE_OUTCOME_HIT -> "hit".
std::string CacheOutcomeName(kfuse::v1::CacheOutcome c);
std::string TuneStateName(kfuse::v1::TuneState s);
std::string FamilyName(kfuse::v1::Family f);
std::string BoundName(kfuse::v1::Bound b);
std::string TrialOutcomeName(kfuse::v1::Trial::Outcome o);

// The compile summary: key, cache outcome, tuned/heuristic and why, and per
// kernel entry, arch, variant, grid/block, registers, roofline verdict.
std::string FormatPlanSummary(const kfuse::v1::CompileResponse& r);
// `kfuse cache ls`: one aligned row per entry and a total line (which says
// when more entries match than were listed); last use is shown relative to
// `now_unix_ms`. `prefix` is the key prefix asked for, if any.
std::string FormatKernelTable(const kfuse::v1::ListKernelsResponse& r,
                              int64_t now_unix_ms,
                              const std::string& prefix = "");
// Rows of cells, columns padded to their widest cell, two spaces apart.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

// `text` with control characters escaped (\n, \x1b, ...): a name a client
// chose, or a file's text, must not break a table's lines or drive the
// terminal.
std::string Printable(absl::string_view text);
// As Printable, keeping newlines and tabs: a message of several lines (an
// error from a server, a compiler's log).
std::string PrintableLines(absl::string_view text);
// `kfuse cache show`: every summary field of one entry.
std::string FormatKernelSummary(const kfuse::v1::KernelSummary& k);
// `kfuse cache explain`: key, stored or not, the nearest entry, a table of
// the key parts (a '*' marks those that differ from the nearest entry,
// "(same)" the nearest entry's values that do not) and the server's
// explanation.
std::string FormatExplain(const kfuse::v1::ExplainResponse& r);
// `kfuse cache import`: one "rejected ..." line per refused entry, then
// "imported N, already present M, rejected K".
std::string FormatImportResult(const kfuse::v1::ImportKernelsResponse& r);
// `kfuse device`.
std::string FormatDeviceInfo(const kfuse::v1::DeviceInfo& d);
// One progress line: "[ 3/12] time  pointwise{...}  4.1 us  best 3.9 us".
std::string FormatProgressLine(const kfuse::v1::TuneProgress& p,
                               double best_seconds);
// A TTY progress bar of `width` cells for done/total.
std::string FormatProgressBar(uint32_t done, uint32_t total, int width);

}  // namespace kfuse::client

#endif  // KFUSE_CLIENTS_CLI_FORMAT_H_
