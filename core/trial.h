// Tuning trials and device fingerprints as value types. A variant that fails
// to compile, faults, hangs or computes the wrong answer is a recorded trial,
// not an error.
#ifndef KFUSE_CORE_TRIAL_H_
#define KFUSE_CORE_TRIAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/launch.h"
#include "core/variant.h"

namespace kfuse {

// Values match kfuse.v1.Trial.Outcome.
enum class Outcome : uint8_t {
  kUnknown = 0,
  kOk = 1,
  kCompileError = 2,
  kWrongResult = 3,
  kFault = 4,
  kTimeout = 5,
  kLaunchError = 6,
  kSkipped = 7,
};

std::string_view OutcomeName(Outcome o);

struct Trial {
  Variant variant;
  Outcome outcome = Outcome::kUnknown;
  double median_seconds = 0;
  std::vector<double> samples_seconds;  // Every sample is kept.
  std::string message;                  // Compile log excerpt, error, max error.
  double compile_seconds = 0;
  Resources resources;
  // The symbol values its outcome was found at, where not its task's (a
  // check at another size, tuner/search.h); empty otherwise. Not on the wire.
  std::vector<int64_t> symbol_values;
};

// Everything about a device that changes a binary or a timing.
struct DeviceFingerprint {
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int sm_clock_khz = 0, mem_clock_khz = 0, mem_bus_width_bits = 0;
  int64_t l2_bytes = 0, memory_bytes = 0;
  int power_limit_mw = 0;
  bool ecc = false, mig = false;

  int compute_capability() const { return cc_major * 10 + cc_minor; }
  // Stable hex digest of every field; what cache keys use.
  std::string Digest() const;
};

}  // namespace kfuse

#endif  // KFUSE_CORE_TRIAL_H_
