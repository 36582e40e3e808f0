#include "tuner/compiler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace kfuse {
namespace {

bool IsIdentStart(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
bool IsIdentChar(char c) { return IsIdentStart(c) || (c >= '0' && c <= '9'); }

}  // namespace

const std::vector<std::string>& KnownArchs() {
  // NVRTC 13's targets: 'a' variants are arch-specific (wgmma, tcgen05), 'f'
  // family-portable. Adding one here is a reviewed change, not configuration.
  static const std::vector<std::string>* const kArchs =
      new std::vector<std::string>{
          "sm_75",   "sm_80",  "sm_86",   "sm_87",   "sm_89",  "sm_90",
          "sm_90a",  "sm_100", "sm_100a", "sm_100f", "sm_103", "sm_103a",
          "sm_103f", "sm_110", "sm_110a", "sm_110f", "sm_120", "sm_120a",
          "sm_120f", "sm_121", "sm_121a", "sm_121f"};
  return *kArchs;
}

absl::Status ValidateArch(const std::string& arch) {
  const auto& known = KnownArchs();
  if (std::find(known.begin(), known.end(), arch) != known.end()) {
    return absl::OkStatus();
  }
  // Echo at most a short prefix: arch is server-chosen, but may come from a
  // client's device fingerprint by mistake.
  return absl::InvalidArgumentError(
      absl::StrCat("compile options: arch \"", arch.substr(0, 16),
                   "\" is not a known target (expected e.g. sm_80, sm_90, "
                   "sm_90a, sm_100)"));
}

absl::Status ValidateEntryName(const std::string& entry) {
  bool ok = !entry.empty() && entry.size() <= 64 && IsIdentStart(entry[0]) &&
            std::all_of(entry.begin(), entry.end(), IsIdentChar);
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "kernel spec: entry name must match [A-Za-z_][A-Za-z0-9_]{0,63}, got ",
      entry.size(), " bytes"));
}

absl::Status ValidateCompileRequest(const KernelSpec& spec,
                                    const CompileOptions& opts) {
  KFUSE_RETURN_IF_ERROR(ValidateArch(opts.arch));
  if (opts.max_registers != 0 &&
      (opts.max_registers < 16 || opts.max_registers > 255)) {
    return absl::InvalidArgumentError(
        absl::StrCat("compile options: max_registers must be 0 or 16..255, "
                     "got ",
                     opts.max_registers));
  }
  KFUSE_RETURN_IF_ERROR(ValidateEntryName(spec.entry));
  if (spec.source.empty()) {
    return absl::InvalidArgumentError("kernel spec: source is empty");
  }
  if (spec.source.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        "kernel spec: source contains a NUL byte");
  }
  return absl::OkStatus();
}

}  // namespace kfuse
