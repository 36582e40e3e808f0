#include "tuner/worker_launch.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "tuner/cuda/driver.h"

namespace kfuse {
namespace {

absl::StatusOr<unsigned> EvalDim(const SizeExpr& e, absl::Span<const int64_t> symbols, int64_t max,
                                 const char* what) {
  absl::StatusOr<int64_t> v = e.Eval(symbols);
  if (!v.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", e.ToString(), ": ", v.status().message()));
  }
  if (*v < 1 || *v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", e.ToString(), " = ", *v, " is outside [1, ", max, "]"));
  }
  return static_cast<unsigned>(*v);
}

}  // namespace

absl::StatusOr<LoadedKernel> LoadedKernel::Load(const CompiledKernel& k) {
  KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
  if (k.cubin.empty() && k.ptx.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel ", k.spec.entry, " has no cubin or PTX"));
  }
  LoadedKernel out;
  std::string ptx;  // NUL-terminated copy: cuModuleLoadData reads PTX as a C string.
  const void* image = k.cubin.data();
  if (k.cubin.empty()) {
    ptx = k.ptx;
    image = ptx.c_str();
  }
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuModuleLoadData(&out.module_, image),
                                "cuModuleLoadData (cubin for another GPU?)"));
  KFUSE_RETURN_IF_ERROR(CuCheck(
      cu->cuModuleGetFunction(&out.fn_, out.module_, k.spec.entry.c_str()), "cuModuleGetFunction"));
  // Static and dynamic shared memory together may pass 48 KiB only under a
  // raised dynamic limit: set it for every kernel that has dynamic memory.
  if (k.spec.dynamic_smem_bytes > 0) {
    KFUSE_RETURN_IF_ERROR(
        CuCheck(cu->cuFuncSetAttribute(out.fn_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       static_cast<int>(k.spec.dynamic_smem_bytes)),
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"));
  }
  if (k.spec.cluster_x > 0) {
    // Clusters beyond the portable size of 8 need this opt-in.
    cu->cuFuncSetAttribute(out.fn_, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
  }
  return out;
}

LoadedKernel& LoadedKernel::operator=(LoadedKernel&& o) noexcept {
  if (this != &o) {
    this->~LoadedKernel();
    module_ = o.module_;
    fn_ = o.fn_;
    o.module_ = nullptr;
  }
  return *this;
}

LoadedKernel::~LoadedKernel() {
  if (module_ != nullptr) (*LoadDriver())->cuModuleUnload(module_);
  module_ = nullptr;
}

absl::StatusOr<LaunchDims> EvalLaunchDims(const KernelSpec& spec, absl::Span<const int64_t> symbols) {
  LaunchDims l;
  const SizeExpr* g[3] = {&spec.grid.x, &spec.grid.y, &spec.grid.z};
  const SizeExpr* b[3] = {&spec.block.x, &spec.block.y, &spec.block.z};
  for (int i = 0; i < 3; ++i) {
    KFUSE_ASSIGN_OR_RETURN(l.grid[i], EvalDim(*g[i], symbols, kMaxGridDims[i], "grid"));
    KFUSE_ASSIGN_OR_RETURN(l.block[i], EvalDim(*b[i], symbols, kMaxBlockDims[i], "block"));
  }
  if (int64_t{l.block[0]} * l.block[1] * l.block[2] > kMaxBlockThreads) {
    return absl::InvalidArgumentError(absl::StrCat("block has more than ", kMaxBlockThreads, " threads"));
  }
  return l;
}

absl::StatusOr<BoundLaunch> BindLaunch(const KernelSpec& spec, absl::Span<const int64_t> symbols,
                                       const LaunchBuffers& buffers) {
  BoundLaunch l;
  KFUSE_ASSIGN_OR_RETURN(LaunchDims dims, EvalLaunchDims(spec, symbols));
  std::copy(dims.grid, dims.grid + 3, l.grid);
  std::copy(dims.block, dims.block + 3, l.block);
  l.dynamic_smem = spec.dynamic_smem_bytes;
  if (spec.cluster_x > 0) {
    l.cluster[0] = spec.cluster_x;
    l.cluster[1] = std::max(1u, spec.cluster_y);
    l.cluster[2] = std::max(1u, spec.cluster_z);
  }
  l.slots.resize(spec.params.size());
  for (size_t i = 0; i < spec.params.size(); ++i) {
    const KernelParam& p = spec.params[i];
    uint64_t& slot = l.slots[i];
    switch (p.kind) {
      case KernelParam::Kind::kBuffer: {
        const std::vector<CUdeviceptr>* list = nullptr;
        if (p.buffer.kind == BufferRef::Kind::kInput) list = &buffers.inputs;
        if (p.buffer.kind == BufferRef::Kind::kOutput) list = &buffers.outputs;
        if (list == nullptr || p.buffer.index >= list->size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("param ", i, " names a buffer the task does not have (kind ",
                           static_cast<int>(p.buffer.kind), ", index ", p.buffer.index, ")"));
        }
        slot = (*list)[p.buffer.index];
        break;
      }
      case KernelParam::Kind::kScalar: {
        absl::StatusOr<int64_t> v = p.value.Eval(symbols);
        if (!v.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("param ", i, ": ", v.status().message()));
        }
        if (p.scalar_dtype == DType::kI32) {
          if (*v < INT32_MIN || *v > INT32_MAX) {
            return absl::InvalidArgumentError(
                absl::StrCat("param ", i, " = ", *v, " overflows int32"));
          }
          auto v32 = static_cast<int32_t>(*v);
          slot = 0;
          std::memcpy(&slot, &v32, 4);
        } else if (p.scalar_dtype == DType::kI64) {
          std::memcpy(&slot, &*v, 8);
        } else {
          return absl::InvalidArgumentError(
              absl::StrCat("param ", i, ": scalar dtype must be i32 or i64"));
        }
        break;
      }
      case KernelParam::Kind::kWorkspace: {
        absl::StatusOr<int64_t> bytes = p.workspace_bytes.Eval(symbols);
        if (!bytes.ok() || *bytes < 0) {
          return absl::InvalidArgumentError(absl::StrCat("param ", i, ": bad workspace size"));
        }
        KFUSE_ASSIGN_OR_RETURN(DeviceBuffer w, DeviceBuffer::Alloc(static_cast<size_t>(*bytes)));
        slot = w.ptr();
        if (p.workspace_zeroed) l.zeroed_workspaces.push_back(l.workspaces.size());
        l.workspaces.push_back(std::move(w));
        break;
      }
      case KernelParam::Kind::kTensorMap:
        return absl::InvalidArgumentError(
            absl::StrCat("param ", i, ": tensor-map params are not supported by the runner yet"));
    }
  }
  for (uint64_t& s : l.slots) l.args.push_back(&s);
  return l;
}

