// Roofline figures: the work a kernel must do, the ceilings of a device, and
// the verdict (memory- or compute-bound) with a predicted time.
#ifndef KFUSE_CORE_ROOFLINE_H_
#define KFUSE_CORE_ROOFLINE_H_

#include <map>
#include <string>

namespace kfuse {

struct FlopCounts {
  double fma = 0;      // Plain fp32 arithmetic, FMA counts 2.
  double special = 0;  // MUFU: exp, log, sin, tanh, rsqrt ...
  double tensor = 0;   // Tensor-core multiply-adds, counts 2.
  double integer = 0;
  double total() const { return fma + special + tensor + integer; }
};

struct Work {
  FlopCounts flops;
  double bytes = 0;  // Fewest bytes: inputs read once, outputs written once.
};

// Device ceilings in bytes/s and FLOP/s.
struct Ceilings {
  double read_bw = 0, write_bw = 0, copy_bw = 0;
  double fma_flops = 0, special_flops = 0, tensor_flops = 0;
  bool measured = false;
  std::string source;  // "measured on NVIDIA H200" or "nominal sm_90".
};

// Datasheet-level figures for an architecture, for when no GPU is present.
Ceilings NominalCeilings(int compute_capability);

enum class Bound : uint8_t { kUnknown = 0, kMemory = 1, kCompute = 2 };

struct RooflineReport {
  Work work;
  double intensity = 0;
  Bound bound = Bound::kUnknown;
  double predicted_seconds = 0;
  double measured_seconds = 0;
  double fraction_of_roofline = 0;
  std::map<std::string, int64_t> sizes;
  std::string ceilings_source;
};

// The verdict and predicted time of `work` on a device with `c`.
RooflineReport Roofline(const Work& work, const Ceilings& c);

}  // namespace kfuse

#endif  // KFUSE_CORE_ROOFLINE_H_
