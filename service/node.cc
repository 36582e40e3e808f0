#include "service/node.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/status.h"
#include "kfuse/v1/kfuse.pb.h"
#include "core/version.h"
#include "service/convert.h"
#include "core/log.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"
#include "tuner/worker_process.h"
#include "tuner/nvrtc_compiler.h"
#include "tuner/retry_start_runner.h"
#include "service/tuning_start.h"

namespace kfuse {
namespace {

absl::Status MakeDirs(const std::string& dir) {
  std::string path;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || (dir[i] == '/' && i > 0)) {
      path = dir.substr(0, i);
      if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
        return absl::PermissionDeniedError(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

std::string Hostname() {
  char buf[HOST_NAME_MAX + 1] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

absl::StatusOr<std::string> DefaultStorePath() {
  std::string base;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    base = x;
  } else if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    base = absl::StrCat(h, "/.cache");
  } else {
    return absl::FailedPreconditionError("no HOME or XDG_CACHE_HOME: pass --store");
  }
  std::string dir = absl::StrCat(base, "/kfuse");
  KFUSE_RETURN_IF_ERROR(MakeDirs(dir));
  return absl::StrCat(dir, "/kfuse.db");
}

absl::StatusOr<SigningKey> LoadNodeSigningKey(const NodeOptions& o, std::string* path, bool* created) {
  std::string key_path = o.signing_key_path;
  if (key_path.empty()) {
    std::string store = o.store_path;
    if (store.empty()) {
      KFUSE_ASSIGN_OR_RETURN(store, DefaultStorePath());
    }
    key_path = absl::StrCat(store, ".signing-key");
  }
  if (path != nullptr) *path = key_path;
  // An explicit key file must exist: creating one silently would change the
  // key clients pinned.
  return LoadOrCreateSigningKey(key_path, /*create=*/o.signing_key_path.empty(), created);
}

absl::StatusOr<std::unique_ptr<ServiceNode>> ServiceNode::Create(const NodeOptions& o) {
  std::unique_ptr<ServiceNode> n(new ServiceNode());
  n->store_path_ = o.store_path;
  if (n->store_path_.empty()) {
    KFUSE_ASSIGN_OR_RETURN(n->store_path_, DefaultStorePath());
  }
  // The trusted keys, the metrics listener and the store first: a refusal
  // there must not leave a new store or signing key (the node's identity)
  // behind.
  if (!o.trusted_keys_path.empty()) {
    KFUSE_ASSIGN_OR_RETURN(n->trusted_keys_, TrustedKeys::Load(o.trusted_keys_path));
  }
  KFUSE_ASSIGN_OR_RETURN(n->metrics_, Metrics::Create(o.metrics_address));
  StoreOptions so;
  so.path = n->store_path_;
  so.max_bytes = o.store_max_bytes;
  so.read_only = o.read_only;
  KFUSE_ASSIGN_OR_RETURN(n->store_, Store::Open(so));
  NodeOptions key_options = o;
  key_options.store_path = n->store_path_;
  KFUSE_ASSIGN_OR_RETURN(n->signing_key_, LoadNodeSigningKey(key_options, &n->signing_key_path_));
  n->trusted_keys_.Add(n->signing_key_.public_key);
  n->compiler_ = std::make_unique<NvrtcCompiler>();

  PipelineDeps deps;
  deps.compiler = n->compiler_.get();
  deps.store = n->store_.get();
  deps.metrics = n->metrics_.get();
  PipelineOptions po;
  po.node = o.node.empty() ? Hostname() : o.node;
  po.read_only = o.read_only;
  po.max_message_bytes = o.max_message_bytes;
  if (!o.fleet_dsn.empty()) {
    FleetOptions fo;
    fo.dsn = o.fleet_dsn;
    fo.read_only = o.fleet_read_only || o.read_only;
    fo.holder = absl::StrCat(po.node, "/", getpid());
    Metrics* metrics = n->metrics_.get();
    const std::string shown = RedactDsn(fo.dsn);
    fo.on_state_change = [metrics, shown](bool up, const absl::Status& why) {
      metrics->SetFleetUp(up);
      if (up) {
        LogEvent(LogLevel::kInfo, "fleet_up", {{"dsn", shown}});
      } else {
        metrics->FleetError("connect");
        LogEvent(LogLevel::kWarning, "fleet_unavailable",
                 {{"dsn", shown}, {"error", why.ToString()}, {"effect", "serving from the local store only"}});
      }
    };
    metrics->SetFleetWritable(!fo.read_only);
    fo.on_write_change = [metrics](bool writable, const std::string&) { metrics->SetFleetWritable(writable); };
    FleetTierOptions to;
    to.lease_seconds = o.fleet_lease_seconds;
    to.origin = EntryOrigin{po.node, 0, kKfuseVersion};
    n->fleet_ = std::make_unique<FleetTier>(FleetStore::Create(fo), &n->signing_key_, n->trusted_keys_,
                                            n->metrics_.get(), to);
    deps.fleet = n->fleet_.get();
  }
  absl::StatusOr<const DriverApi*> driver = o.no_gpu ? nullptr : LoadDriver();
  if (o.no_gpu) {
    po.no_gpu_reason = "tuning disabled (--no_gpu)";
  } else if (!driver.ok()) {
    po.no_gpu_reason = std::string(driver.status().message());
  } else if (DeviceCount() == 0) {
    po.no_gpu_reason = "the NVIDIA driver is loaded but sees no GPU";
  } else {
    KFUSE_ASSIGN_OR_RETURN(std::vector<int> devices, o.devices.empty()
                                                        ? absl::StatusOr<std::vector<int>>(std::vector<int>{o.device})
                                                        : ParseDeviceList(o.devices, DeviceCount()));
    WorkerPoolOptions wpo;
    wpo.devices = devices;
    wpo.worker.memory_budget_bytes = o.gpu_memory_budget;
    wpo.worker.worker_path = o.worker_path.empty() ? DefaultWorkerPath() : o.worker_path;
    wpo.worker.stop = &n->stopping_;
    wpo.pci_bus_id = PciBusId;
    if (o.tune_max_gpu_busy < 1.0) {
      IdlePolicy idle = o.idle;
      idle.max_others_busy = o.tune_max_gpu_busy;
      idle.min_free_bytes = std::max(idle.min_free_bytes, o.gpu_memory_budget);  // Room for a task.
      KFUSE_RETURN_IF_ERROR(ValidateIdlePolicy(idle));
      wpo.idle = idle;
    }
    // A start that fails now (the GPU full or held, say) is tried again
    // later by the starter below, so the node need not be restarted to tune.
    n->runner_ = std::make_unique<RetryStartRunner>([wpo]() -> absl::StatusOr<std::unique_ptr<Runner>> {
      if (wpo.devices.size() == 1 && !wpo.idle) {
        // One GPU, no gate: the worker runner itself (it restarts its
        // worker after a fault instead of leaving a pool).
        WorkerOptions wo = wpo.worker;
        wo.device = wpo.devices[0];
        KFUSE_ASSIGN_OR_RETURN(std::unique_ptr<WorkerRunner> runner, WorkerRunner::Create(wo));
        return runner;
      }
      KFUSE_ASSIGN_OR_RETURN(WorkerPool pool, CreateWorkerPool(wpo));
      for (const std::string& note : pool.notes) LogEvent(LogLevel::kWarning, "tuning_gpu", {{"note", note}});
      return std::move(pool.pool);
    });
    deps.runner = n->runner_.get();
    if (auto v = DriverVersion(); v.ok()) po.driver_version = *v;
  }
  po.repro_dir = absl::StrReplaceAll(o.repro_dir, {{"<store>", n->store_path_}});
  po.repro_limits.max_bundles = o.repro_max_bundles;
  n->pipeline_ = std::make_unique<Pipeline>(std::move(deps), std::move(po));
  if (n->runner_ != nullptr) {
    n->starter_ = std::make_unique<TuningStarter>(n->runner_.get(), n->store_.get(), n->pipeline_.get());
    if (n->starter_->TryNow() == TuningStarter::Result::kRetry) n->starter_->Start();
  }
  return n;
}

ServiceNode::~ServiceNode() {
  StopWorkerStarts();                          // So the starter's try ends soon.
  if (starter_ != nullptr) starter_->Stop();  // Before what it attaches to goes.
}

bool ServiceNode::can_tune() const { return pipeline_->gpu() != nullptr; }

std::string ServiceNode::device_name() const {
  std::shared_ptr<const TuningGpu> gpu = pipeline_->gpu();
  return gpu ? gpu->device.name : "";
}

std::string ServiceNode::no_gpu_reason() const { return pipeline_->no_gpu_reason(); }

std::optional<std::string> ServiceNode::TuningUnavailable() const {
  if (pipeline_->gpu() == nullptr) {
    std::string why = pipeline_->no_gpu_reason();
    if (!why.empty()) return why;  // Else a GPU was attached just now.
  }
  return runner_->Unavailable();
}

}  // namespace kfuse
