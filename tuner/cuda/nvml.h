// NVML, loaded with dlopen when present: the two fingerprint fields the CUDA
// driver does not report (power limit and MIG mode). Absent NVML is normal
// (containers often lack it) and yields zeros.
#ifndef KFUSE_TUNER_CUDA_NVML_H_
#define KFUSE_TUNER_CUDA_NVML_H_

#include <string>

namespace kfuse {

struct NvmlFacts {
  bool available = false;  // NVML loaded and found the device.
  int power_limit_mw = 0;
  bool mig = false;
};

// `pci_bus_id` as "0000:3b:00.0" (domain:bus:device.function).
NvmlFacts QueryNvml(const std::string& pci_bus_id);

}  // namespace kfuse

#endif  // KFUSE_TUNER_CUDA_NVML_H_
