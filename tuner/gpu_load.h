// How busy a GPU is with work that is not ours, so tuning can wait for idle
// time on a GPU it shares with production work instead of slowing it down.
// NVML (libnvidia-ml.so.1) is loaded with dlopen, never linked: without it
// there is no probe, and the caller tunes without the idle gate.
//
//   NvmlProbeOptions o;
//   o.cuda_ordinal = 1;
//   o.pci_bus_id = "00000000:3b:00.0";  // Preferred; "" matches by index.
//   o.own_pids = [runner] { return std::vector<int>{runner->pid()}; };
//   absl::StatusOr<std::unique_ptr<NvmlLoadProbe>> probe = NvmlLoadProbe::Create(o);
//   if (!probe.ok()) { /* Unavailable: log why; tune without the idle gate */ }
//   KFUSE_ASSIGN_OR_RETURN(GpuLoad load, (*probe)->Sample());
//   bool idle = SampleIsIdle(load, IdlePolicy{});
#ifndef KFUSE_TUNER_GPU_LOAD_H_
#define KFUSE_TUNER_GPU_LOAD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tuner/cuda/nvml.h"

namespace kfuse {

struct GpuLoad {
  // In [0, 1]: SM busy time of processes other than ours over the last
  // sampling window (or of every process where NVML has no per-process view).
  double others_busy_fraction = 0;
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};

class GpuLoadProbe {
 public:
  virtual ~GpuLoadProbe() = default;
  // One reading. Unavailable when the GPU cannot be read now.
  virtual absl::StatusOr<GpuLoad> Sample() = 0;
  // What is read and how, for logs ("NVML 00000000:3B:00.0, per-process SM").
  virtual std::string Describe() const { return ""; }
};

// When tuning may use a GPU it shares: other processes' busy fraction at most
// max_others_busy and at least min_free_bytes free, in every sample over
// settle_seconds in a row, sampled every poll_seconds. A task that has found
// no such GPU for max_wait_seconds is deferred (0: defer at once when busy).
struct IdlePolicy {
  double max_others_busy = 0.2;
  int64_t min_free_bytes = 0;
  double poll_seconds = 0.25;
  double settle_seconds = 1.0;
  double max_wait_seconds = 600;
};

// InvalidArgument naming the field: max_others_busy outside [0, 1], a
// negative min_free_bytes, poll_seconds <= 0, negative settle or max wait.
absl::Status ValidateIdlePolicy(const IdlePolicy& policy);

// Whether one sample meets the policy's load and memory limits.
bool SampleIsIdle(const GpuLoad& load, const IdlePolicy& policy);

// "others 85% busy, 2.0 of 80.0 GiB free".
std::string DescribeLoad(const GpuLoad& load);

// How NVML is asked for the GPU behind a CUDA ordinal. NVML numbers GPUs in
// PCI bus order over the whole machine; CUDA numbers the visible ones
// (CUDA_VISIBLE_DEVICES) fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID.
// A PCI bus id is exact; an index or a UUID taken from CUDA_VISIBLE_DEVICES
// is a fallback, right when the GPUs are of one model (as a RunnerPool's are).
struct NvmlDeviceSelector {
  enum class Kind { kPciBusId, kIndex, kUuid };
  Kind kind = Kind::kIndex;
  std::string key;  // Bus id or UUID.
  unsigned index = 0;
  std::string caveat;  // Non-empty when the match is not certain.
};

// From the caller's PCI bus id when given, else from CUDA_VISIBLE_DEVICES
// (`visible`, null when unset) and CUDA_DEVICE_ORDER (`order`, null when
// unset). InvalidArgument for a negative ordinal or one past the visible list;
// FailedPrecondition for a visible-list entry NVML cannot be asked about.
absl::StatusOr<NvmlDeviceSelector> SelectNvmlDevice(int cuda_ordinal, const std::string& pci_bus_id,
                                                    const char* visible, const char* order);

struct NvmlProbeOptions {
  int cuda_ordinal = 0;
  // "0000:3b:00.0" (domain:bus:device.function) for the CUDA device; the
  // exact way to find it in NVML. "": by index (see NvmlDeviceSelector).
  std::string pci_bus_id;
  // When matching by index or UUID: the CUDA device's name, to refuse a
  // mismatch rather than gate on the wrong GPU. "": not checked.
  std::string expected_name;
  // Our own processes on the GPU (the tuning worker), asked at each sample;
  // this process is always left out too. A pid seen once stays left out, so
  // a restarted worker's old samples do not count against the GPU.
  std::function<std::vector<int>()> own_pids;
  // Per-process samples newer than this count.
  double window_seconds = 1.0;
  // Wall clock in microseconds, as NVML stamps samples; empty: system clock.
  std::function<int64_t()> wall_clock_us;
  std::string library = "libnvidia-ml.so.1";
};

// GPU load from NVML: other processes' SM utilization
// (nvmlDeviceGetProcessUtilization, our pids left out) and memory
// (nvmlDeviceGetMemoryInfo_v2). Where per-process utilization is not
// supported (older GPUs, MIG, no permission) it falls back to the device's
// utilization (nvmlDeviceGetUtilizationRates), which counts our own worker
// too, and Describe() says so. NVML reports host pids: in a container with
// its own pid namespace our pids do not match, and our worker's last moments
// count as others' load until they leave the window. Thread-safe.
class NvmlLoadProbe : public GpuLoadProbe {
 public:
  // Unavailable (with the reason) when NVML cannot be loaded or initialized
  // or does not find the GPU; FailedPrecondition when the GPU NVML finds by
  // index is not the one expected; InvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<NvmlLoadProbe>> Create(NvmlProbeOptions options);
  // The same with the given NVML functions (tests); `fns` must outlive it.
  static absl::StatusOr<std::unique_ptr<NvmlLoadProbe>> CreateWithFunctions(
      const nvml_abi::Functions* fns, NvmlProbeOptions options);
  ~NvmlLoadProbe() override;

  absl::StatusOr<GpuLoad> Sample() override;
  std::string Describe() const override;
  // False once it has fallen back to device-wide utilization.
  bool per_process() const;

 private:
  NvmlLoadProbe(const nvml_abi::Functions* fns, NvmlProbeOptions options);
  absl::Status Open(const NvmlDeviceSelector& selector);
  absl::StatusOr<double> OthersBusyLocked();
  absl::StatusOr<double> ProcessBusyLocked(bool* supported);
  absl::Status Error(nvml_abi::Return r, const std::string& what) const;

  const nvml_abi::Functions* fns_;
  NvmlProbeOptions options_;
  bool initialized_ = false;
  nvml_abi::Device device_ = nullptr;
  std::string where_;   // "00000000:3b:00.0" or "index 1", for messages.
  std::string caveat_;  // From the selector: why the match may be wrong.
  mutable std::mutex mu_;
  bool per_process_ = true;
  std::string fallback_reason_;
  std::vector<int> own_pids_;  // Every pid ever reported; small.
};

}  // namespace kfuse

#endif  // KFUSE_TUNER_GPU_LOAD_H_