CUresult LaunchOn(const LoadedKernel& k, BoundLaunch& l, CUstream stream) {
  const DriverApi* cu = *LoadDriver();
  for (size_t w : l.zeroed_workspaces) {
    const DeviceBuffer& b = l.workspaces[w];
    if (b.bytes() == 0) continue;
    CUresult r = cu->cuMemsetD8Async(b.ptr(), 0, b.bytes(), stream);
    if (r != CUDA_SUCCESS) return r;
  }
  void** args = l.args.empty() ? nullptr : l.args.data();
  if (l.cluster[0] == 0) {
    return cu->cuLaunchKernel(k.function(), l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                              l.block[2], l.dynamic_smem, stream, args, nullptr);
  }
  CUlaunchAttribute attr = {};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = l.cluster[0];
  attr.value.clusterDim.y = l.cluster[1];
  attr.value.clusterDim.z = l.cluster[2];
  CUlaunchConfig cfg = {};
  cfg.gridDimX = l.grid[0];
  cfg.gridDimY = l.grid[1];
  cfg.gridDimZ = l.grid[2];
  cfg.blockDimX = l.block[0];
  cfg.blockDimY = l.block[1];
  cfg.blockDimZ = l.block[2];
  cfg.sharedMemBytes = l.dynamic_smem;
  cfg.hStream = stream;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cu->cuLaunchKernelEx(&cfg, k.function(), args, nullptr);
}

}  // namespace kfuse
