// What the tuner knows about a GPU: the fingerprint that goes into cache keys,
// read from the driver (and NVML for power limit and MIG, when present).
//
//   if (DeviceCount() == 0) { /* heuristic only */ }
//   KFUSE_ASSIGN_OR_RETURN(DeviceFingerprint fp, QueryDevice(0));
//   std::string arch = ArchForDevice(fp);   // "sm_90a"
#ifndef KFUSE_TUNER_CUDA_DEVICE_H_
#define KFUSE_TUNER_CUDA_DEVICE_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/trial.h"

namespace kfuse {

// Every field of the fingerprint for device `ordinal`. power_limit_mw is 0 and
// mig false when NVML (libnvidia-ml.so.1) is absent. Unavailable without a
// driver; InvalidArgument for an ordinal out of range.
absl::StatusOr<DeviceFingerprint> QueryDevice(int ordinal);

// The device's PCI bus id as NVML spells it: "00000000:1b:00.0".
absl::StatusOr<std::string> PciBusId(int ordinal);

// cuDriverGetVersion: 13000 for CUDA 13.0. Unavailable without a driver.
absl::StatusOr<int> DriverVersion();

// Visible CUDA devices; 0 without a driver (no GPU is not an error).
int DeviceCount();

// The NVRTC target for a device: "sm_90a" on compute capability 9.0 (the
// arch-specific target, so wgmma is allowed), "sm_100a" on 10.0, else "sm_XY".
std::string ArchForDevice(const DeviceFingerprint& fp);

}  // namespace kfuse

#endif  // KFUSE_TUNER_CUDA_DEVICE_H_
