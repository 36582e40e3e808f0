// Every CUDA driver entry point kfuse uses, in one table loaded at run time
// (dlopen of libcuda.so.1, symbols through cuGetProcAddress), so every binary
// starts on a machine without a GPU and reports why it cannot tune.
//
//   KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
//   KFUSE_ASSIGN_OR_RETURN(ScopedPrimaryContext ctx, ScopedPrimaryContext::Create(0));
//   CUdeviceptr p;
//   KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuMemAlloc(&p, 1 << 20), "cuMemAlloc"));
#ifndef KFUSE_TUNER_CUDA_DRIVER_H_
#define KFUSE_TUNER_CUDA_DRIVER_H_

#include <cuda.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kfuse {

// X(name, cuda_version): the entry point and the CUDA version whose ABI we
// request from cuGetProcAddress. cuda.h maps some names to *_v2 with macros;
// the member types follow the same macros, and the looked-up name is the
// base name (stringized before expansion), so they always agree.
#define KFUSE_DRIVER_ENTRIES(X)       \
  X(cuInit, 12000)                    \
  X(cuDriverGetVersion, 12000)        \
  X(cuGetErrorString, 12000)          \
  X(cuGetErrorName, 12000)            \
  X(cuDeviceGet, 12000)               \
  X(cuDeviceGetCount, 12000)          \
  X(cuDeviceGetName, 12000)           \
  X(cuDeviceGetAttribute, 12000)      \
  X(cuDeviceTotalMem, 12000)          \
  X(cuDeviceGetUuid, 12000)           \
  X(cuDevicePrimaryCtxRetain, 12000)  \
  X(cuDevicePrimaryCtxRelease, 12000) \
  X(cuCtxSetCurrent, 12000)           \
  X(cuCtxGetCurrent, 12000)           \
  X(cuCtxSynchronize, 12000)          \
  X(cuCtxGetDevice, 12000)            \
  X(cuModuleLoadData, 12000)          \
  X(cuModuleUnload, 12000)            \
  X(cuModuleGetFunction, 12000)       \
  X(cuFuncSetAttribute, 12000)        \
  X(cuFuncGetAttribute, 12000)        \
  X(cuLaunchKernel, 12000)            \
  X(cuLaunchKernelEx, 12000)          \
  X(cuMemAlloc, 12000)                \
  X(cuMemFree, 12000)                 \
  X(cuMemFreeAsync, 12000)            \
  X(cuMemPoolCreate, 12000)           \
  X(cuMemPoolDestroy, 12000)          \
  X(cuMemPoolSetAttribute, 12000)     \
  X(cuMemAllocFromPoolAsync, 12000)   \
  X(cuMemGetInfo, 12000)              \
  X(cuMemcpyHtoD, 12000)              \
  X(cuMemcpyDtoH, 12000)              \
  X(cuMemcpyDtoD, 12000)              \
  X(cuMemcpyDtoDAsync, 12000)         \
  X(cuMemsetD8, 12000)                \
  X(cuMemsetD8Async, 12000)           \
  X(cuMemsetD32, 12000)               \
  X(cuEventCreate, 12000)             \
  X(cuEventRecord, 12000)             \
  X(cuEventSynchronize, 12000)        \
  X(cuEventElapsedTime, 12000)        \
  X(cuEventDestroy, 12000)            \
  X(cuStreamCreate, 12000)            \
  X(cuStreamSynchronize, 12000)       \
  X(cuStreamDestroy, 12000)           \
  X(cuTensorMapEncodeTiled, 12000)

#define KFUSE_DRIVER_MEMBER_(name, version) decltype(&::name) name = nullptr;

// Loaded once per process; every member is non-null once LoadDriver() is OK.
struct DriverApi {
  KFUSE_DRIVER_ENTRIES(KFUSE_DRIVER_MEMBER_)
};

#undef KFUSE_DRIVER_MEMBER_

// The oldest driver whose ABI the table asks for (CUDA 12.0).
inline constexpr int kMinDriverVersion = 12000;

// Process-wide and thread-safe: the first call dlopens libcuda.so.1, resolves
// every entry and runs cuInit(0); later calls return the same result.
// Unavailable (with the reason) when there is no driver, no device, or the
// driver is older than kMinDriverVersion.
absl::StatusOr<const DriverApi*> LoadDriver();

// cuDriverGetVersion (13000 for CUDA 13.0) without resolving the driver's
// table or initializing CUDA: what a client reports about its machine.
// Unavailable without libcuda.so.1. Process-wide, computed once.
absl::StatusOr<int> InstalledDriverVersion();

// OK for CUDA_SUCCESS, else a status naming `what` and the driver's error
// name and text ("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)").
// Out of memory maps to ResourceExhausted, everything else to Internal.
absl::Status CuCheck(CUresult r, const char* what);

// "CUDA_ERROR_ILLEGAL_ADDRESS", or "CUresult 700" without a driver.
const char* CuErrorName(CUresult r);

// True for errors that leave the context unusable (a kernel faulted); the
// process must exit, only a fresh process gets a working context again.
bool IsStickyError(CUresult r);

// Holds a device's primary context (shared with any framework in the same
// process) and makes it current on the creating thread; releases it on
// destruction. Movable, not copyable.
class ScopedPrimaryContext {
 public:
  static absl::StatusOr<ScopedPrimaryContext> Create(int ordinal);
  ScopedPrimaryContext(ScopedPrimaryContext&& other) noexcept;
  ScopedPrimaryContext& operator=(ScopedPrimaryContext&& other) noexcept;
  ScopedPrimaryContext(const ScopedPrimaryContext&) = delete;
  ScopedPrimaryContext& operator=(const ScopedPrimaryContext&) = delete;
  ~ScopedPrimaryContext();

  CUdevice device() const { return device_; }
  CUcontext context() const { return ctx_; }
  // Makes the context current on the calling thread.
  absl::Status MakeCurrent() const;

 private:
  ScopedPrimaryContext(CUdevice d, CUcontext c) : device_(d), ctx_(c) {}
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
};

}  // namespace kfuse

#endif  // KFUSE_TUNER_CUDA_DRIVER_H_
