// What the GPU property tests share: the device (or why there is none) and
// device memory freed at scope exit. Tests skip when OpenGpu() fails.
#ifndef KFUSE_TESTS_GPU_TEST_UTIL_H_
#define KFUSE_TESTS_GPU_TEST_UTIL_H_

#include <algorithm>
#include <string>
#include <vector>

#include "core/status.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"

namespace kfuse {
namespace gpu_test {

struct Gpu {
  const DriverApi* cu = nullptr;
  ScopedPrimaryContext ctx;
  std::string arch;
};

inline absl::StatusOr<Gpu> OpenGpu() {
  KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
  if (DeviceCount() == 0) return absl::UnavailableError("no CUDA device");
  KFUSE_ASSIGN_OR_RETURN(ScopedPrimaryContext ctx, ScopedPrimaryContext::Create(0));
  KFUSE_ASSIGN_OR_RETURN(DeviceFingerprint fp, QueryDevice(0));
  return Gpu{cu, std::move(ctx), ArchForDevice(fp)};
}

// Device memory freed at scope exit.
class DeviceMemory {
 public:
  explicit DeviceMemory(const DriverApi* cu) : cu_(cu) {}
  ~DeviceMemory() {
    for (CUdeviceptr p : ptrs_) cu_->cuMemFree(p);
  }
  CUdeviceptr Upload(const std::string& bytes) {
    CUdeviceptr p = Alloc(bytes.size());
    KFUSE_CHECK(cu_->cuMemcpyHtoD(p, bytes.data(), bytes.size()) == CUDA_SUCCESS);
    return p;
  }
  CUdeviceptr Alloc(size_t bytes) {
    CUdeviceptr p = 0;
    KFUSE_CHECK(cu_->cuMemAlloc(&p, std::max<size_t>(bytes, 16)) == CUDA_SUCCESS);
    ptrs_.push_back(p);
    return p;
  }
  std::string Download(CUdeviceptr p, size_t bytes) {
    std::string out(bytes, '\0');
    KFUSE_CHECK(cu_->cuMemcpyDtoH(out.data(), p, bytes) == CUDA_SUCCESS);
    return out;
  }

 private:
  const DriverApi* cu_;
  std::vector<CUdeviceptr> ptrs_;
};

}  // namespace gpu_test
}  // namespace kfuse

#endif  // KFUSE_TESTS_GPU_TEST_UTIL_H_
