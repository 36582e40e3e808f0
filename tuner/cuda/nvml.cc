#include "tuner/cuda/nvml.h"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace kfuse {
namespace nvml_abi {

absl::StatusOr<const Functions*> LoadNvml(const std::string& library) {
  static std::mutex mu;
  static auto* loaded = new std::map<std::string, absl::StatusOr<const Functions*>>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded->find(library);
  if (it != loaded->end()) return it->second;
  absl::StatusOr<const Functions*> result = [&]() -> absl::StatusOr<const Functions*> {
    void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib == nullptr) {
      const char* why = dlerror();
      return absl::UnavailableError(absl::StrCat("NVML not available: ", why != nullptr ? why : library));
    }
    auto* f = new Functions();
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    };
    sym(f->init_v2, "nvmlInit_v2");
    sym(f->shutdown, "nvmlShutdown");
    sym(f->error_string, "nvmlErrorString");
    sym(f->handle_by_index_v2, "nvmlDeviceGetHandleByIndex_v2");
    sym(f->handle_by_pci_bus_id_v2, "nvmlDeviceGetHandleByPciBusId_v2");
    sym(f->handle_by_uuid, "nvmlDeviceGetHandleByUUID");
    sym(f->get_name, "nvmlDeviceGetName");
    sym(f->get_memory_info_v2, "nvmlDeviceGetMemoryInfo_v2");
    sym(f->get_memory_info, "nvmlDeviceGetMemoryInfo");
    sym(f->get_utilization_rates, "nvmlDeviceGetUtilizationRates");
    sym(f->get_process_utilization, "nvmlDeviceGetProcessUtilization");
    sym(f->get_power_management_limit, "nvmlDeviceGetPowerManagementLimit");
    sym(f->get_mig_mode, "nvmlDeviceGetMigMode");
    return f;
  }();
  loaded->emplace(library, result);
  return result;
}

}  // namespace nvml_abi

NvmlFacts QueryNvml(const std::string& pci_bus_id) {
  NvmlFacts facts;
  absl::StatusOr<const nvml_abi::Functions*> loaded = nvml_abi::LoadNvml();
  if (!loaded.ok()) return facts;
  const nvml_abi::Functions& n = **loaded;
  // nvmlInit is reference counted; the fingerprint keeps one reference for
  // the process.
  static const bool initialized = n.init_v2 != nullptr && n.init_v2() == nvml_abi::kSuccess;
  if (!initialized || n.handle_by_pci_bus_id_v2 == nullptr) return facts;
  nvml_abi::Device dev = nullptr;
  if (n.handle_by_pci_bus_id_v2(pci_bus_id.c_str(), &dev) != nvml_abi::kSuccess) return facts;
  facts.available = true;
  unsigned limit = 0;
  if (n.get_power_management_limit != nullptr && n.get_power_management_limit(dev, &limit) == nvml_abi::kSuccess) {
    facts.power_limit_mw = static_cast<int>(limit);
  }
  unsigned current = 0, pending = 0;
  // NOT_SUPPORTED on GPUs without MIG: leave mig false.
  if (n.get_mig_mode != nullptr && n.get_mig_mode(dev, &current, &pending) == nvml_abi::kSuccess) {
    facts.mig = current == 1;  // NVML_DEVICE_MIG_ENABLE.
  }
  return facts;
}

}  // namespace kfuse
