#include "tuner/cuda/driver.h"

#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/status.h"

namespace kfuse {
namespace {

using GetProcAddressV2 = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);

const DriverApi* g_api = nullptr;  // Set once by LoadDriver's initializer.

absl::StatusOr<const DriverApi*> LoadOnce() {
  // RTLD_NODELETE: the table outlives any static destructor that might run
  // after a dlclose; we never close it anyway.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (lib == nullptr) {
    const char* err = dlerror();
    return absl::UnavailableError(
        absl::StrCat("libcuda.so.1 not found: no NVIDIA driver on this machine (",
                     err ? err : "dlopen failed", ")"));
  }
  auto get_proc = reinterpret_cast<GetProcAddressV2>(dlsym(lib, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    return absl::UnavailableError(
        "libcuda.so.1 has no cuGetProcAddress_v2: the NVIDIA driver is older than "
        "CUDA 12.0; install a newer driver to tune");
  }
  auto* api = new DriverApi();  // Process-wide; never freed.
#define KFUSE_DRIVER_RESOLVE_(name, version)                                          \
  {                                                                                   \
    void* fn = nullptr;                                                               \
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;      \
    CUresult r = get_proc(#name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &found);  \
    if (r != CUDA_SUCCESS || fn == nullptr || found != CU_GET_PROC_ADDRESS_SUCCESS) { \
      delete api;                                                                     \
      return absl::UnavailableError(                                                  \
          absl::StrCat("the NVIDIA driver lacks " #name " (CUDA ", version,           \
                       " ABI); install a driver for CUDA 12.0 or newer"));            \
    }                                                                                 \
    api->name = reinterpret_cast<decltype(api->name)>(fn);                            \
  }
  KFUSE_DRIVER_ENTRIES(KFUSE_DRIVER_RESOLVE_)
#undef KFUSE_DRIVER_RESOLVE_

  int version = 0;
  if (api->cuDriverGetVersion(&version) != CUDA_SUCCESS || version < kMinDriverVersion) {
    delete api;
    return absl::UnavailableError(absl::StrCat("the NVIDIA driver supports CUDA ", version / 1000,
                                               ".", (version % 1000) / 10,
                                               "; kfuse needs CUDA 12.0 or newer"));
  }
  g_api = api;  // cuGetErrorName works from here on, even if cuInit fails.
  CUresult r = api->cuInit(0);
  if (r != CUDA_SUCCESS) {
    g_api = nullptr;
    const char* name = nullptr;
    api->cuGetErrorName(r, &name);
    const char* text = nullptr;
    api->cuGetErrorString(r, &text);
    return absl::UnavailableError(absl::StrCat(
        "cuInit failed: ", name ? name : "unknown error", " (", text ? text : "", ")",
        r == CUDA_ERROR_NO_DEVICE ? ": no usable NVIDIA GPU (check CUDA_VISIBLE_DEVICES)" : ""));
  }
  return api;
}

}  // namespace

absl::StatusOr<int> InstalledDriverVersion() {
  static const absl::StatusOr<int>* const result = new absl::StatusOr<int>([] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib == nullptr) return absl::StatusOr<int>(absl::UnavailableError("no libcuda.so.1"));
    using GetVersion = CUresult (*)(int*);
    auto get = reinterpret_cast<GetVersion>(dlsym(lib, "cuDriverGetVersion"));
    int version = 0;
    if (get == nullptr || get(&version) != CUDA_SUCCESS) {
      return absl::StatusOr<int>(absl::UnavailableError("cuDriverGetVersion failed"));
    }
    return absl::StatusOr<int>(version);
  }());
  return *result;
}

absl::StatusOr<const DriverApi*> LoadDriver() {
  // Function-local static: initialized exactly once, thread-safe (C++11).
  static const absl::StatusOr<const DriverApi*>* const result =
      new absl::StatusOr<const DriverApi*>(LoadOnce());
  return *result;
}

const char* CuErrorName(CUresult r) {
  const char* name = nullptr;
  if (g_api != nullptr && g_api->cuGetErrorName(r, &name) == CUDA_SUCCESS && name) {
    return name;
  }
  thread_local char buf[32];
  std::snprintf(buf, sizeof(buf), "CUresult %d", static_cast<int>(r));
  return buf;
}

absl::Status CuCheck(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return absl::OkStatus();
  const char* text = nullptr;
  if (g_api != nullptr) g_api->cuGetErrorString(r, &text);
  std::string msg = absl::StrCat(what, ": ", CuErrorName(r));
  if (text != nullptr) absl::StrAppend(&msg, " (", text, ")");
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

bool IsStickyError(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
      return true;
    default:
      return false;
  }
}

absl::StatusOr<ScopedPrimaryContext> ScopedPrimaryContext::Create(int ordinal) {
  KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
  int count = 0;
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (ordinal < 0 || ordinal >= count) {
    return absl::InvalidArgumentError(absl::StrCat("device ordinal ", ordinal,
                                                   " out of range: this machine has ", count,
                                                   " visible CUDA device(s)"));
  }
  CUdevice dev = 0;
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuDeviceGet(&dev, ordinal), "cuDeviceGet"));
  CUcontext ctx = nullptr;
  KFUSE_RETURN_IF_ERROR(
      CuCheck(cu->cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain"));
  ScopedPrimaryContext guard(dev, ctx);
  KFUSE_RETURN_IF_ERROR(guard.MakeCurrent());
  return guard;
}

ScopedPrimaryContext::ScopedPrimaryContext(ScopedPrimaryContext&& other) noexcept
    : device_(other.device_), ctx_(other.ctx_) {
  other.ctx_ = nullptr;
}

ScopedPrimaryContext& ScopedPrimaryContext::operator=(ScopedPrimaryContext&& other) noexcept {
  if (this != &other) {
    this->~ScopedPrimaryContext();
    device_ = other.device_;
    ctx_ = other.ctx_;
    other.ctx_ = nullptr;
  }
  return *this;
}

ScopedPrimaryContext::~ScopedPrimaryContext() {
  if (ctx_ == nullptr || g_api == nullptr) return;
  CUcontext current = nullptr;
  if (g_api->cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == ctx_) {
    g_api->cuCtxSetCurrent(nullptr);
  }
  g_api->cuDevicePrimaryCtxRelease(device_);
  ctx_ = nullptr;
}

absl::Status ScopedPrimaryContext::MakeCurrent() const {
  return CuCheck(g_api->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
}

}  // namespace kfuse
