#include "tuner/runner_pool.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/status.h"

namespace kfuse {
namespace {


void SleepSeconds(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// The fingerprint fields in which `b` differs from `a`, for the log line
// that says why a GPU is left out.
std::string Differences(const DeviceFingerprint& a, const DeviceFingerprint& b) {
  std::vector<std::string> d;
  auto field = [&](bool differs, const std::string& what) {
    if (differs) d.push_back(what);
  };
  field(a.name != b.name, "name");
  field(a.cc_major != b.cc_major || a.cc_minor != b.cc_minor,
        absl::StrCat("compute capability ", b.cc_major, ".", b.cc_minor, " vs ", a.cc_major, ".",
                     a.cc_minor));
  field(a.sm_count != b.sm_count, absl::StrCat("SMs ", b.sm_count, " vs ", a.sm_count));
  field(a.sm_clock_khz != b.sm_clock_khz,
        absl::StrCat("SM clock ", b.sm_clock_khz, " vs ", a.sm_clock_khz, " kHz"));
  field(a.mem_clock_khz != b.mem_clock_khz,
        absl::StrCat("memory clock ", b.mem_clock_khz, " vs ", a.mem_clock_khz, " kHz"));
  field(a.mem_bus_width_bits != b.mem_bus_width_bits, "memory bus width");
  field(a.l2_bytes != b.l2_bytes, "L2 size");
  field(a.memory_bytes != b.memory_bytes,
        absl::StrCat("memory ", b.memory_bytes, " vs ", a.memory_bytes, " bytes"));
  field(a.power_limit_mw != b.power_limit_mw,
        absl::StrCat("power limit ", b.power_limit_mw, " vs ", a.power_limit_mw, " mW"));
  field(a.ecc != b.ecc, absl::StrCat("ECC ", b.ecc ? "on" : "off"));
  field(a.mig != b.mig, absl::StrCat("MIG ", b.mig ? "on" : "off"));
  return d.empty() ? "its fingerprint" : absl::StrJoin(d, ", ");
}

}  // namespace

RunnerPool::RunnerPool(std::vector<Slot> slots, DeviceFingerprint device, RunnerPoolOptions options)
    : device_(std::move(device)), options_(std::move(options)), slots_(std::move(slots)) {}

absl::StatusOr<std::unique_ptr<RunnerPool>> RunnerPool::Create(
    std::vector<PoolMember> candidates, RunnerPoolOptions options,
    std::vector<ExcludedMember>* excluded) {
  if (candidates.empty()) return absl::InvalidArgumentError("members: none given");
  std::set<int> devices;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].runner == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("members[", i, "].runner is null"));
    }
    if (!devices.insert(candidates[i].device).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("members[", i, "].device: GPU ", candidates[i].device, " given twice"));
    }
  }
  if (options.idle) KFUSE_RETURN_IF_ERROR(ValidateIdlePolicy(*options.idle));
  if (!options.now) options.now = SteadySeconds;
  if (!options.sleep) options.sleep = SleepSeconds;

  std::optional<DeviceFingerprint> reference;
  int reference_device = 0;
  std::vector<Slot> kept;
  std::vector<std::string> unreadable;
  const double now = options.now();
  for (PoolMember& c : candidates) {
    absl::StatusOr<DeviceFingerprint> fp = c.runner->Device();
    std::string reason;
    if (!fp.ok()) {
      unreadable.push_back(absl::StrCat("GPU ", c.device, ": ", fp.status().message()));
      Slot s;
      s.stats.device = c.device;
      s.stats.joined = false;
      s.stats.in_rotation = false;
      s.stats.removed_reason = std::string(fp.status().message());
      s.backoff_seconds = NextRetryBackoff(0);
      s.readmit_at = now + s.backoff_seconds;
      s.m = std::move(c);
      kept.push_back(std::move(s));
      continue;
    } else if (!reference) {
      reference = *fp;
      reference_device = c.device;
    } else if (fp->Digest() != reference->Digest()) {
      reason = absl::StrCat("GPU ", c.device, " (", fp->name, ") differs from GPU ",
                            reference_device, " (", reference->name, ") in ",
                            Differences(*reference, *fp), "; not used for tuning");
    }
    if (!reason.empty()) {
      if (excluded != nullptr) excluded->push_back({std::move(c), std::move(reason)});
      continue;
    }
    Slot s;
    s.stats.device = c.device;
    s.m = std::move(c);
    kept.push_back(std::move(s));
  }
  if (!reference) {
    return absl::UnavailableError(
        absl::StrCat("no GPU reports its device: ", absl::StrJoin(unreadable, "; ")));
  }
  return std::unique_ptr<RunnerPool>(
      new RunnerPool(std::move(kept), std::move(*reference), std::move(options)));
}

