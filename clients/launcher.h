// Launches a kfuse::v1::KernelPlan on the caller's tensors, following the
// launch contract every client follows: symbols bound from input shapes,
// every precondition checked (a launch that would break one is refused),
// scratch allocated, tensor maps built, kernels launched in order on one
// stream. The pure checks live in clients/launch_config.h.
//
//   KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
//   Launcher launcher(*cu);
//   std::vector<DeviceBuffer> in = {{a, {n}, {}, DType::kF32}, {b, {n}, {}, DType::kF32}};
//   std::vector<DeviceBuffer> out = {{y, {n}, {}, DType::kF32}};
//   KFUSE_RETURN_IF_ERROR(launcher.Launch(plan, in, out, stream));
//
// Thread safe: one Launcher may serve many threads and contexts; modules are
// cached per (current context, sha256 of the cubin) and loaded once.
#ifndef KFUSE_CLIENTS_LAUNCHER_H_
#define KFUSE_CLIENTS_LAUNCHER_H_

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "clients/launch_config.h"
#include "kfuse/v1/kfuse.pb.h"
#include "plan/signing.h"
#include "tuner/cuda/driver.h"

namespace kfuse {

// Scratch memory (intermediates, workspaces) from the caller, e.g. a
// framework's caching allocator. `free` is called once the launches are
// enqueued, so the allocator must be stream-ordered (reuse only after the
// stream passes that point), as PyTorch's is.
struct ScratchAllocator {
  std::function<absl::StatusOr<CUdeviceptr>(size_t bytes, CUstream stream)> alloc;
  std::function<void(CUdeviceptr ptr, CUstream stream)> free;
};

// The functions of a plan's kernels, loaded in the context current when
// Prepare ran; valid while the Launcher lives.
struct PreparedPlan {
  const v1::KernelPlan* plan = nullptr;  // Not owned; must outlive this.
  std::vector<CUfunction> functions;     // One per plan.kernels.
};

class Launcher {
 public:
  // `api` must outlive the Launcher. Without `scratch`, scratch memory comes
  // from a stream-ordered pool the Launcher owns, one per device
  // (cuMemAllocFromPoolAsync, freed with cuMemFreeAsync behind the kernels:
  // no wait). The pool keeps what it reserved until the Launcher goes, so a
  // launch after a synchronize reuses it; the device's default pool returns
  // its memory at every synchronize, and each later allocation maps it anew.
  // Where the device has no memory pools, scratch comes from cuMemAlloc,
  // and the launch waits for the stream before freeing it.
  // With `pinned_key`, a plan whose signature does not verify against it is
  // refused (PermissionDenied) before any module is loaded.
  explicit Launcher(const DriverApi& api, ScratchAllocator scratch = {},
                    std::optional<PublicKey> pinned_key = std::nullopt);
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Loads (once) the plan's modules in the current context: the cubin, or
  // the PTX when the driver cannot load the cubin (a newer GPU).
  absl::StatusOr<PreparedPlan> Prepare(const v1::KernelPlan& plan);

  // Prepare + Launch(prepared, ...). A context must be current.
  // InvalidArgument: the buffers do not match the plan (names the tensor and
  // the symbol). FailedPrecondition: a precondition fails (quotes it).
  // Internal / ResourceExhausted: the driver refused (names the call).
  absl::Status Launch(const v1::KernelPlan& plan, absl::Span<const DeviceBuffer> inputs,
                      absl::Span<const DeviceBuffer> outputs, CUstream stream);
  absl::Status Launch(const PreparedPlan& prepared, absl::Span<const DeviceBuffer> inputs,
                      absl::Span<const DeviceBuffer> outputs, CUstream stream);

  // Modules loaded so far (all contexts); for tests.
  int cached_modules() const;

 private:
  struct Module {
    CUcontext ctx = nullptr;
    CUmodule module = nullptr;
    std::map<std::string, CUfunction> functions;
  };

  // Scratch of one Launch: from the caller's allocator or the Launcher's pool
  // (`ordered`), or from cuMemAlloc (`waited`: freed after the stream).
  struct Scratch {
    std::vector<CUdeviceptr> ordered, waited;
  };
  absl::StatusOr<CUdeviceptr> AllocScratch(int64_t bytes, CUstream stream, Scratch& s,
                                           const char* what);
  // The current context's device's pool, made on first use; nullptr where
  // the device has no memory pools.
  absl::StatusOr<CUmemoryPool> Pool();
  absl::StatusOr<CUfunction> Function(CUcontext ctx, const v1::Kernel& kernel);
  std::optional<PublicKey> pinned_key_;
  absl::Status RaiseSmemLimit(CUfunction f, uint32_t bytes);
  absl::Status LaunchOne(CUfunction f, const KernelLaunch& launch, absl::Span<const CUdeviceptr> in,
                         absl::Span<const CUdeviceptr> out,
                         absl::Span<const CUdeviceptr> intermediates,
                         Scratch& scratch, CUstream stream);

  const DriverApi& api_;
  ScratchAllocator scratch_;
  mutable absl::Mutex mu_;
  // (context, sha256 of the cubin) -> module.
  std::map<std::pair<CUcontext, std::string>, Module> modules_ ABSL_GUARDED_BY(mu_);
  // The dynamic shared memory each function's limit was raised to.
  std::map<CUfunction, uint32_t> smem_limit_ ABSL_GUARDED_BY(mu_);
  // Scratch pools by device (nullptr: the device has none).
  std::map<CUdevice, CUmemoryPool> pools_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kfuse

#endif  // KFUSE_CLIENTS_LAUNCHER_H_
