#include "core/trial.h"

#include "absl/strings/str_cat.h"
#include "core/key.h"

namespace kfuse {

std::string_view OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kOk: return "ok";
    case Outcome::kCompileError: return "compile_error";
    case Outcome::kWrongResult: return "wrong_result";
    case Outcome::kFault: return "fault";
    case Outcome::kTimeout: return "timeout";
    case Outcome::kLaunchError: return "launch_error";
    case Outcome::kSkipped: return "skipped";
    case Outcome::kUnknown: break;
  }
  return "unknown";
}

std::string DeviceFingerprint::Digest() const {
  return Sha256Hex(absl::StrCat(name, "|", cc_major, ".", cc_minor, "|", sm_count, "|",
                                sm_clock_khz, "|", mem_clock_khz, "|", mem_bus_width_bits, "|",
                                l2_bytes, "|", memory_bytes, "|", power_limit_mw, "|", ecc, "|",
                                mig))
      .substr(0, 16);
}

}  // namespace kfuse