RunnerPool::~RunnerPool() {
  for (Slot& s : slots_)
    if (s.starter.joinable()) s.starter.join();
}

void RunnerPool::StartPending(size_t i) {
  Slot& s = slots_[i];  // Out of the rotation: no task touches its runner.
  const absl::StatusOr<DeviceFingerprint> fp = s.m.runner->Device();  // Starts its worker.
  std::lock_guard<std::mutex> lock(mu_);
  s.stats.starting = false;
  if (absl::IsCancelled(fp.status())) return;  // The server stopping: not a failure.
  if (!fp.ok()) {
    s.backoff_seconds = NextRetryBackoff(s.backoff_seconds);
    s.readmit_at = options_.now() + s.backoff_seconds;
    s.stats.removed_reason = std::string(fp.status().message());
    return;
  }
  if (fp->Digest() != device_.Digest()) {
    s.readmit_at = kNever;
    s.stats.removed_reason = absl::StrCat("its GPU (", fp->name, ") differs from the pool's (",
                                          device_.name, ") in ", Differences(device_, *fp),
                                          "; not used for tuning");
    LogEvent(LogLevel::kWarning, "tuning_gpu_excluded",
             {{"device", absl::StrCat(s.stats.device)}, {"reason", s.stats.removed_reason}});
    return;
  }
  s.stats.joined = true;
  s.stats.in_rotation = true;
  s.stats.removed_reason.clear();
  s.backoff_seconds = 0;
  LogEvent(LogLevel::kInfo, "tuning_gpu_joined",
           {{"device", absl::StrCat(s.stats.device)}, {"gpu", fp->name}});
  cv_.notify_all();
}

void RunnerPool::ReadmitLocked() {
  if (InRotationLocked() == slots_.size()) return;  // The usual case: no clock to read.
  const double now = options_.now();
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (s.stats.in_rotation || now < s.readmit_at) continue;
    if (!s.stats.joined) {
      // Its worker starts in the background: no task waits on that start.
      if (s.stats.starting) continue;
      s.stats.starting = true;
      if (s.starter.joinable()) s.starter.join();  // The last one is done: it cleared `starting`.
      s.starter = std::thread([this, i] { StartPending(i); });
      continue;
    }
    s.stats.in_rotation = true;  // Its runner starts a fresh worker for the next task.
    s.stats.removed_reason.clear();
  }
}

bool RunnerPool::AnyFreeLocked() const {
  return std::any_of(slots_.begin(), slots_.end(),
                     [](const Slot& s) { return s.stats.in_rotation && !s.stats.running; });
}

size_t RunnerPool::InRotationLocked() const {
  return std::count_if(slots_.begin(), slots_.end(),
                       [](const Slot& s) { return s.stats.in_rotation; });
}

size_t RunnerPool::PickLocked(const std::vector<size_t>& candidates) const {
  return *std::min_element(candidates.begin(), candidates.end(), [&](size_t a, size_t b) {
    return slots_[a].last_release < slots_[b].last_release;  // Ties: the lower index.
  });
}

void RunnerPool::TakeLocked(size_t i) {
  slots_[i].stats.running = true;
  // Whatever it sees next, it must see idle anew: others may start meanwhile.
  slots_[i].idle_since = -1;
}

std::string RunnerPool::GoneLocked() const {
  const double now = options_.now();
  std::vector<std::string> why;
  for (const Slot& s : slots_) {
    if (s.readmit_at >= kNever) {
      why.push_back(absl::StrFormat("GPU %d: %s", s.stats.device, s.stats.removed_reason));
      continue;
    }
    if (s.stats.starting) {
      why.push_back(absl::StrFormat("GPU %d: %s; its worker is starting", s.stats.device,
                                    s.stats.removed_reason));
      continue;
    }
    why.push_back(absl::StrFormat("GPU %d: %s; tried again in %.0f s", s.stats.device,
                                  s.stats.removed_reason, std::max(0.0, s.readmit_at - now)));
  }
  return absl::StrCat("no GPU left for tuning (", absl::StrJoin(why, "; "), ")");
}

