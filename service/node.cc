#include "service/node.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/status.h"
#include "kfuse/v1/kfuse.pb.h"
#include "service/convert.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"
#include "tuner/worker_process.h"
#include "tuner/nvrtc_compiler.h"

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

// Ceilings are measured once per device and kept in the store.
Ceilings StoredOrMeasuredCeilings(Store& store, Runner& runner, const DeviceFingerprint& device) {
  CacheKey key{"ceilings", "v1", device.Digest(), "", "ceilings/1"};
  auto blob = store.GetDecision(key);
  v1::Ceilings stored;
  if (blob.ok() && blob->has_value() && stored.ParseFromString(**blob) && stored.measured()) {
    Ceilings c = FromProto(stored);
    c.source = absl::StrCat("measured on ", device.name);
    return c;
  }
  absl::StatusOr<Ceilings> measured = runner.MeasureCeilings();
  if (!measured.ok()) {
    std::fprintf(stderr, "kfused: warning: measuring ceilings failed (%s); using nominal figures\n",
                 measured.status().ToString().c_str());
    return NominalCeilings(device.compute_capability());
  }
  measured->measured = true;
  measured->source = absl::StrCat("measured on ", device.name);
  EntryMeta meta{"ceilings", "", device.name, "measured", "device ceilings"};
  absl::Status s = store.PutDecision(key, ToProto(*measured).SerializeAsString(), meta);
  if (!s.ok()) std::fprintf(stderr, "kfused: warning: storing ceilings: %s\n", s.ToString().c_str());
  return *measured;
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

absl::StatusOr<SigningKey> LoadNodeSigningKey(const NodeOptions& o, std::string* path) {
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
  return LoadOrCreateSigningKey(key_path, /*create=*/o.signing_key_path.empty());
}

absl::StatusOr<std::unique_ptr<ServiceNode>> ServiceNode::Create(const NodeOptions& o) {
  std::unique_ptr<ServiceNode> n(new ServiceNode());
  n->store_path_ = o.store_path;
  if (n->store_path_.empty()) {
    KFUSE_ASSIGN_OR_RETURN(n->store_path_, DefaultStorePath());
  }
  NodeOptions key_options = o;
  key_options.store_path = n->store_path_;
  KFUSE_ASSIGN_OR_RETURN(n->signing_key_, LoadNodeSigningKey(key_options, &n->signing_key_path_));
  StoreOptions so;
  so.path = n->store_path_;
  so.max_bytes = o.store_max_bytes;
  so.read_only = o.read_only;
  KFUSE_ASSIGN_OR_RETURN(n->store_, Store::Open(so));
  n->compiler_ = std::make_unique<NvrtcCompiler>();

  PipelineDeps deps;
  deps.compiler = n->compiler_.get();
  deps.store = n->store_.get();
  PipelineOptions po;
  po.node = o.node.empty() ? Hostname() : o.node;
  po.read_only = o.read_only;
  absl::StatusOr<const DriverApi*> driver = o.no_gpu ? nullptr : LoadDriver();
  if (o.no_gpu) {
    n->no_gpu_reason_ = "tuning disabled (--no_gpu)";
  } else if (!driver.ok()) {
    n->no_gpu_reason_ = std::string(driver.status().message());
  } else if (DeviceCount() == 0) {
    n->no_gpu_reason_ = "the NVIDIA driver is loaded but sees no GPU";
  } else {
    WorkerOptions wo;
    wo.device = o.device;
    wo.memory_budget_bytes = o.gpu_memory_budget;
    wo.worker_path = o.worker_path.empty() ? DefaultWorkerPath() : o.worker_path;
    absl::StatusOr<std::unique_ptr<WorkerRunner>> runner = WorkerRunner::Create(wo);
    if (runner.ok()) {
      absl::StatusOr<DeviceFingerprint> dev = (*runner)->Device();
      if (dev.ok()) {
        deps.device = *dev;
        deps.ceilings = StoredOrMeasuredCeilings(*n->store_, **runner, *dev);
        n->runner_ = std::move(*runner);
        deps.runner = n->runner_.get();
        if (auto v = DriverVersion(); v.ok()) po.driver_version = *v;
      } else {
        n->no_gpu_reason_ = std::string(dev.status().message());
      }
    } else {
      n->no_gpu_reason_ = std::string(runner.status().message());
    }
  }
  po.no_gpu_reason = n->no_gpu_reason_;
  po.repro_dir = absl::StrReplaceAll(o.repro_dir, {{"<store>", n->store_path_}});
  po.repro_limits.max_bundles = o.repro_max_bundles;
  n->pipeline_ = std::make_unique<Pipeline>(std::move(deps), std::move(po));
  return n;
}

std::string ServiceNode::device_name() const {
  const auto& d = pipeline_->deps().device;
  return d ? d->name : "";
}

}  // namespace kfuse
