#include "tuner/gpu_load.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/status.h"

namespace kfuse {
namespace {

namespace abi = nvml_abi;

static_assert(sizeof(abi::ProcessUtilizationSample) == 32, "nvmlProcessUtilizationSample_t");
static_assert(sizeof(abi::MemoryV2) == 40, "nvmlMemory_v2_t");
static_assert(abi::kMemoryV2Version == 0x02000028, "nvmlMemory_v2");

constexpr size_t kMaxOwnPids = 64;

int64_t SystemClockUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

absl::Status ValidateIdlePolicy(const IdlePolicy& p) {
  if (!(p.max_others_busy >= 0 && p.max_others_busy <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("idle policy: max_others_busy must be in [0, 1], not ", p.max_others_busy));
  }
  if (p.min_free_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("idle policy: min_free_bytes must be >= 0, not ", p.min_free_bytes));
  }
  if (!(p.poll_seconds > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("idle policy: poll_seconds must be > 0, not ", p.poll_seconds));
  }
  if (!(p.settle_seconds >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("idle policy: settle_seconds must be >= 0, not ", p.settle_seconds));
  }
  if (!(p.max_wait_seconds >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("idle policy: max_wait_seconds must be >= 0, not ", p.max_wait_seconds));
  }
  return absl::OkStatus();
}

bool SampleIsIdle(const GpuLoad& load, const IdlePolicy& policy) {
  return load.others_busy_fraction <= policy.max_others_busy &&
         load.free_bytes >= policy.min_free_bytes;
}

std::string DescribeLoad(const GpuLoad& load) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  return absl::StrFormat("others %.0f%% busy, %.1f of %.1f GiB free",
                         100 * load.others_busy_fraction, load.free_bytes / kGiB,
                         load.total_bytes / kGiB);
}

absl::StatusOr<NvmlDeviceSelector> SelectNvmlDevice(int cuda_ordinal, const std::string& pci_bus_id,
                                                    const char* visible, const char* order) {
  if (cuda_ordinal < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cuda_ordinal must be >= 0, not ", cuda_ordinal));
  }
  NvmlDeviceSelector s;
  if (!pci_bus_id.empty()) {
    s.kind = NvmlDeviceSelector::Kind::kPciBusId;
    s.key = pci_bus_id;
    return s;
  }
  // Integers in CUDA_VISIBLE_DEVICES count in CUDA's own order, so they carry
  // the same caveat as a bare ordinal.
  const bool pci_order = order != nullptr && std::string(order) == "PCI_BUS_ID";
  const std::string caveat =
      pci_order ? ""
                : "matched by index: CUDA's default device order (FASTEST_FIRST) equals NVML's "
                  "only among GPUs of one model; set CUDA_DEVICE_ORDER=PCI_BUS_ID or pass the "
                  "PCI bus id";
  std::string entry = absl::StrCat(cuda_ordinal);
  if (visible != nullptr) {
    std::vector<std::string> entries;
    if (!absl::StripAsciiWhitespace(visible).empty()) {
      for (absl::string_view e : absl::StrSplit(visible, ',')) {
        entries.emplace_back(absl::StripAsciiWhitespace(e));
      }
    }
    if (static_cast<size_t>(cuda_ordinal) >= entries.size()) {
      return absl::InvalidArgumentError(absl::StrCat("cuda_ordinal ", cuda_ordinal,
                                                     ": CUDA_VISIBLE_DEVICES=\"", visible,
                                                     "\" lists ", entries.size(), " device(s)"));
    }
    entry = entries[cuda_ordinal];
    if (absl::StartsWith(entry, "GPU-") || absl::StartsWith(entry, "MIG-")) {
      s.kind = NvmlDeviceSelector::Kind::kUuid;
      s.key = entry;
      return s;
    }
    if (!AllDigits(entry)) {
      return absl::FailedPreconditionError(
          absl::StrCat("CUDA_VISIBLE_DEVICES entry \"", entry, "\" for cuda_ordinal ", cuda_ordinal,
                       " is neither an index nor a UUID; pass the PCI bus id"));
    }
  }
  unsigned index = 0;
  if (!absl::SimpleAtoi(entry, &index)) {
    return absl::FailedPreconditionError(absl::StrCat("device index \"", entry, "\" out of range"));
  }
  s.kind = NvmlDeviceSelector::Kind::kIndex;
  s.index = index;
  s.caveat = caveat;
  return s;
}

NvmlLoadProbe::NvmlLoadProbe(const abi::Functions* fns, NvmlProbeOptions options)
    : fns_(fns), options_(std::move(options)) {
  if (!options_.wall_clock_us) options_.wall_clock_us = SystemClockUs;
}

NvmlLoadProbe::~NvmlLoadProbe() {
  if (initialized_ && fns_->shutdown != nullptr) fns_->shutdown();
}