std::string RunnerPool::DeferredLocked(const std::vector<size_t>& gated, double waited) const {
  std::vector<std::string> what;
  std::vector<int> devices;
  for (size_t i : gated) {
    const Slot& s = slots_[i];
    devices.push_back(s.stats.device);
    if (!s.last_error.empty()) {
      what.push_back(absl::StrCat("GPU ", s.stats.device, ": load unknown: ", s.last_error));
    } else if (s.stats.last_load) {
      what.push_back(absl::StrCat("GPU ", s.stats.device, ": ", DescribeLoad(*s.stats.last_load)));
    }
  }
  return absl::StrFormat("GPU%s %s busy for %.1f s (%s); tuning deferred",
                         devices.size() > 1 ? "s" : "", absl::StrJoin(devices, ", "), waited,
                         absl::StrJoin(what, "; "));
}

absl::StatusOr<size_t> RunnerPool::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t ticket = next_ticket_++;
  ++waiting_;
  auto leave = [&] {
    --waiting_;
    ++serving_;
    cv_.notify_all();
  };
  double gated_seconds = 0;  // Time spent with free members all held back.
  double last_gated = -1;
  while (true) {
    cv_.wait(lock, [&] {
      ReadmitLocked();
      return serving_ == ticket && (AnyFreeLocked() || InRotationLocked() == 0);
    });
    if (InRotationLocked() == 0) {
      leave();
      return absl::UnavailableError(GoneLocked());
    }
    std::vector<size_t> free;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].stats.in_rotation && !slots_[i].stats.running) free.push_back(i);
    }
    if (!options_.idle) {
      size_t i = PickLocked(free);
      TakeLocked(i);
      leave();
      return i;
    }
    const IdlePolicy& policy = *options_.idle;
    // Only the head of the queue takes members for tasks, so the free ones
    // stay free while it samples them without the lock (but for
    // MeasureCeilings, checked below).
    lock.unlock();
    std::vector<std::pair<size_t, absl::StatusOr<GpuLoad>>> samples;
    for (size_t i : free) {
      if (slots_[i].m.probe != nullptr) samples.emplace_back(i, slots_[i].m.probe->Sample());
    }
    const double now = options_.now();
    lock.lock();
    for (auto& [i, load] : samples) {
      Slot& s = slots_[i];
      // A gap in the samples breaks the run: the GPU was not watched.
      const bool watched = s.last_sample >= 0 && now - s.last_sample <= 2 * policy.poll_seconds;
      s.last_sample = now;
      if (!load.ok()) {
        s.last_error = std::string(load.status().message());
        s.idle_since = -1;
        continue;
      }
      s.last_error.clear();
      s.stats.last_load = *load;
      if (!SampleIsIdle(*load, policy)) {
        s.idle_since = -1;
      } else if (s.idle_since < 0 || !watched) {
        s.idle_since = now;
      }
    }
    std::vector<size_t> ready, gated;
    for (size_t i : free) {
      const Slot& s = slots_[i];
      if (s.stats.running) continue;  // MeasureCeilings took it meanwhile.
      const bool idle = s.m.probe == nullptr ||
                        (s.idle_since >= 0 && now - s.idle_since >= policy.settle_seconds);
      (idle ? ready : gated).push_back(i);
    }
    if (!ready.empty()) {
      size_t i = PickLocked(ready);
      TakeLocked(i);
      leave();
      return i;
    }
    if (gated.empty()) {  // All taken for ceilings: wait for a release.
      last_gated = -1;
      continue;
    }
    if (last_gated >= 0) {
      const double dt = std::max(0.0, now - last_gated);
      gated_seconds += dt;
      for (size_t i : gated) slots_[i].stats.idle_wait_seconds += dt;
    }
    last_gated = now;
    if (gated_seconds >= policy.max_wait_seconds) {
      ++deferred_;
      std::string message = DeferredLocked(gated, gated_seconds);
      leave();
      return absl::UnavailableError(message);
    }
    const double nap = std::min(policy.poll_seconds, policy.max_wait_seconds - gated_seconds);
    lock.unlock();
    options_.sleep(nap);
    lock.lock();
  }
}

