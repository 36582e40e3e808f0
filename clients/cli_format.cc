#include "clients/cli_format.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"

namespace kfuse::client {
namespace {

std::string EnumShortName(const google::protobuf::EnumDescriptor* d, int value,
                          const std::string& prefix) {
  const google::protobuf::EnumValueDescriptor* v = d->FindValueByNumber(value);
  if (v == nullptr) return absl::StrCat("unknown(", value, ")");
  std::string name = v->name();
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  return absl::AsciiStrToLower(name);
}

const char* BinaryOpName(kfuse::v1::Expr::Op op) {
  switch (op) {
    case kfuse::v1::Expr::OP_ADD:
      return "+";
    case kfuse::v1::Expr::OP_SUB:
      return "-";
    case kfuse::v1::Expr::OP_MUL:
      return "*";
    case kfuse::v1::Expr::OP_CEIL_DIV:
      return "ceil_div";
    case kfuse::v1::Expr::OP_MIN:
      return "min";
    case kfuse::v1::Expr::OP_MAX:
      return "max";
    default:
      return "?";
  }
}

std::string FormatDim(const kfuse::v1::Dim& d) {
  if (d.kind_case() == kfuse::v1::Dim::kSymbol) return d.symbol();
  return absl::StrCat(d.size());
}

std::string DTypeShortName(kfuse::v1::DType t) {
  return EnumShortName(kfuse::v1::DType_descriptor(), t, "DTYPE_");
}

std::string FormatTensor(const kfuse::v1::TensorSpec& t) {
  std::vector<std::string> dims;
  for (const auto& d : t.shape()) dims.push_back(FormatDim(d));
  return absl::StrCat(t.name().empty() ? "_" : t.name(), " ",
                      DTypeShortName(t.dtype()), "[", absl::StrJoin(dims, ","),
                      "]");
}

double TotalFlops(const kfuse::v1::FlopCounts& f) {
  return f.fma() + f.special() + f.tensor();
}

// "memory-bound, 12.0 MiB, 3.15 MFLOP (special 1.05 M), 0.26 FLOP/B,
// predicted 4.10 us"; measured time and fraction when tuned.
std::string FormatRoofline(const kfuse::v1::RooflineReport& r) {
  std::string out =
      absl::StrCat(BoundName(r.bound()), "-bound, ", FormatBytes(r.bytes()),
                   ", ", FormatCount(TotalFlops(r.flops())), "FLOP");
  if (r.flops().special() > 0) {
    absl::StrAppend(&out, " (special ",
                    absl::StripTrailingAsciiWhitespace(FormatCount(r.flops().special())), ")");
  }
  absl::StrAppend(&out, absl::StrFormat(", %.3g FLOP/B", r.intensity()),
                  ", predicted ", FormatSeconds(r.predicted_seconds()));
  if (r.measured_seconds() > 0) {
    absl::StrAppend(&out, ", measured ", FormatSeconds(r.measured_seconds()),
                    absl::StrFormat(" (%.0f%% of roofline)",
                                    100 * r.fraction_of_roofline()));
  }
  return out;
}

// "M=16, N=4096": symbol values sorted by name.
std::vector<std::string> NamedSizes(const google::protobuf::Map<std::string, int64_t>& sizes) {
  std::map<std::string, int64_t> sorted(sizes.begin(), sizes.end());
  std::vector<std::string> parts;
  for (const auto& [k, v] : sorted) parts.push_back(absl::StrCat(k, "=", v));
  return parts;
}

std::string FormatSizes(const kfuse::v1::RooflineReport& r) {
  std::vector<std::string> parts = NamedSizes(r.sizes());
  if (!r.ceilings_source().empty()) parts.push_back(r.ceilings_source());
  if (parts.empty()) return "";
  return absl::StrCat(" [", absl::StrJoin(parts, "; "), "]");
}

// Op indices as compact ranges: "0-3, 5".
std::string FormatOps(const google::protobuf::RepeatedField<uint32_t>& ops) {
  std::vector<std::string> parts;
  for (int i = 0; i < ops.size();) {
    int j = i;
    while (j + 1 < ops.size() && ops[j + 1] == ops[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(ops[i])
                           : absl::StrCat(ops[i], "-", ops[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ", ");
}

std::string FormatState(const kfuse::v1::Provenance& p) {
  std::string out = TuneStateName(p.state());
  if (p.state() == kfuse::v1::TUNE_STATE_TUNED) {
    absl::StrAppend(
        &out, " on ", p.device().name().empty() ? "?" : p.device().name(), ", ",
        p.trials(), " trials in ", FormatSeconds(p.tuning_seconds()));
  }
  if (p.failed_trials_size() > 0) {
    uint32_t failed = 0;
    std::vector<std::string> kinds;
    for (const kfuse::v1::TrialOutcomeCount& c : p.failed_trials()) {
      failed += c.count();
      kinds.push_back(absl::StrCat(TrialOutcomeName(c.outcome()), " ", c.count()));
    }
    absl::StrAppend(&out, ", ", failed, " failed (", absl::StrJoin(kinds, ", "), ")");
  }
  if (!p.reason().empty()) absl::StrAppend(&out, " (", p.reason(), ")");
  return out;
}

}  // namespace

std::string FormatExpr(const kfuse::v1::Expr& e,
                       const kfuse::v1::KernelPlan& plan) {
  switch (e.kind_case()) {
    case kfuse::v1::Expr::kConstant:
      return absl::StrCat(e.constant());
    case kfuse::v1::Expr::kSymbol:
      if (e.symbol() < static_cast<uint32_t>(plan.symbols_size()) &&
          !plan.symbols(static_cast<int>(e.symbol())).name().empty()) {
        return plan.symbols(static_cast<int>(e.symbol())).name();
      }
      return absl::StrCat("$", e.symbol());
    case kfuse::v1::Expr::kBinary: {
      const auto& b = e.binary();
      const std::string l = FormatExpr(b.lhs(), plan);
      const std::string r = FormatExpr(b.rhs(), plan);
      switch (b.op()) {
        case kfuse::v1::Expr::OP_CEIL_DIV:
        case kfuse::v1::Expr::OP_MIN:
        case kfuse::v1::Expr::OP_MAX:
          return absl::StrCat(BinaryOpName(b.op()), "(", l, ", ", r, ")");
        default:
          return absl::StrCat("(", l, " ", BinaryOpName(b.op()), " ", r, ")");
      }
    }
    case kfuse::v1::Expr::KIND_NOT_SET:
      break;
  }
  return "1";
}

std::string FormatDim3(const kfuse::v1::Dim3& d,
                       const kfuse::v1::KernelPlan& plan) {
  return absl::StrCat("(", FormatExpr(d.x(), plan), ", ",
                      FormatExpr(d.y(), plan), ", ", FormatExpr(d.z(), plan),
                      ")");
}

std::string FormatVariant(const kfuse::v1::Variant& v) {
  std::map<std::string, int64_t> sorted(v.params().begin(), v.params().end());
  std::vector<std::string> parts;
  for (const auto& [k, val] : sorted)
    parts.push_back(absl::StrCat(k, "=", val));
  return absl::StrCat(FamilyName(v.family()), "{", absl::StrJoin(parts, ", "),
                      "}");
}

std::string FormatBytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (std::fabs(bytes) >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrFormat("%.0f B", bytes);
  return absl::StrFormat("%.*f %s",
                         bytes < 10    ? 2
                         : bytes < 100 ? 1
                                       : 0,
                         bytes, kUnits[unit]);
}

std::string FormatSeconds(double s) {
  if (s <= 0) return "0 s";
  if (s < 1e-6) return absl::StrFormat("%.3g ns", s * 1e9);
  if (s < 1e-3) return absl::StrFormat("%.3g us", s * 1e6);
  if (s < 1) return absl::StrFormat("%.3g ms", s * 1e3);
  return absl::StrFormat("%.3g s", s);
}

std::string FormatCount(double n) {
  static const char* kUnits[] = {"", "K", "M", "G", "T", "P"};
  int unit = 0;
  while (std::fabs(n) >= 1000 && unit < 5) {
    n /= 1000;
    ++unit;
  }
  if (unit == 0) return absl::StrFormat("%.0f ", n);
  return absl::StrFormat("%.3g %s", n, kUnits[unit]);
}

std::string CacheOutcomeName(kfuse::v1::CacheOutcome c) {
  return EnumShortName(kfuse::v1::CacheOutcome_descriptor(), c,
                       "CACHE_OUTCOME_");
}
std::string TuneStateName(kfuse::v1::TuneState s) {
  return EnumShortName(kfuse::v1::TuneState_descriptor(), s, "TUNE_STATE_");
}
std::string FamilyName(kfuse::v1::Family f) {
  return EnumShortName(kfuse::v1::Family_descriptor(), f, "FAMILY_");
}
std::string BoundName(kfuse::v1::Bound b) {
  return EnumShortName(kfuse::v1::Bound_descriptor(), b, "BOUND_");
}
std::string TrialOutcomeName(kfuse::v1::Trial::Outcome o) {
  return EnumShortName(kfuse::v1::Trial::Outcome_descriptor(), o, "OUTCOME_");
}

std::string FormatPlanSummary(const kfuse::v1::CompileResponse& r) {
  const kfuse::v1::KernelPlan& plan = r.plan();
  std::vector<std::vector<std::string>> head;
  head.push_back({"key", plan.key()});
  head.push_back({"cache", CacheOutcomeName(r.cache())});
  head.push_back({"state", FormatState(plan.provenance())});
  std::vector<std::string> outs;
  for (const auto& t : plan.outputs()) outs.push_back(FormatTensor(t));
  head.push_back({"outputs", absl::StrJoin(outs, ", ")});
  if (plan.kernels_size() != 1 && plan.has_report()) {
    // The buffers a client allocates between the kernels, in order.
    std::vector<std::string> mids;
    for (const kfuse::v1::Intermediate& im : plan.intermediates()) {
      std::vector<std::string> dims;
      for (const auto& d : im.shape()) dims.push_back(FormatExpr(d, plan));
      mids.push_back(absl::StrCat(DTypeShortName(im.dtype()), "[", absl::StrJoin(dims, ","), "]"));
    }
    head.push_back(
        {"plan", absl::StrCat(plan.kernels_size(), " kernels, ",
                              mids.empty() ? ""
                                           : absl::StrCat("intermediates ",
                                                          absl::StrJoin(mids, ", "), "; "),
                              FormatRoofline(plan.report()))});
  }
  std::string out = FormatTable(head);
  for (int i = 0; i < plan.kernels_size(); ++i) {
    const kfuse::v1::Kernel& k = plan.kernels(i);
    absl::StrAppend(&out, "kernel ", i, "  ", k.entry(), "  ", k.arch(), "  ",
                    FormatBytes(static_cast<double>(k.cubin().size())),
                    " cubin\n");
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"  variant", FormatVariant(k.variant())});
    std::string launch = absl::StrCat("grid ", FormatDim3(k.grid(), plan),
                                      "  block ", FormatDim3(k.block(), plan));
    if (k.dynamic_smem_bytes() > 0) {
      absl::StrAppend(&launch, "  smem ", FormatBytes(k.dynamic_smem_bytes()));
    }
    if (k.has_cluster()) {
      absl::StrAppend(&launch, "  cluster ", FormatDim3(k.cluster(), plan));
    }
    rows.push_back({"  launch", launch});
    std::string res = absl::StrCat(k.resources().registers(), " registers");
    if (k.resources().spill_bytes() > 0) {
      absl::StrAppend(&res, ", ", FormatBytes(k.resources().spill_bytes()),
                      " spilled");
    }
    if (k.resources().static_smem_bytes() > 0) {
      absl::StrAppend(&res, ", ",
                      FormatBytes(k.resources().static_smem_bytes()),
                      " static smem");
    }
    rows.push_back({"  resources", res});
    rows.push_back(
        {"  roofline", FormatRoofline(k.report()) + FormatSizes(k.report())});
    if (k.checked_at_size() > 0) {
      std::vector<std::string> at;
      for (const kfuse::v1::SymbolSizes& s : k.checked_at()) at.push_back(absl::StrJoin(NamedSizes(s.sizes()), ", "));
      rows.push_back({"  checked at", absl::StrJoin(at, "; ")});
    }
    if (k.ops_size() > 0 || !k.partition_reason().empty()) {
      std::string ops = absl::StrCat(k.ops_size() == 1 ? "op " : "ops ", FormatOps(k.ops()));
      if (!k.partition_reason().empty()) {
        absl::StrAppend(&ops, ": ", k.partition_reason());
      }
      rows.push_back({"  fusion", ops});
    }
    for (const auto& p : k.preconditions()) {
      rows.push_back({"  requires", p.description()});
    }
    absl::StrAppend(&out, FormatTable(rows));
  }
  return out;
}

namespace {

// `text` with C0 controls, DEL and the C1 controls' UTF-8 forms (U+0080 to
// U+009F, which some terminals act on as escapes) written as \x escapes;
// newlines and tabs kept where `keep_lines`, else backslashes doubled, so a
// one-line text reads back unambiguously (a name "a\n" is not a newline).
std::string Escaped(absl::string_view text, bool keep_lines) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto u = static_cast<unsigned char>(text[i]);
    const bool c1 = u == 0xc2 && i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xe0) == 0x80;
    if (keep_lines && (u == '\n' || u == '\t')) {
      out += text[i];
    } else if (!keep_lines && u == '\\') {
      out += "\\\\";
    } else if (u < 0x20 || u == 0x7f) {
      out += absl::CHexEscape(text.substr(i, 1));
    } else if (c1) {
      out += absl::CHexEscape(text.substr(i, 2));
      ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace

std::string Printable(absl::string_view text) { return Escaped(text, /*keep_lines=*/false); }

std::string PrintableLines(absl::string_view text) { return Escaped(text, /*keep_lines=*/true); }

std::string FormatTable(const std::vector<std::vector<std::string>>& raw) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : raw) {
    std::vector<std::string>& row = rows.emplace_back();
    for (const std::string& cell : r) row.push_back(Printable(cell));
  }
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      absl::StrAppend(&line, row[c]);
      if (c + 1 < row.size()) {
        line.append(widths[c] - row[c].size() + 2, ' ');
      }
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

}  // namespace kfuse::client
