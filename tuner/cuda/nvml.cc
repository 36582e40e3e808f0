#include "tuner/cuda/nvml.h"

#include <dlfcn.h>

#include <mutex>

namespace kfuse {
namespace {

// The few NVML declarations we need (nvml.h is not part of the toolkit here);
// their ABI has been stable since NVML 5.
using NvmlReturn = int;  // NVML_SUCCESS == 0.
using NvmlDevice = void*;

struct Nvml {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*by_pci)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*power_limit)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*mig_mode)(NvmlDevice, unsigned*, unsigned*) = nullptr;
  bool ok = false;
};

const Nvml& LoadNvml() {
  static const Nvml* nvml = [] {
    auto* n = new Nvml();
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib == nullptr) return n;
    n->init = reinterpret_cast<NvmlReturn (*)()>(dlsym(lib, "nvmlInit_v2"));
    n->by_pci = reinterpret_cast<NvmlReturn (*)(const char*, NvmlDevice*)>(
        dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    n->power_limit = reinterpret_cast<NvmlReturn (*)(NvmlDevice, unsigned*)>(
        dlsym(lib, "nvmlDeviceGetPowerManagementLimit"));
    n->mig_mode = reinterpret_cast<NvmlReturn (*)(NvmlDevice, unsigned*, unsigned*)>(
        dlsym(lib, "nvmlDeviceGetMigMode"));
    // nvmlInit is reference counted; we keep our reference for the process.
    n->ok = n->init != nullptr && n->by_pci != nullptr && n->init() == 0;
    return n;
  }();
  return *nvml;
}

}  // namespace

NvmlFacts QueryNvml(const std::string& pci_bus_id) {
  NvmlFacts facts;
  const Nvml& n = LoadNvml();
  if (!n.ok) return facts;
  NvmlDevice dev = nullptr;
  if (n.by_pci(pci_bus_id.c_str(), &dev) != 0) return facts;
  facts.available = true;
  unsigned limit = 0;
  if (n.power_limit != nullptr && n.power_limit(dev, &limit) == 0) {
    facts.power_limit_mw = static_cast<int>(limit);
  }
  unsigned current = 0, pending = 0;
  // NOT_SUPPORTED on GPUs without MIG: leave mig false.
  if (n.mig_mode != nullptr && n.mig_mode(dev, &current, &pending) == 0) {
    facts.mig = current == 1;  // NVML_DEVICE_MIG_ENABLE.
  }
  return facts;
}

}  // namespace kfuse
