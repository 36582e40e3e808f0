// Loading a compiled kernel and launching it by the launch contract
// (core/launch.h): grid, block and scalars evaluated over the symbol values,
// buffer params bound to device pointers, dynamic shared memory and clusters
// honoured, so one code path serves every family.
//
//   KFUSE_ASSIGN_OR_RETURN(LoadedKernel k, LoadedKernel::Load(compiled));
//   KFUSE_ASSIGN_OR_RETURN(BoundLaunch l, BindLaunch(compiled.spec, symbols, buffers));
//   CUresult r = LaunchOn(k, l, stream);
#ifndef KFUSE_TUNER_WORKER_LAUNCH_H_
#define KFUSE_TUNER_WORKER_LAUNCH_H_

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/launch.h"
#include "tuner/worker_buffers.h"

namespace kfuse {

class LoadedKernel {
 public:
  // Loads the cubin (or the PTX when there is no cubin) into the current
  // context and finds spec.entry; raises the dynamic shared memory limit when
  // the kernel asks for more than the 48 KB default.
  static absl::StatusOr<LoadedKernel> Load(const CompiledKernel& k);
  LoadedKernel() = default;
  LoadedKernel(LoadedKernel&& o) noexcept : module_(o.module_), fn_(o.fn_) { o.module_ = nullptr; }
  LoadedKernel& operator=(LoadedKernel&& o) noexcept;
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;
  ~LoadedKernel();
  CUfunction function() const { return fn_; }

 private:
  CUmodule module_ = nullptr;
  CUfunction fn_ = nullptr;
};

struct LaunchBuffers {
  std::vector<CUdeviceptr> inputs, outputs;
};

// A launch with every value bound. Owns its workspaces.
struct BoundLaunch {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned dynamic_smem = 0;
  unsigned cluster[3] = {0, 0, 0};
  std::vector<uint64_t> slots;  // One 8-byte slot per param; int32 in the low half.
  std::vector<void*> args;      // Pointers into slots, as cuLaunchKernel wants.
  std::vector<DeviceBuffer> workspaces;
  std::vector<size_t> zeroed_workspaces;  // Indices into workspaces.
};

struct LaunchDims {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
};

// The grid and block at `symbols`, each within CUDA's limits (core/launch.h)
// and at least 1; InvalidArgument naming the dimension otherwise. No GPU
// needed.
absl::StatusOr<LaunchDims> EvalLaunchDims(const KernelSpec& spec, absl::Span<const int64_t> symbols);

// InvalidArgument for an unevaluable or out-of-range dimension, a buffer param
// naming a missing buffer, an intermediate buffer, or a tensor-map param (not
// supported by the runner yet).
absl::StatusOr<BoundLaunch> BindLaunch(const KernelSpec& spec, absl::Span<const int64_t> symbols,
                                       const LaunchBuffers& buffers);

// Zeroes the workspaces that need it, then launches (cuLaunchKernelEx when
// the spec has cluster dims). Asynchronous: errors from the kernel itself
// show up at the next synchronization.
CUresult LaunchOn(const LoadedKernel& k, BoundLaunch& l, CUstream stream);

}  // namespace kfuse

#endif  // KFUSE_TUNER_WORKER_LAUNCH_H_
