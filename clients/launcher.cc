#include "clients/launcher.h"

#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "core/key.h"
#include "core/status.h"

namespace kfuse {
namespace {

// Errors after which the driver may still JIT the PTX.
bool CubinUnusable(CUresult r) {
  return r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE ||
         r == CUDA_ERROR_INVALID_SOURCE || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION ||
         r == CUDA_ERROR_NOT_SUPPORTED;
}

absl::StatusOr<CUtensorMapDataType> MapType(DType t) {
  switch (t) {
    case DType::kF32:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case DType::kF16:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case DType::kBF16:
      return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case DType::kI32:
      return CU_TENSOR_MAP_DATA_TYPE_INT32;
    case DType::kBool:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case DType::kI64:
      return CU_TENSOR_MAP_DATA_TYPE_INT64;
    case DType::kF64:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
    default:
      break;
  }
  return absl::InvalidArgumentError("tensor map of an invalid dtype");
}

CUtensorMapSwizzle MapSwizzle(int s) {
  switch (s) {
    case v1::TensorMapSpec::SWIZZLE_32B:
      return CU_TENSOR_MAP_SWIZZLE_32B;
    case v1::TensorMapSpec::SWIZZLE_64B:
      return CU_TENSOR_MAP_SWIZZLE_64B;
    case v1::TensorMapSpec::SWIZZLE_128B:
      return CU_TENSOR_MAP_SWIZZLE_128B;
    default:
      return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

CUdeviceptr Pointer(BufferSlot s, absl::Span<const CUdeviceptr> in,
                    absl::Span<const CUdeviceptr> out, absl::Span<const CUdeviceptr> mid) {
  switch (s.kind) {
    case BufferKind::kInput:
      return in[s.index];
    case BufferKind::kOutput:
      return out[s.index];
    case BufferKind::kIntermediate:
      return mid[s.index];
  }
  return 0;
}

}  // namespace

Launcher::Launcher(const DriverApi& api, ScratchAllocator scratch,
                   std::optional<PublicKey> pinned_key)
    : pinned_key_(std::move(pinned_key)), api_(api), scratch_(std::move(scratch)) {}

Launcher::~Launcher() {
  absl::MutexLock lock(&mu_);
  // Best effort: a context destroyed before us took its modules with it.
  for (auto& [key, m] : modules_) api_.cuModuleUnload(m.module);
  // Memory freed behind kernels still queued goes back once they finish.
  for (auto& [device, pool] : pools_) {
    if (pool != nullptr) api_.cuMemPoolDestroy(pool);
  }
}

absl::StatusOr<CUmemoryPool> Launcher::Pool() {
  CUdevice device = 0;
  KFUSE_RETURN_IF_ERROR(CuCheck(api_.cuCtxGetDevice(&device), "cuCtxGetDevice"));
  absl::MutexLock lock(&mu_);
  auto it = pools_.find(device);
  if (it != pools_.end()) return it->second;
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device;
  CUmemoryPool pool = nullptr;
  const CUresult r = api_.cuMemPoolCreate(&pool, &props);
  if (r == CUDA_ERROR_NOT_SUPPORTED) {
    pools_[device] = nullptr;
    return nullptr;
  }
  KFUSE_RETURN_IF_ERROR(CuCheck(r, "cuMemPoolCreate (kfuse scratch)"));
  // Kept reserved across synchronizes: scratch is asked for at every launch.
  cuuint64_t keep = ~cuuint64_t{0};
  const CUresult t = api_.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
  if (t != CUDA_SUCCESS) {
    api_.cuMemPoolDestroy(pool);
    return CuCheck(t, "cuMemPoolSetAttribute(RELEASE_THRESHOLD)");
  }
  pools_[device] = pool;
  return pool;
}

int Launcher::cached_modules() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(modules_.size());
}

absl::StatusOr<CUfunction> Launcher::Function(CUcontext ctx, const v1::Kernel& kernel) {
  if (kernel.cubin().empty() && kernel.ptx().empty())
    return absl::InvalidArgumentError(
        absl::StrCat("kernel '", kernel.entry(), "' has no cubin or PTX"));
  // Hash outside the lock: the cubin is tens of KB.
  std::string digest = Sha256Hex(kernel.cubin().empty() ? kernel.ptx() : kernel.cubin());
  absl::MutexLock lock(&mu_);
  auto key = std::make_pair(ctx, digest);
  auto it = modules_.find(key);
  if (it == modules_.end()) {
    CUmodule mod = nullptr;
    CUresult r = kernel.cubin().empty() ? CUDA_ERROR_NO_BINARY_FOR_GPU
                                        : api_.cuModuleLoadData(&mod, kernel.cubin().data());
    if (r != CUDA_SUCCESS && CubinUnusable(r) && !kernel.ptx().empty()) {
      // The driver needs a NUL-terminated PTX image.
      std::string ptx = kernel.ptx();
      r = api_.cuModuleLoadData(&mod, ptx.c_str());
    }
    KFUSE_RETURN_IF_ERROR(
        CuCheck(r, absl::StrCat("cuModuleLoadData (kernel for ", kernel.arch(), ")").c_str()));
    it = modules_.emplace(key, Module{ctx, mod, {}}).first;
  }
  Module& m = it->second;
  auto fit = m.functions.find(kernel.entry());
  if (fit != m.functions.end()) return fit->second;
  CUfunction f = nullptr;
  KFUSE_RETURN_IF_ERROR(CuCheck(api_.cuModuleGetFunction(&f, m.module, kernel.entry().c_str()),
                                "cuModuleGetFunction"));
  m.functions[kernel.entry()] = f;
  return f;
}

absl::StatusOr<PreparedPlan> Launcher::Prepare(const v1::KernelPlan& plan) {
  // Nothing from an unverified plan reaches the driver.
  if (pinned_key_) KFUSE_RETURN_IF_ERROR(VerifyPlanSignature(plan, *pinned_key_));
  CUcontext ctx = nullptr;
  KFUSE_RETURN_IF_ERROR(CuCheck(api_.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent"));
  if (ctx == nullptr)
    return absl::FailedPreconditionError("no CUDA context is current on this thread");
  PreparedPlan p;
  p.plan = &plan;
  for (const v1::Kernel& k : plan.kernels()) {
    KFUSE_ASSIGN_OR_RETURN(CUfunction f, Function(ctx, k));
    p.functions.push_back(f);
  }
  return p;
}

absl::Status Launcher::Launch(const v1::KernelPlan& plan, absl::Span<const DeviceBuffer> inputs,
                              absl::Span<const DeviceBuffer> outputs, CUstream stream) {
  KFUSE_ASSIGN_OR_RETURN(PreparedPlan prepared, Prepare(plan));
  return Launch(prepared, inputs, outputs, stream);
}

absl::Status Launcher::RaiseSmemLimit(CUfunction f, uint32_t bytes) {
  // Static and dynamic shared memory together may pass 48 KiB only under a
  // raised dynamic limit: any kernel with dynamic memory gets it set.
  if (bytes == 0) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  uint32_t& raised = smem_limit_[f];
  if (raised >= bytes) return absl::OkStatus();
  KFUSE_RETURN_IF_ERROR(
      CuCheck(api_.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      static_cast<int>(bytes)),
              "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)"));
  raised = bytes;
  return absl::OkStatus();
}

absl::Status Launcher::Launch(const PreparedPlan& prepared, absl::Span<const DeviceBuffer> inputs,
                              absl::Span<const DeviceBuffer> outputs, CUstream stream) {
  KFUSE_CHECK(prepared.plan != nullptr);
  KFUSE_ASSIGN_OR_RETURN(LaunchConfig cfg, ResolveLaunch(*prepared.plan, inputs, outputs));
  std::vector<CUdeviceptr> in, out, mid;
  Scratch scratch;
  for (const DeviceBuffer& b : inputs) in.push_back(b.ptr);
  for (const DeviceBuffer& b : outputs) out.push_back(b.ptr);

  bool launched = false;
  // Scratch is released on every path, stream-ordered where it can be;
  // cuMemAlloc'd scratch only once the stream has run past the kernels.
  auto release = absl::MakeCleanup([&] {
    for (CUdeviceptr p : scratch.ordered) {
      if (scratch_.free) {
        scratch_.free(p, stream);
      } else {
        api_.cuMemFreeAsync(p, stream);
      }
    }
    if (scratch.waited.empty()) return;
    if (launched) api_.cuStreamSynchronize(stream);
    for (CUdeviceptr p : scratch.waited) api_.cuMemFree(p);
  });
  for (int64_t bytes : cfg.intermediate_bytes) {
    KFUSE_ASSIGN_OR_RETURN(CUdeviceptr p, AllocScratch(bytes, stream, scratch, "scratch"));
    mid.push_back(p);
  }
  for (const KernelLaunch& l : cfg.kernels) {
    if (l.empty) continue;
    launched = true;
    KFUSE_RETURN_IF_ERROR(
        LaunchOne(prepared.functions[l.kernel], l, in, out, mid, scratch, stream));
  }
  return absl::OkStatus();
}

absl::StatusOr<CUdeviceptr> Launcher::AllocScratch(int64_t bytes, CUstream stream,
                                                    Scratch& s, const char* what) {
  CUdeviceptr p = 0;
  const size_t n = static_cast<size_t>(bytes > 0 ? bytes : 1);
  if (scratch_.alloc) {
    KFUSE_ASSIGN_OR_RETURN(p, scratch_.alloc(n, stream));
    s.ordered.push_back(p);
    return p;
  }
  KFUSE_ASSIGN_OR_RETURN(CUmemoryPool pool, Pool());
  if (pool != nullptr) {
    KFUSE_RETURN_IF_ERROR(
        CuCheck(api_.cuMemAllocFromPoolAsync(&p, n, pool, stream),
                absl::StrCat("cuMemAllocFromPoolAsync (kfuse ", what, ")").c_str()));
    s.ordered.push_back(p);
    return p;
  }
  // A device without memory pools.
  KFUSE_RETURN_IF_ERROR(
      CuCheck(api_.cuMemAlloc(&p, n), absl::StrCat("cuMemAlloc (kfuse ", what, ")").c_str()));
  s.waited.push_back(p);
  return p;
}

absl::Status Launcher::LaunchOne(CUfunction f, const KernelLaunch& l,
                                 absl::Span<const CUdeviceptr> in,
                                 absl::Span<const CUdeviceptr> out,
                                 absl::Span<const CUdeviceptr> mid, Scratch& scratch,
                                 CUstream stream) {
  const size_t n = l.params.size();
  // Sized up front: kernelParams points into these, so they never reallocate.
  std::vector<uint64_t> words(n, 0);
  std::vector<CUtensorMap> maps(n);
  std::vector<void*> args(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    const ResolvedParam& p = l.params[i];
    switch (p.kind) {
      case v1::Param::KIND_BUFFER:
        words[i] = Pointer(p.buffer, in, out, mid);
        args[i] = &words[i];
        break;
      case v1::Param::KIND_SCALAR:
        if (p.scalar_dtype == DType::kI32) {
          int32_t v = static_cast<int32_t>(p.scalar);
          std::memcpy(&words[i], &v, sizeof(v));
        } else {
          std::memcpy(&words[i], &p.scalar, sizeof(p.scalar));
        }
        args[i] = &words[i];
        break;
      case v1::Param::KIND_WORKSPACE: {
        size_t bytes = static_cast<size_t>(p.workspace_bytes > 0 ? p.workspace_bytes : 1);
        KFUSE_ASSIGN_OR_RETURN(CUdeviceptr w,
                               AllocScratch(p.workspace_bytes, stream, scratch, "workspace"));
        if (p.workspace_zeroed)
          KFUSE_RETURN_IF_ERROR(
              CuCheck(api_.cuMemsetD8Async(w, 0, bytes, stream), "cuMemsetD8Async"));
        words[i] = w;
        args[i] = &words[i];
        break;
      }
      case v1::Param::KIND_TENSOR_MAP: {
        KFUSE_ASSIGN_OR_RETURN(CUtensorMapDataType t, MapType(p.map_dtype));
        std::vector<cuuint64_t> dims(p.map_dims.begin(), p.map_dims.end());
        std::vector<cuuint64_t> strides(p.map_strides.begin(), p.map_strides.end());
        std::vector<cuuint32_t> box(p.map_box.begin(), p.map_box.end());
        std::vector<cuuint32_t> elem(dims.size(), 1);
        void* base = reinterpret_cast<void*>(Pointer(p.buffer, in, out, mid));
        KFUSE_RETURN_IF_ERROR(CuCheck(
            api_.cuTensorMapEncodeTiled(&maps[i], t, static_cast<cuuint32_t>(dims.size()), base,
                                        dims.data(), strides.data(), box.data(), elem.data(),
                                        CU_TENSOR_MAP_INTERLEAVE_NONE, MapSwizzle(p.map_swizzle),
                                        CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            "cuTensorMapEncodeTiled"));
        args[i] = &maps[i];
        break;
      }
      default:
        KFUSE_CHECK(false);  // ResolveLaunch refuses unknown kinds.
    }
  }
  KFUSE_RETURN_IF_ERROR(RaiseSmemLimit(f, l.dynamic_smem_bytes));
  if (l.cluster[0] == 0) {
    return CuCheck(
        api_.cuLaunchKernel(f, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2],
                            l.dynamic_smem_bytes, stream, args.data(), nullptr),
        "cuLaunchKernel");
  }
  CUlaunchAttribute attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = l.cluster[0];
  attr.value.clusterDim.y = l.cluster[1];
  attr.value.clusterDim.z = l.cluster[2];
  CUlaunchConfig config;
  std::memset(&config, 0, sizeof(config));
  config.gridDimX = l.grid[0];
  config.gridDimY = l.grid[1];
  config.gridDimZ = l.grid[2];
  config.blockDimX = l.block[0];
  config.blockDimY = l.block[1];
  config.blockDimZ = l.block[2];
  config.sharedMemBytes = l.dynamic_smem_bytes;
  config.hStream = stream;
  config.attrs = &attr;
  config.numAttrs = 1;
  return CuCheck(api_.cuLaunchKernelEx(&config, f, args.data(), nullptr), "cuLaunchKernelEx");
}

}  // namespace kfuse
