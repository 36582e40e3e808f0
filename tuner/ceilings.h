// Measures a device's roofline ceilings with micro-kernels, once per device
// (the service stores them): read, write and copy bandwidth; FMA,
// special-function (ex2) and tensor-core (mma.sync bf16) rates. Runs inside
// kfuse-worker; callers use Runner::MeasureCeilings.
//
//   KFUSE_ASSIGN_OR_RETURN(Ceilings c, MeasureCeilingsOnDevice(fp, stream));
#ifndef KFUSE_TUNER_CEILINGS_H_
#define KFUSE_TUNER_CEILINGS_H_

#include <cuda.h>

#include <string>

#include "absl/status/statusor.h"
#include "core/roofline.h"
#include "core/trial.h"

namespace kfuse {

// Needs the device's context current. Uses ~2.2 GiB of device memory (less if
// the GPU has less free). Bandwidths in bytes/s (copy counts read + write),
// rates in FLOP/s (2 per multiply-add; 1 per ex2). The best of several runs.
absl::StatusOr<Ceilings> MeasureCeilingsOnDevice(const DeviceFingerprint& fp, CUstream stream);

// The micro-kernels' CUDA source (extern "C" entries kf_read, kf_write,
// kf_fma, kf_ex2, kf_mma); exposed for a compile test without a GPU.
const std::string& CeilingsKernelSource();

}  // namespace kfuse

#endif  // KFUSE_TUNER_CEILINGS_H_