void RunnerPool::Release(size_t i, double seconds, const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& s = slots_[i];
  s.stats.running = false;
  ++s.stats.tasks;
  s.stats.busy_seconds += seconds;
  s.last_release = ++releases_;
  if (absl::IsUnavailable(status)) {
    s.backoff_seconds = NextRetryBackoff(s.backoff_seconds);
    s.readmit_at = options_.now() + s.backoff_seconds;
    s.stats.in_rotation = false;
    s.stats.removed_reason = std::string(status.message());
  } else {
    s.backoff_seconds = 0;  // It works: a later failure starts the backoff afresh.
  }
  cv_.notify_all();
}

absl::StatusOr<std::vector<Trial>> RunnerPool::Run(
    const CheckTask& task, const std::function<void(const Trial&)>& on_trial) {
  // A malformed task should not wait for a GPU to be told so.
  KFUSE_RETURN_IF_ERROR(ValidateTask(task));
  KFUSE_ASSIGN_OR_RETURN(size_t i, Acquire());
  Slot& s = slots_[i];  // Slots never move once the pool is built.
  const double start = options_.now();
  absl::StatusOr<std::vector<Trial>> trials = s.m.runner->Run(task, on_trial);
  Release(i, options_.now() - start, trials.status());
  if (absl::IsUnavailable(trials.status())) {
    return absl::UnavailableError(
        absl::StrCat("GPU ", s.stats.device, " left the tuning pool: ", trials.status().message()));
  }
  return trials;
}

absl::StatusOr<DeviceFingerprint> RunnerPool::Device() { return device_; }

absl::StatusOr<Ceilings> RunnerPool::MeasureCeilings(const std::atomic<bool>* cancel) {
  size_t i = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      if (cancel != nullptr && cancel->load()) return absl::CancelledError("measuring ceilings: cancelled");
      ReadmitLocked();
      auto usable = [](const Slot& s) { return s.stats.in_rotation && s.stats.joined; };
      if (std::none_of(slots_.begin(), slots_.end(), usable)) return absl::UnavailableError(GoneLocked());
      // Every member is the same model: the first free one measures.
      auto free = std::find_if(slots_.begin(), slots_.end(),
                               [&](const Slot& s) { return usable(s) && !s.stats.running; });
      if (free != slots_.end()) {
        i = static_cast<size_t>(free - slots_.begin());
        break;
      }
      if (cancel == nullptr) {
        cv_.wait(lock);
      } else {
        cv_.wait_for(lock, std::chrono::milliseconds(250));  // Looks at cancel between waits.
      }
    }
    slots_[i].stats.running = true;
  }
  absl::StatusOr<Ceilings> c = slots_[i].m.runner->MeasureCeilings(cancel);
  std::lock_guard<std::mutex> lock(mu_);
  slots_[i].stats.running = false;
  slots_[i].idle_since = -1;
  cv_.notify_all();
  return c;
}

std::optional<std::string> RunnerPool::Unavailable() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (InRotationLocked() > 0) return std::nullopt;
  const double now = options_.now();
  // One due back is readmitted by the next task's Acquire.
  for (const Slot& s : slots_) {
    if (now >= s.readmit_at) return std::nullopt;
  }
  return GoneLocked();
}

std::vector<MemberStats> RunnerPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<MemberStats> out;
  for (const Slot& s : slots_) out.push_back(s.stats);
  return out;
}

int RunnerPool::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

int64_t RunnerPool::deferred() const {
  std::lock_guard<std::mutex> lock(mu_);
  return deferred_;
}

absl::StatusOr<std::vector<int>> ParseDeviceList(std::string_view flag, int device_count) {
  const absl::string_view devices(flag.data(), flag.size());
  std::vector<int> out;
  if (devices == "all") {
    if (device_count <= 0)
      return absl::InvalidArgumentError("devices: \"all\" but no GPU is visible");
    for (int d = 0; d < device_count; ++d) out.push_back(d);
    return out;
  }
  if (absl::StripAsciiWhitespace(devices).empty()) {
    return absl::InvalidArgumentError("devices: empty; give \"all\" or ordinals such as \"0,1\"");
  }
  for (absl::string_view part : absl::StrSplit(devices, ',')) {
    absl::string_view p = absl::StripAsciiWhitespace(part);
    int d = 0;
    if (!absl::SimpleAtoi(p, &d) || p.empty() || p[0] == '-' || p[0] == '+') {
      return absl::InvalidArgumentError(
          absl::StrCat("devices: \"", p, "\" is not a GPU ordinal; give \"all\" or \"0,1\""));
    }
    if (d >= device_count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "devices: GPU ", d, " out of range: ", device_count, " visible CUDA device(s)"));
    }
    if (std::find(out.begin(), out.end(), d) != out.end()) {
      return absl::InvalidArgumentError(absl::StrCat("devices: GPU ", d, " listed twice"));
    }
    out.push_back(d);
  }
  return out;
}

