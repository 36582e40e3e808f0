// The launch contract: what a client needs to launch a generated kernel, in
// value types free of protobuf. service/ converts it to kfuse.v1.KernelPlan;
// the generators produce it; the launcher and the tuner's runner follow it.
#ifndef KFUSE_CORE_LAUNCH_H_
#define KFUSE_CORE_LAUNCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/expr.h"
#include "core/variant.h"

namespace kfuse {

// CUDA's launch limits (every GPU kfuse targets): grid x, y, z; block x,
// y, z; threads a block.
inline constexpr int64_t kMaxGridDims[3] = {(int64_t{1} << 31) - 1, 65535, 65535};
inline constexpr int64_t kMaxBlockDims[3] = {1024, 1024, 64};
inline constexpr int64_t kMaxBlockThreads = 1024;

struct BufferRef {
  enum class Kind : uint8_t { kInput, kOutput, kIntermediate };
  Kind kind = Kind::kInput;
  uint32_t index = 0;
  friend bool operator==(const BufferRef& a, const BufferRef& b) {
    return a.kind == b.kind && a.index == b.index;
  }
};

struct TensorMapSpec {
  BufferRef buffer;
  DType dtype = DType::kInvalid;
  std::vector<SizeExpr> global_dims;     // Innermost first.
  std::vector<SizeExpr> global_strides;  // Bytes, dims 1.. .
  std::vector<uint32_t> box_dims;
  int swizzle_bytes = 0;  // 0, 32, 64 or 128.
};

struct KernelParam {
  enum class Kind : uint8_t { kBuffer, kScalar, kTensorMap, kWorkspace };
  Kind kind = Kind::kBuffer;
  BufferRef buffer;                      // kBuffer.
  SizeExpr value;                        // kScalar.
  DType scalar_dtype = DType::kI64;      // kScalar: kI32 or kI64.
  TensorMapSpec tensor_map;              // kTensorMap.
  SizeExpr workspace_bytes;              // kWorkspace.
  bool workspace_zeroed = false;

  static KernelParam Buffer(BufferRef b) {
    KernelParam p;
    p.kind = Kind::kBuffer;
    p.buffer = b;
    return p;
  }
  static KernelParam Scalar(SizeExpr v, DType t) {
    KernelParam p;
    p.kind = Kind::kScalar;
    p.value = std::move(v);
    p.scalar_dtype = t;
    return p;
  }
};

struct Precondition {
  enum class Kind : uint8_t { kAligned = 1, kContiguous = 2, kAtMost = 3, kDivisible = 4, kAtLeast = 5 };
  Kind kind = Kind::kAligned;
  BufferRef buffer;  // kAligned, kContiguous.
  SizeExpr expr;     // kAtMost, kDivisible, kAtLeast.
  int64_t value = 0;
  std::string description;  // "input 0 is 16-byte aligned (vector loads)".
};

struct Resources {
  uint32_t registers = 0;
  uint32_t spill_bytes = 0;
  uint32_t static_smem_bytes = 0;
  uint32_t local_bytes = 0;
};

// One kernel of a plan, before or after compilation.
struct KernelSpec {
  std::string entry;   // Made by the generator, never from client text.
  std::string source;  // CUDA C++ for NVRTC.
  std::vector<KernelParam> params;
  Dim3Expr grid;
  Dim3Expr block;
  uint32_t dynamic_smem_bytes = 0;
  uint32_t cluster_x = 0, cluster_y = 0, cluster_z = 0;  // 0: no cluster.
  std::vector<Precondition> preconditions;
  Variant variant;
  std::vector<uint32_t> ops;  // Chain node ids this kernel computes.
  std::string partition_reason;
};

// A compiled kernel.
struct CompiledKernel {
  KernelSpec spec;
  std::string arch;  // "sm_90a".
  std::string cubin;
  std::string ptx;
  Resources resources;
  std::string log;
  double compile_seconds = 0;
};

struct IntermediateBuffer {
  DType dtype = DType::kInvalid;
  std::vector<SizeExpr> shape;
};

}  // namespace kfuse

#endif  // KFUSE_CORE_LAUNCH_H_