absl::StatusOr<std::unique_ptr<NvmlLoadProbe>> NvmlLoadProbe::Create(NvmlProbeOptions options) {
  KFUSE_ASSIGN_OR_RETURN(const abi::Functions* fns, abi::LoadNvml(options.library));
  return CreateWithFunctions(fns, std::move(options));
}

absl::StatusOr<std::unique_ptr<NvmlLoadProbe>> NvmlLoadProbe::CreateWithFunctions(
    const abi::Functions* fns, NvmlProbeOptions options) {
  if (!(options.window_seconds > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("window_seconds must be > 0, not ", options.window_seconds));
  }
  KFUSE_ASSIGN_OR_RETURN(
      NvmlDeviceSelector selector,
      SelectNvmlDevice(options.cuda_ordinal, options.pci_bus_id,
                       std::getenv("CUDA_VISIBLE_DEVICES"), std::getenv("CUDA_DEVICE_ORDER")));
  if (fns->init_v2 == nullptr || fns->handle_by_index_v2 == nullptr ||
      (fns->get_memory_info_v2 == nullptr && fns->get_memory_info == nullptr)) {
    return absl::UnavailableError(
        "NVML not available: the library lacks nvmlInit_v2, "
        "nvmlDeviceGetHandleByIndex_v2 or nvmlDeviceGetMemoryInfo");
  }
  std::unique_ptr<NvmlLoadProbe> probe(new NvmlLoadProbe(fns, std::move(options)));
  KFUSE_RETURN_IF_ERROR(probe->Open(selector));
  // One reading now: it settles whether per-process utilization works, and a
  // probe that cannot read the GPU at all is not worth keeping.
  KFUSE_RETURN_IF_ERROR(probe->Sample().status());
  return probe;
}

absl::Status NvmlLoadProbe::Error(abi::Return r, const std::string& what) const {
  const char* text = fns_->error_string != nullptr ? fns_->error_string(r) : nullptr;
  return absl::UnavailableError(absl::StrCat(
      "NVML ", what, " (", where_, "): ", text != nullptr ? text : "error", " (", r, ")"));
}