absl::StatusOr<WorkerPool> CreateWorkerPool(const WorkerPoolOptions& o) {
  if (o.devices.empty()) return absl::InvalidArgumentError("devices: none given");
  // Workers start in parallel: each initializes the driver on its GPU.
  std::vector<std::unique_ptr<WorkerRunner>> runners(o.devices.size());
  std::vector<absl::Status> started(o.devices.size());
  {
    std::vector<std::thread> threads;
    for (size_t k = 0; k < o.devices.size(); ++k) {
      threads.emplace_back([&, k] {
        WorkerOptions wo = o.worker;
        wo.device = o.devices[k];
        runners[k] = WorkerRunner::CreateEvenIfDown(wo, &started[k]);
      });
    }
    for (std::thread& t : threads) t.join();
  }
  // The server stopping (WorkerOptions::stop): no pool, and no failure.
  for (const absl::Status& s : started) {
    if (absl::IsCancelled(s)) return s;
  }
  // The model a GPU whose worker did not start must turn out to be, for its
  // load probe: the first started one's (the pool's reference).
  std::string model;
  for (size_t k = 0; k < o.devices.size() && model.empty(); ++k) {
    if (started[k].ok()) {
      if (absl::StatusOr<DeviceFingerprint> fp = runners[k]->Device(); fp.ok()) model = fp->name;
    }
  }
  if (model.empty()) {
    std::vector<std::string> failures;
    // Every start failed the same way (no worker binary, say): that code,
    // so the caller can tell a failure trying again cannot help.
    absl::StatusCode code = started[0].ok() ? absl::StatusCode::kUnavailable : started[0].code();
    for (size_t k = 0; k < o.devices.size(); ++k) {
      failures.push_back(absl::StrCat("GPU ", o.devices[k], ": ", started[k].message()));
      if (started[k].code() != code) code = absl::StatusCode::kUnavailable;
    }
    return absl::Status(code, absl::StrCat("no tuning worker started: ", absl::StrJoin(failures, "; ")));
  }
  WorkerPool out;
  std::vector<PoolMember> members;
  for (size_t k = 0; k < o.devices.size(); ++k) {
    const int d = o.devices[k];
    if (!started[k].ok()) {
      out.notes.push_back(absl::StrCat("GPU ", d, ": ", started[k].message(),
                                       "; tried again after ", NextRetryBackoff(0),
                                       " s, joins tuning when its worker starts"));
    }
    PoolMember m;
    m.device = d;
    WorkerRunner* runner = runners[k].get();
    m.runner = std::move(runners[k]);
    if (o.idle) {
      NvmlProbeOptions po;
      po.cuda_ordinal = d;
      if (o.pci_bus_id) {
        absl::StatusOr<std::string> bus = o.pci_bus_id(d);
        if (bus.ok()) po.pci_bus_id = *bus;
      }
      po.expected_name = model;  // What a GPU that has not started must turn out to be.
      if (started[k].ok()) {
        if (absl::StatusOr<DeviceFingerprint> fp = runner->Device(); fp.ok()) po.expected_name = fp->name;
      }
      po.own_pids = [runner] { return std::vector<int>{runner->pid()}; };
      absl::StatusOr<std::unique_ptr<NvmlLoadProbe>> probe = NvmlLoadProbe::Create(po);
      if (probe.ok()) {
        out.notes.push_back(
            absl::StrCat("GPU ", d, ": tuning waits for idle time; ", (*probe)->Describe()));
        m.probe = std::move(*probe);
      } else {
        out.notes.push_back(absl::StrCat(
            "GPU ", d, ": tuning does not wait for idle time: ", probe.status().message()));
      }
    }
    members.push_back(std::move(m));
  }
  RunnerPoolOptions po;
  po.idle = o.idle;
  std::vector<ExcludedMember> excluded;
  KFUSE_ASSIGN_OR_RETURN(out.pool, RunnerPool::Create(std::move(members), po, &excluded));
  for (const ExcludedMember& e : excluded) out.notes.push_back(e.reason);
  return out;
}

}  // namespace kfuse
