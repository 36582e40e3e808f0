#include "core/roofline.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kfuse {

Ceilings NominalCeilings(int cc) {
  Ceilings c;
  if (cc >= 90) {
    // Measured on an H200 (bench/results/h200-run2): copy 4.26 TB/s, FMA
    // 61 TFLOP/s, MUFU ex2 4.14 T/s (16 per clock per SM), mma.sync bf16
    // 644 TFLOP/s.
    c.copy_bw = 4.25e12;
    c.fma_flops = 61e12;
    c.special_flops = 4.14e12;
    c.tensor_flops = 644e12;
  } else {  // A100 class, from the datasheet: 16 MUFU ops per clock per SM.
    c.copy_bw = 1.8e12;
    c.fma_flops = 19.5e12;
    c.special_flops = 16 * 108 * 1.41e9;
    c.tensor_flops = 312e12;
  }
  c.read_bw = c.write_bw = c.copy_bw;
  c.source = absl::StrCat("nominal sm_", cc);
  return c;
}

RooflineReport Roofline(const Work& w, const Ceilings& c) {
  RooflineReport r;
  r.work = w;
  r.ceilings_source = c.source;
  r.intensity = w.bytes > 0 ? w.flops.total() / w.bytes : 0;
  double t_mem = c.copy_bw > 0 ? w.bytes / c.copy_bw : 0;
  // Each unit works in parallel; the slowest one sets the compute time.
  double t_fma = c.fma_flops > 0 ? (w.flops.fma + w.flops.integer) / c.fma_flops : 0;
  double t_sfu = c.special_flops > 0 ? w.flops.special / c.special_flops : 0;
  double t_tc = c.tensor_flops > 0 ? w.flops.tensor / c.tensor_flops : 0;
  double t_compute = std::max({t_fma, t_sfu, t_tc});
  r.bound = t_compute > t_mem ? Bound::kCompute : Bound::kMemory;
  r.predicted_seconds = std::max(t_mem, t_compute);
  return r;
}

}  // namespace kfuse