absl::Status NvmlLoadProbe::Open(const NvmlDeviceSelector& s) {
  abi::Return r = fns_->init_v2();
  if (r != abi::kSuccess) {
    where_ = "init";
    return Error(r, "nvmlInit_v2");
  }
  initialized_ = true;
  using Kind = NvmlDeviceSelector::Kind;
  switch (s.kind) {
    case Kind::kPciBusId:
      where_ = s.key;
      if (fns_->handle_by_pci_bus_id_v2 == nullptr) {
        return absl::UnavailableError("NVML lacks nvmlDeviceGetHandleByPciBusId_v2");
      }
      r = fns_->handle_by_pci_bus_id_v2(s.key.c_str(), &device_);
      break;
    case Kind::kUuid:
      where_ = s.key;
      if (fns_->handle_by_uuid == nullptr) {
        return absl::UnavailableError("NVML lacks nvmlDeviceGetHandleByUUID");
      }
      r = fns_->handle_by_uuid(s.key.c_str(), &device_);
      break;
    case Kind::kIndex:
      where_ = absl::StrCat("index ", s.index);
      r = fns_->handle_by_index_v2(s.index, &device_);
      break;
  }
  if (r != abi::kSuccess) {
    return Error(r, absl::StrCat("cannot find CUDA device ", options_.cuda_ordinal));
  }
  caveat_ = s.caveat;
  if (s.kind != Kind::kPciBusId && !options_.expected_name.empty() && fns_->get_name != nullptr) {
    char name[96] = {};
    r = fns_->get_name(device_, name, sizeof(name) - 1);
    if (r != abi::kSuccess) return Error(r, "nvmlDeviceGetName");
    if (options_.expected_name != name) {
      return absl::FailedPreconditionError(absl::StrCat(
          "NVML device ", where_, " is ", name, " but CUDA device ", options_.cuda_ordinal, " is ",
          options_.expected_name, ": set CUDA_DEVICE_ORDER=PCI_BUS_ID or pass the PCI bus id"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> NvmlLoadProbe::ProcessBusyLocked(bool* supported) {
  *supported = true;
  if (fns_->get_process_utilization == nullptr) {
    *supported = false;
    fallback_reason_ = "nvmlDeviceGetProcessUtilization missing";
    return 0.0;
  }
  const int64_t since =
      options_.wall_clock_us() - static_cast<int64_t>(options_.window_seconds * 1e6);
  const unsigned long long last_seen = static_cast<unsigned long long>(std::max<int64_t>(since, 0));
  // Ask for the count, then read; processes may start in between, so retry.
  unsigned int count = 0;
  abi::Return r = fns_->get_process_utilization(device_, nullptr, &count, last_seen);
  std::vector<abi::ProcessUtilizationSample> samples;
  for (int attempt = 0;
       attempt < 3 && (r == abi::kInsufficientSize || (r == abi::kSuccess && count > 0));
       ++attempt) {
    samples.assign(count + 8, abi::ProcessUtilizationSample{});
    count = static_cast<unsigned int>(samples.size());
    r = fns_->get_process_utilization(device_, samples.data(), &count, last_seen);
    if (r == abi::kSuccess) break;
  }
  if (r == abi::kNotFound) return 0.0;  // No process sampled in the window.
  if (r == abi::kNotSupported || r == abi::kNoPermission || r == abi::kFunctionNotFound) {
    *supported = false;
    const char* text = fns_->error_string != nullptr ? fns_->error_string(r) : nullptr;
    fallback_reason_ =
        absl::StrCat("per-process utilization: ", text != nullptr ? text : "error", " (", r, ")");
    return 0.0;
  }
  if (r != abi::kSuccess) return Error(r, "nvmlDeviceGetProcessUtilization");
  count = std::min<unsigned int>(count, static_cast<unsigned int>(samples.size()));
  // Each other process's mean SM share over the window, summed.
  std::map<unsigned int, std::pair<double, int>> per_pid;  // pid -> (sum %, samples)
  const int self = static_cast<int>(getpid());
  for (unsigned int i = 0; i < count; ++i) {
    const abi::ProcessUtilizationSample& s = samples[i];
    if (s.time_stamp_us <= last_seen) continue;
    const int pid = static_cast<int>(s.pid);
    if (pid == self || std::find(own_pids_.begin(), own_pids_.end(), pid) != own_pids_.end()) {
      continue;
    }
    auto& [sum, n] = per_pid[s.pid];
    sum += std::min(s.sm_util, 100u);
    ++n;
  }
  double busy = 0;
  for (const auto& [pid, sum_n] : per_pid) busy += sum_n.first / sum_n.second / 100.0;
  return std::min(busy, 1.0);
}

absl::StatusOr<double> NvmlLoadProbe::OthersBusyLocked() {
  if (per_process_) {
    bool supported = true;
    KFUSE_ASSIGN_OR_RETURN(double busy, ProcessBusyLocked(&supported));
    if (supported) return busy;
    per_process_ = false;  // For good: it will not start working later.
  }
  if (fns_->get_utilization_rates == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "NVML has neither per-process nor device utilization (", fallback_reason_, ")"));
  }
  abi::Utilization u{};
  abi::Return r = fns_->get_utilization_rates(device_, &u);
  if (r != abi::kSuccess) return Error(r, "nvmlDeviceGetUtilizationRates");
  return std::min(u.gpu, 100u) / 100.0;
}

absl::StatusOr<GpuLoad> NvmlLoadProbe::Sample() {
  std::vector<int> pids;
  if (options_.own_pids) pids = options_.own_pids();
  std::lock_guard<std::mutex> lock(mu_);
  for (int pid : pids) {
    if (pid <= 0 || std::find(own_pids_.begin(), own_pids_.end(), pid) != own_pids_.end()) continue;
    if (own_pids_.size() == kMaxOwnPids) own_pids_.erase(own_pids_.begin());
    own_pids_.push_back(pid);
  }
  GpuLoad load;
  KFUSE_ASSIGN_OR_RETURN(load.others_busy_fraction, OthersBusyLocked());
  abi::Return r = abi::kFunctionNotFound;
  if (fns_->get_memory_info_v2 != nullptr) {
    abi::MemoryV2 m{};
    m.version = abi::kMemoryV2Version;
    r = fns_->get_memory_info_v2(device_, &m);
    if (r == abi::kSuccess) {
      load.free_bytes = static_cast<int64_t>(m.free);
      load.total_bytes = static_cast<int64_t>(m.total);
    }
  }
  if (r == abi::kFunctionNotFound && fns_->get_memory_info != nullptr) {
    abi::Memory m{};
    r = fns_->get_memory_info(device_, &m);
    if (r == abi::kSuccess) {
      load.free_bytes = static_cast<int64_t>(m.free);
      load.total_bytes = static_cast<int64_t>(m.total);
    }
  }
  if (r != abi::kSuccess) return Error(r, "nvmlDeviceGetMemoryInfo");
  return load;
}

std::string NvmlLoadProbe::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (per_process_) {
    return absl::StrCat("NVML GPU ", where_, ": per-process SM utilization, our ",
                        own_pids_.size() + 1, " process(es) left out; memory",
                        caveat_.empty() ? "" : "; ", caveat_);
  }
  return absl::StrCat("NVML GPU ", where_, ": device-wide utilization, our own worker included (",
                      fallback_reason_, "); memory", caveat_.empty() ? "" : "; ", caveat_);
}

bool NvmlLoadProbe::per_process() const {
  std::lock_guard<std::mutex> lock(mu_);
  return per_process_;
}

}  // namespace kfuse
