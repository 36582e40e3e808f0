// The GPU-free half of launching a KernelPlan: binds symbols from the
// caller's tensors, checks dtypes, shapes, strides and every precondition,
// and evaluates grids, blocks and parameters, so that refusals are decided
// (and tested) without a driver. clients/launcher.h does the CUDA half.
//
//   std::vector<DeviceBuffer> in = {{a_ptr, {n}, {}, DType::kF32}};
//   std::vector<DeviceBuffer> out = {{y_ptr, {n}, {}, DType::kF32}};
//   absl::StatusOr<LaunchConfig> cfg = ResolveLaunch(plan, in, out);
//   // InvalidArgument: the buffers do not match the plan (names the tensor).
//   // FailedPrecondition: a precondition fails (quotes its description).
#ifndef KFUSE_CLIENTS_LAUNCH_CONFIG_H_
#define KFUSE_CLIENTS_LAUNCH_CONFIG_H_

#include <cuda.h>

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dtype.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse {

// A tensor in device memory as the caller holds it. Strides are in elements;
// empty means dense row-major.
struct DeviceBuffer {
  CUdeviceptr ptr = 0;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DType dtype = DType::kInvalid;
};

// Evaluates a plan expression with symbol i bound to symbols[i], with the
// semantics of core/expr.h (ceil_div, int64 overflow is an error). Trees
// deeper than 64 levels are refused (a plan is untrusted input).
absl::StatusOr<int64_t> EvalExpr(const v1::Expr& e, absl::Span<const int64_t> symbols);

// Symbol values from the inputs' shapes. Every source of a symbol must agree;
// InvalidArgument names the symbol and the disagreeing sources.
absl::StatusOr<std::vector<int64_t>> BindSymbols(const v1::KernelPlan& plan,
                                                 absl::Span<const DeviceBuffer> inputs);

enum class BufferKind : uint8_t { kInput, kOutput, kIntermediate };
struct BufferSlot {
  BufferKind kind = BufferKind::kInput;
  uint32_t index = 0;
};

// A parameter with every expression evaluated.
struct ResolvedParam {
  v1::Param::Kind kind = v1::Param::KIND_UNSPECIFIED;
  BufferSlot buffer;   // KIND_BUFFER, KIND_TENSOR_MAP.
  int64_t scalar = 0;  // KIND_SCALAR.
  DType scalar_dtype = DType::kI64;
  int64_t workspace_bytes = 0;  // KIND_WORKSPACE.
  bool workspace_zeroed = false;
  // KIND_TENSOR_MAP, as cuTensorMapEncodeTiled takes them.
  DType map_dtype = DType::kInvalid;
  std::vector<uint64_t> map_dims;     // Innermost first.
  std::vector<uint64_t> map_strides;  // Bytes, dims 1..
  std::vector<uint32_t> map_box;
  int map_swizzle = 0;  // v1::TensorMapSpec::Swizzle.
};

struct KernelLaunch {
  int kernel = 0;  // Index into plan.kernels.
  std::array<uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1}, cluster{0, 0, 0};
  uint32_t dynamic_smem_bytes = 0;
  bool empty = false;  // A grid dim is 0 (no elements): nothing to launch.
  std::vector<ResolvedParam> params;
};

struct LaunchConfig {
  std::vector<int64_t> symbols;
  std::vector<int64_t> intermediate_bytes;
  std::vector<KernelLaunch> kernels;
};

// Binds, validates and evaluates everything a launch needs. Intermediates
// are not yet allocated: their alignment is the allocator's (>= 256 bytes).
absl::StatusOr<LaunchConfig> ResolveLaunch(const v1::KernelPlan& plan,
                                           absl::Span<const DeviceBuffer> inputs,
                                           absl::Span<const DeviceBuffer> outputs);

// Element strides of a dense row-major tensor of `shape`.
std::vector<int64_t> DenseStrides(absl::Span<const int64_t> shape);

}  // namespace kfuse

#endif  // KFUSE_CLIENTS_LAUNCH_CONFIG_H_
