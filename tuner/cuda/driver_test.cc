#include "tuner/cuda/driver.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tuner/cuda/device.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

bool HaveGpu() { return DeviceCount() > 0; }

TEST(DriverTest, LoadDriverIsOkOrUnavailableWithReason) {
  absl::StatusOr<const DriverApi*> cu = LoadDriver();
  if (cu.ok()) {
    EXPECT_NE((*cu)->cuLaunchKernelEx, nullptr);
    EXPECT_NE((*cu)->cuTensorMapEncodeTiled, nullptr);
    return;
  }
  EXPECT_EQ(cu.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(cu.status().message().empty());
  // Cached: a second call gives the same answer.
  EXPECT_EQ(LoadDriver().status(), cu.status());
}

TEST(DriverTest, EntriesAreLookedUpByTheirBaseNames) {
  // cuda.h renames cuMemAlloc to cuMemAlloc_v2 with a macro; the name passed
  // to cuGetProcAddress must be the base name, with the version separate.
#define KFUSE_NAME_(name, version) #name,
  const std::vector<std::string> names = {KFUSE_DRIVER_ENTRIES(KFUSE_NAME_)};
#undef KFUSE_NAME_
  for (const std::string& n : names) EXPECT_EQ(n.find("_v"), std::string::npos) << n;
  EXPECT_NE(std::find(names.begin(), names.end(), "cuMemAlloc"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "cuLaunchKernelEx"), names.end());
}

TEST(DriverTest, NoGpuIsNotAnError) {
  if (HaveGpu()) GTEST_SKIP() << "a GPU is present; this checks the no-GPU path";
  EXPECT_EQ(DeviceCount(), 0);
  EXPECT_EQ(QueryDevice(0).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(DriverVersion().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ScopedPrimaryContext::Create(0).status().code(), absl::StatusCode::kUnavailable);
}

TEST(DriverTest, CuCheckMapsCodes) {
  EXPECT_TRUE(CuCheck(CUDA_SUCCESS, "x").ok());
  absl::Status oom = CuCheck(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc");
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(oom.message()), HasSubstr("cuMemAlloc"));
  absl::Status bad = CuCheck(CUDA_ERROR_ILLEGAL_ADDRESS, "cuCtxSynchronize");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInternal);
  if (HaveGpu()) {
    EXPECT_THAT(std::string(bad.message()), HasSubstr("CUDA_ERROR_ILLEGAL_ADDRESS"));
  } else {
    EXPECT_THAT(std::string(bad.message()), HasSubstr("CUresult 700"));
  }
  EXPECT_TRUE(IsStickyError(CUDA_ERROR_ILLEGAL_ADDRESS));
  EXPECT_FALSE(IsStickyError(CUDA_ERROR_INVALID_VALUE));
}

TEST(DriverTest, ArchForDevice) {
  DeviceFingerprint fp;
  fp.cc_major = 9;
  fp.cc_minor = 0;
  EXPECT_EQ(ArchForDevice(fp), "sm_90a");
  fp.cc_major = 8;
  fp.cc_minor = 6;
  EXPECT_EQ(ArchForDevice(fp), "sm_86");
}

// ---- GPU tests: skip without a GPU. ----

TEST(DriverGpuTest, QueryDeviceFillsEveryField) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device: " << LoadDriver().status();
  absl::StatusOr<DeviceFingerprint> fp = QueryDevice(0);
  ASSERT_TRUE(fp.ok()) << fp.status();
  EXPECT_FALSE(fp->name.empty());
  EXPECT_GE(fp->cc_major, 7);
  EXPECT_GT(fp->sm_count, 0);
  EXPECT_GT(fp->sm_clock_khz, 0);
  EXPECT_GT(fp->mem_clock_khz, 0);
  EXPECT_GT(fp->mem_bus_width_bits, 0);
  EXPECT_GT(fp->l2_bytes, 0);
  EXPECT_GT(fp->memory_bytes, int64_t{1} << 30);
  EXPECT_FALSE(fp->Digest().empty());
  // Stable across calls.
  EXPECT_EQ(QueryDevice(0)->Digest(), fp->Digest());
  std::printf(
      "device 0: %s cc %d.%d, %d SMs, %d kHz, L2 %lld, mem %lld, power %d mW, "
      "ecc %d, mig %d\n",
      fp->name.c_str(), fp->cc_major, fp->cc_minor, fp->sm_count, fp->sm_clock_khz,
      static_cast<long long>(fp->l2_bytes), static_cast<long long>(fp->memory_bytes),
      fp->power_limit_mw, fp->ecc, fp->mig);
  EXPECT_EQ(QueryDevice(DeviceCount()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(QueryDevice(-1).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<int> v = DriverVersion();
  ASSERT_TRUE(v.ok());
  EXPECT_GE(*v, kMinDriverVersion);
  // The client's probe, without the table or cuInit, reads the same.
  absl::StatusOr<int> installed = InstalledDriverVersion();
  ASSERT_TRUE(installed.ok()) << installed.status();
  EXPECT_EQ(*installed, *v);
}

TEST(DriverGpuTest, PrimaryContextMemoryRoundTrip) {
  if (!HaveGpu()) GTEST_SKIP() << "no CUDA device: " << LoadDriver().status();
  const DriverApi* cu = *LoadDriver();
  absl::StatusOr<ScopedPrimaryContext> ctx = ScopedPrimaryContext::Create(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  CUcontext current = nullptr;
  ASSERT_EQ(cu->cuCtxGetCurrent(&current), CUDA_SUCCESS);
  EXPECT_EQ(current, ctx->context());
  CUdeviceptr p = 0;
  ASSERT_TRUE(CuCheck(cu->cuMemAlloc(&p, 4096), "cuMemAlloc").ok());
  std::vector<unsigned char> host(4096, 0);
  ASSERT_TRUE(CuCheck(cu->cuMemsetD8(p, 0xAB, 4096), "cuMemsetD8").ok());
  ASSERT_TRUE(CuCheck(cu->cuMemcpyDtoH(host.data(), p, 4096), "cuMemcpyDtoH").ok());
  for (unsigned char c : host) ASSERT_EQ(c, 0xAB);
  EXPECT_TRUE(CuCheck(cu->cuMemFree(p), "cuMemFree").ok());
  // An impossible allocation is ResourceExhausted, not a crash.
  CUdeviceptr huge = 0;
  EXPECT_EQ(CuCheck(cu->cuMemAlloc(&huge, size_t{1} << 50), "cuMemAlloc").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ScopedPrimaryContext::Create(999).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kfuse
