// NVML, loaded with dlopen when present (never linked): the two fingerprint
// fields the CUDA driver does not report (power limit and MIG mode), and the
// declarations the tuning pool's load probe uses. Absent NVML is normal
// (containers often lack it) and yields zeros.
#ifndef KFUSE_TUNER_CUDA_NVML_H_
#define KFUSE_TUNER_CUDA_NVML_H_

#include <string>

#include "absl/status/statusor.h"

namespace kfuse {

// The NVML declarations kfuse uses, laid out as nvml.h has them (the header
// is not needed): the device fingerprint's two fields below, and the tuning
// pool's load probe (tuner/gpu_load.h). Tests pass fake functions.
namespace nvml_abi {

using Return = int;
constexpr Return kSuccess = 0;
constexpr Return kNotSupported = 3;
constexpr Return kNoPermission = 4;
constexpr Return kNotFound = 6;
constexpr Return kInsufficientSize = 7;
constexpr Return kFunctionNotFound = 13;

struct DeviceSt;
using Device = DeviceSt*;

struct ProcessUtilizationSample {  // nvmlProcessUtilizationSample_t
  unsigned int pid;
  unsigned long long time_stamp_us;                    // CPU wall clock.
  unsigned int sm_util, mem_util, enc_util, dec_util;  // Percent.
};
struct Memory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
struct MemoryV2 {  // nvmlMemory_v2_t
  unsigned int version;
  unsigned long long total, reserved, free, used;
};
constexpr unsigned int kMemoryV2Version = sizeof(MemoryV2) | (2u << 24);
struct Utilization {         // nvmlUtilization_t
  unsigned int gpu, memory;  // Percent.
};

struct Functions {
  Return (*init_v2)() = nullptr;
  Return (*shutdown)() = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*handle_by_index_v2)(unsigned int, Device*) = nullptr;
  Return (*handle_by_pci_bus_id_v2)(const char*, Device*) = nullptr;
  Return (*handle_by_uuid)(const char*, Device*) = nullptr;
  Return (*get_name)(Device, char*, unsigned int) = nullptr;
  Return (*get_memory_info_v2)(Device, MemoryV2*) = nullptr;
  Return (*get_memory_info)(Device, Memory*) = nullptr;  // Drivers without _v2.
  Return (*get_utilization_rates)(Device, Utilization*) = nullptr;
  Return (*get_process_utilization)(Device, ProcessUtilizationSample*, unsigned int*,
                                    unsigned long long) = nullptr;
  Return (*get_power_management_limit)(Device, unsigned int*) = nullptr;  // Milliwatts.
  Return (*get_mig_mode)(Device, unsigned int*, unsigned int*) = nullptr;
};

// The library at `library` with every function above it has (missing ones
// stay null), loaded once per path and kept for the process; Unavailable
// with dlerror's reason when it cannot be loaded. Thread-safe.
absl::StatusOr<const Functions*> LoadNvml(const std::string& library = "libnvidia-ml.so.1");

}  // namespace nvml_abi

struct NvmlFacts {
  bool available = false;  // NVML loaded and found the device.
  int power_limit_mw = 0;
  bool mig = false;
};

// `pci_bus_id` as "0000:3b:00.0" (domain:bus:device.function).
NvmlFacts QueryNvml(const std::string& pci_bus_id);

}  // namespace kfuse

#endif  // KFUSE_TUNER_CUDA_NVML_H_
