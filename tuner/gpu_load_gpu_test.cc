// NVML load readings and a worker pool on a real GPU. Every test skips
// without a GPU or without NVML (libnvidia-ml.so.1).
#include <dlfcn.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tuner/cuda/device.h"
#include "tuner/gpu_load.h"
#include "tuner/runner_pool.h"

namespace kfuse {
namespace {

// Why these tests cannot run here, or "" when they can.
std::string Missing() {
  if (DeviceCount() == 0) return "no CUDA device";
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) return "no NVML (libnvidia-ml.so.1)";
  dlclose(nvml);
  return "";
}

#define KFUSE_NEED_GPU_AND_NVML() \
  if (std::string why = Missing(); !why.empty()) GTEST_SKIP() << why

TEST(NvmlGpuTest, SamplesSaneValues) {
  KFUSE_NEED_GPU_AND_NVML();
  absl::StatusOr<DeviceFingerprint> fp = QueryDevice(0);
  ASSERT_TRUE(fp.ok()) << fp.status();
  NvmlProbeOptions o;
  o.cuda_ordinal = 0;
  o.expected_name = fp->name;  // By index: the name guards the match.
  absl::StatusOr<std::unique_ptr<NvmlLoadProbe>> probe = NvmlLoadProbe::Create(o);
  ASSERT_TRUE(probe.ok()) << probe.status();
  std::printf("probe: %s\n", (*probe)->Describe().c_str());
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<GpuLoad> load = (*probe)->Sample();
    ASSERT_TRUE(load.ok()) << load.status();
    std::printf("load: %s\n", DescribeLoad(*load).c_str());
    EXPECT_GT(load->total_bytes, 0);
    EXPECT_GE(load->free_bytes, 0);
    EXPECT_LE(load->free_bytes, load->total_bytes);
    EXPECT_GE(load->others_busy_fraction, 0.0);
    EXPECT_LE(load->others_busy_fraction, 1.0);
    // NVML's total and the driver's agree within what the firmware keeps.
    EXPECT_LE(load->total_bytes, fp->memory_bytes + (int64_t{2} << 30));
  }
}

TEST(NvmlGpuTest, WrongExpectedNameIsRefused) {
  KFUSE_NEED_GPU_AND_NVML();
  NvmlProbeOptions o;
  o.expected_name = "not a GPU";
  EXPECT_EQ(NvmlLoadProbe::Create(o).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RunnerPoolGpuTest, WorkerPoolOnTheFirstGpu) {
  KFUSE_NEED_GPU_AND_NVML();
  WorkerPoolOptions o;
  o.devices = {0};
  o.idle = IdlePolicy{};
  absl::StatusOr<WorkerPool> wp = CreateWorkerPool(o);
  ASSERT_TRUE(wp.ok()) << wp.status();
  for (const std::string& n : wp->notes) std::printf("note: %s\n", n.c_str());
  absl::StatusOr<DeviceFingerprint> fp = wp->pool->Device();
  ASSERT_TRUE(fp.ok());
  EXPECT_EQ(fp->Digest(), QueryDevice(0)->Digest());
  ASSERT_EQ(wp->pool->stats().size(), 1u);
  EXPECT_THAT(wp->notes, ::testing::Contains(::testing::HasSubstr("waits for idle time")));
}

}  // namespace
}  // namespace kfuse
