#include "tuner/cuda/device.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "tuner/cuda/driver.h"
#include "tuner/cuda/nvml.h"

namespace kfuse {
namespace {

absl::StatusOr<int> Attr(const DriverApi* cu, CUdevice dev, CUdevice_attribute a,
                         const char* what) {
  int v = 0;
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuDeviceGetAttribute(&v, a, dev), what));
  return v;
}

}  // namespace

absl::StatusOr<DeviceFingerprint> QueryDevice(int ordinal) {
  KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
  int count = 0;
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (ordinal < 0 || ordinal >= count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device ordinal ", ordinal, " out of range: ", count, " visible CUDA device(s)"));
  }
  CUdevice dev = 0;
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuDeviceGet(&dev, ordinal), "cuDeviceGet"));
  DeviceFingerprint fp;
  char name[256] = {};
  KFUSE_RETURN_IF_ERROR(
      CuCheck(cu->cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName"));
  fp.name = name;
#define KFUSE_ATTR_(field, attr) \
  KFUSE_ASSIGN_OR_RETURN(fp.field, Attr(cu, dev, attr, "cuDeviceGetAttribute(" #attr ")"))
  KFUSE_ATTR_(cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  KFUSE_ATTR_(cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  KFUSE_ATTR_(sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  KFUSE_ATTR_(sm_clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  KFUSE_ATTR_(mem_clock_khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  KFUSE_ATTR_(mem_bus_width_bits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
#undef KFUSE_ATTR_
  KFUSE_ASSIGN_OR_RETURN(int l2, Attr(cu, dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size"));
  fp.l2_bytes = l2;
  size_t total = 0;
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem"));
  fp.memory_bytes = static_cast<int64_t>(total);
  KFUSE_ASSIGN_OR_RETURN(int ecc, Attr(cu, dev, CU_DEVICE_ATTRIBUTE_ECC_ENABLED, "ECC"));
  fp.ecc = ecc != 0;
  KFUSE_ASSIGN_OR_RETURN(std::string pci, PciBusId(ordinal));
  NvmlFacts nvml = QueryNvml(pci);
  fp.power_limit_mw = nvml.power_limit_mw;
  fp.mig = nvml.mig;
  return fp;
}

absl::StatusOr<std::string> PciBusId(int ordinal) {
  KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
  CUdevice dev = 0;
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuDeviceGet(&dev, ordinal), "cuDeviceGet"));
  KFUSE_ASSIGN_OR_RETURN(int domain, Attr(cu, dev, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, "PCI domain"));
  KFUSE_ASSIGN_OR_RETURN(int bus, Attr(cu, dev, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, "PCI bus"));
  KFUSE_ASSIGN_OR_RETURN(int slot, Attr(cu, dev, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, "PCI device"));
  char pci[64];
  std::snprintf(pci, sizeof(pci), "%08x:%02x:%02x.0", domain, bus, slot);
  return std::string(pci);
}

absl::StatusOr<int> DriverVersion() {
  KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
  int v = 0;
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuDriverGetVersion(&v), "cuDriverGetVersion"));
  return v;
}

int DeviceCount() {
  absl::StatusOr<const DriverApi*> cu = LoadDriver();
  if (!cu.ok()) return 0;
  int count = 0;
  if ((*cu)->cuDeviceGetCount(&count) != CUDA_SUCCESS) return 0;
  return count;
}

std::string ArchForDevice(const DeviceFingerprint& fp) {
  std::string arch = absl::StrCat("sm_", fp.cc_major, fp.cc_minor);
  if (fp.cc_major == 9 || fp.cc_major == 10) arch += "a";
  return arch;
}

}  // namespace kfuse
