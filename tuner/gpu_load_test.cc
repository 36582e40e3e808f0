#include "tuner/gpu_load.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;
namespace abi = nvml_abi;

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(GpuLoadTest, SampleIsIdleAtTheLimits) {
  IdlePolicy p;
  p.max_others_busy = 0.2;
  p.min_free_bytes = 8 * kGiB;
  EXPECT_TRUE(SampleIsIdle({0.2, 8 * kGiB, 80 * kGiB}, p));
  EXPECT_FALSE(SampleIsIdle({0.21, 8 * kGiB, 80 * kGiB}, p));
  EXPECT_FALSE(SampleIsIdle({0.0, 8 * kGiB - 1, 80 * kGiB}, p));
}

TEST(GpuLoadTest, DescribeLoad) {
  EXPECT_EQ(DescribeLoad({0.85, 2 * kGiB, 80 * kGiB}), "others 85% busy, 2.0 of 80.0 GiB free");
}

TEST(GpuLoadTest, ValidateIdlePolicyNamesTheField) {
  EXPECT_TRUE(ValidateIdlePolicy(IdlePolicy{}).ok());
  struct Case {
    void (*mutate)(IdlePolicy&);
    const char* field;
  };
  const Case cases[] = {
      {[](IdlePolicy& p) { p.max_others_busy = 2; }, "max_others_busy"},
      {[](IdlePolicy& p) { p.max_others_busy = std::nan(""); }, "max_others_busy"},
      {[](IdlePolicy& p) { p.min_free_bytes = -5; }, "min_free_bytes"},
      {[](IdlePolicy& p) { p.poll_seconds = -1; }, "poll_seconds"},
      {[](IdlePolicy& p) { p.settle_seconds = -1; }, "settle_seconds"},
      {[](IdlePolicy& p) { p.max_wait_seconds = std::nan(""); }, "max_wait_seconds"},
  };
  for (const Case& c : cases) {
    IdlePolicy p;
    c.mutate(p);
    absl::Status s = ValidateIdlePolicy(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(s.message(), HasSubstr(c.field));
  }
}

TEST(GpuLoadTest, SelectNvmlDevicePrefersThePciBusId) {
  absl::StatusOr<NvmlDeviceSelector> s = SelectNvmlDevice(1, "0000:3b:00.0", "5,6", nullptr);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, NvmlDeviceSelector::Kind::kPciBusId);
  EXPECT_EQ(s->key, "0000:3b:00.0");
  EXPECT_EQ(s->caveat, "");
}

TEST(GpuLoadTest, SelectNvmlDeviceFallsBackToTheIndex) {
  absl::StatusOr<NvmlDeviceSelector> s = SelectNvmlDevice(1, "", nullptr, nullptr);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, NvmlDeviceSelector::Kind::kIndex);
  EXPECT_EQ(s->index, 1u);
  EXPECT_THAT(s->caveat, HasSubstr("CUDA_DEVICE_ORDER=PCI_BUS_ID"));

  s = SelectNvmlDevice(1, "", nullptr, "PCI_BUS_ID");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index, 1u);
  EXPECT_EQ(s->caveat, "");  // Both count in PCI bus order.

  s = SelectNvmlDevice(1, "", "4, 6", "PCI_BUS_ID");  // Ordinal 1 is the machine's GPU 6.
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, NvmlDeviceSelector::Kind::kIndex);
  EXPECT_EQ(s->index, 6u);

  s = SelectNvmlDevice(0, "", "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6,1", nullptr);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, NvmlDeviceSelector::Kind::kUuid);
  EXPECT_EQ(s->key, "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6");
}

TEST(GpuLoadTest, SelectNvmlDeviceRejectsWhatItCannotMap) {
  EXPECT_EQ(SelectNvmlDevice(-1, "", nullptr, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<NvmlDeviceSelector> s = SelectNvmlDevice(1, "", "3", nullptr);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("lists 1 device(s)"));
  EXPECT_EQ(SelectNvmlDevice(0, "", "", nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  s = SelectNvmlDevice(0, "", "gpu0", nullptr);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("\"gpu0\""));
}

// A scripted NVML: one GPU, answers set per test.
struct FakeNvml {
  abi::Return init = abi::kSuccess;
  std::string name = "NVIDIA H200";
  std::string pci_asked;
  std::optional<unsigned> index_asked;
  bool memory_v2 = true;
  unsigned memory_version_seen = 0;
  unsigned long long free = 100ull << 30, total = 141ull << 30;
  abi::Return process_result = abi::kSuccess;
  std::vector<abi::ProcessUtilizationSample> samples;
  int grow_once = 0;  // Samples that appear between the count and the read.
  unsigned long long last_seen = 0;
  unsigned device_util = 0;
  int shutdowns = 0;
};
FakeNvml* fake = nullptr;
abi::Device TheGpu() { return reinterpret_cast<abi::Device>(&fake); }

const abi::Functions& FakeFunctions() {
  static const abi::Functions f = [] {
    abi::Functions f;
    f.init_v2 = [] { return fake->init; };
    f.shutdown = [] {
      ++fake->shutdowns;
      return abi::kSuccess;
    };
    f.error_string = [](abi::Return r) -> const char* {
      return r == 3 ? "Not Supported" : "Unknown Error";
    };
    f.handle_by_index_v2 = [](unsigned i, abi::Device* d) {
      fake->index_asked = i;
      *d = TheGpu();
      return abi::kSuccess;
    };
    f.handle_by_pci_bus_id_v2 = [](const char* bus, abi::Device* d) {
      fake->pci_asked = bus;
      *d = TheGpu();
      return std::string(bus) == "0000:3b:00.0" ? abi::kSuccess : abi::kNotFound;
    };
    f.get_name = [](abi::Device, char* out, unsigned n) {
      std::strncpy(out, fake->name.c_str(), n);
      return abi::kSuccess;
    };
    f.get_memory_info_v2 = [](abi::Device d, abi::MemoryV2* m) {
      if (!fake->memory_v2) return abi::kFunctionNotFound;
      fake->memory_version_seen = m->version;
      m->free = fake->free;
      m->total = fake->total;
      return d == TheGpu() ? abi::kSuccess : abi::kNotFound;
    };
    f.get_memory_info = [](abi::Device, abi::Memory* m) {
      m->free = fake->free / 2;  // Tells the two apart.
      m->total = fake->total;
      return abi::kSuccess;
    };
    f.get_utilization_rates = [](abi::Device, abi::Utilization* u) {
      u->gpu = fake->device_util;
      return abi::kSuccess;
    };
    f.get_process_utilization = [](abi::Device, abi::ProcessUtilizationSample* out, unsigned* count,
                                   unsigned long long last_seen) {
      fake->last_seen = last_seen;
      if (fake->process_result != abi::kSuccess) return fake->process_result;
      if (fake->samples.empty()) return abi::kNotFound;
      if (out == nullptr) {
        *count = static_cast<unsigned>(fake->samples.size());
        for (; fake->grow_once > 0; --fake->grow_once)
          fake->samples.push_back(fake->samples.back());
        return abi::kInsufficientSize;
      }
      if (*count < fake->samples.size()) {
        *count = static_cast<unsigned>(fake->samples.size());
        return abi::kInsufficientSize;
      }
      *count = static_cast<unsigned>(fake->samples.size());
      for (size_t i = 0; i < fake->samples.size(); ++i) out[i] = fake->samples[i];
      return abi::kSuccess;
    };
    return f;
  }();
  return f;
}

constexpr int64_t kNowUs = 1'700'000'000'000'000;

class NvmlProbeTest : public ::testing::Test {
 protected:
  void SetUp() override { fake = &nvml_; }
  void TearDown() override { fake = nullptr; }

  NvmlProbeOptions Options() {
    NvmlProbeOptions o;
    o.cuda_ordinal = 0;
    o.pci_bus_id = "0000:3b:00.0";
    o.wall_clock_us = [] { return kNowUs; };
    o.own_pids = [this] { return own_; };
    return o;
  }
  abi::ProcessUtilizationSample At(unsigned pid, int64_t ago_us, unsigned sm) {
    return {pid, static_cast<unsigned long long>(kNowUs - ago_us), sm, 0, 0, 0};
  }

  FakeNvml nvml_;
  std::vector<int> own_ = {100};
};

TEST_F(NvmlProbeTest, OthersAreTheProcessesThatAreNotOurs) {
  const unsigned self = static_cast<unsigned>(getpid());
  nvml_.samples = {
      At(100, 1000, 95),                              // Our worker.
      At(self, 1000, 90),                             // This process.
      At(200, 900'000, 30),                           // Another process: mean of 30 and 50.
      At(200, 100'000, 50),    At(300, 500'000, 20),  // A third: 20.
      At(400, 1'500'000, 100),                        // Older than the window.
  };
  absl::StatusOr<std::unique_ptr<NvmlLoadProbe>> probe =
      NvmlLoadProbe::CreateWithFunctions(&FakeFunctions(), Options());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(nvml_.pci_asked, "0000:3b:00.0");
  EXPECT_FALSE(nvml_.index_asked.has_value());
  absl::StatusOr<GpuLoad> load = (*probe)->Sample();
  ASSERT_TRUE(load.ok()) << load.status();
  EXPECT_DOUBLE_EQ(load->others_busy_fraction, 0.6);
  EXPECT_EQ(load->free_bytes, 100 * kGiB);
  EXPECT_EQ(load->total_bytes, 141 * kGiB);
  EXPECT_EQ(nvml_.memory_version_seen, abi::kMemoryV2Version);
  EXPECT_EQ(nvml_.last_seen, static_cast<unsigned long long>(kNowUs - 1'000'000));
  EXPECT_TRUE((*probe)->per_process());
  EXPECT_THAT((*probe)->Describe(), HasSubstr("per-process SM utilization"));
}

TEST_F(NvmlProbeTest, ARestartedWorkersOldPidStaysOurs) {
  nvml_.samples = {At(100, 1000, 80)};
  auto probe = NvmlLoadProbe::CreateWithFunctions(&FakeFunctions(), Options());
  ASSERT_TRUE(probe.ok()) << probe.status();
  own_ = {101};  // The worker was restarted; its predecessor's samples linger.
  nvml_.samples = {At(100, 1000, 80), At(101, 1000, 70)};
  EXPECT_DOUBLE_EQ((*probe)->Sample()->others_busy_fraction, 0.0);
}

TEST_F(NvmlProbeTest, BusyFractionIsCappedAtOne) {
  nvml_.samples = {At(200, 1000, 80), At(300, 1000, 70)};
  auto probe = NvmlLoadProbe::CreateWithFunctions(&FakeFunctions(), Options());
  ASSERT_TRUE(probe.ok());
  EXPECT_DOUBLE_EQ((*probe)->Sample()->others_busy_fraction, 1.0);
}

TEST_F(NvmlProbeTest, NoSamplesMeansNobodyElseIsBusy) {
  auto probe = NvmlLoadProbe::CreateWithFunctions(&FakeFunctions(), Options());
  ASSERT_TRUE(probe.ok());
  EXPECT_DOUBLE_EQ((*probe)->Sample()->others_busy_fraction, 0.0);
}

TEST_F(NvmlProbeTest, SamplesThatAppearBetweenCountAndReadAreRead) {
  auto probe = NvmlLoadProbe::CreateWithFunctions(&FakeFunctions(), Options());
  ASSERT_TRUE(probe.ok()) << probe.status();
  nvml_.samples = {At(200, 1000, 10)};
  nvml_.grow_once = 20;  // More than the headroom.
  EXPECT_DOUBLE_EQ((*probe)->Sample()->others_busy_fraction, 0.1);
}

TEST_F(NvmlProbeTest, FallsBackToDeviceUtilizationWithoutPerProcessSupport) {
  nvml_.process_result = abi::kNotSupported;
  nvml_.device_util = 35;
  auto probe = NvmlLoadProbe::CreateWithFunctions(&FakeFunctions(), Options());
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_FALSE((*probe)->per_process());
  EXPECT_DOUBLE_EQ((*probe)->Sample()->others_busy_fraction, 0.35);
  EXPECT_THAT((*probe)->Describe(), HasSubstr("device-wide utilization, our own worker included"));
  EXPECT_THAT((*probe)->Describe(), HasSubstr("Not Supported"));
}

TEST_F(NvmlProbeTest, OtherNvmlErrorsAreUnavailable) {
  auto probe = NvmlLoadProbe::CreateWithFunctions(&FakeFunctions(), Options());
  ASSERT_TRUE(probe.ok());
  nvml_.process_result = 15;  // NVML_ERROR_GPU_IS_LOST
  absl::StatusOr<GpuLoad> load = (*probe)->Sample();
  EXPECT_EQ(load.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(load.status().message(), HasSubstr("nvmlDeviceGetProcessUtilization"));
  EXPECT_TRUE((*probe)->per_process());  // Not a reason to give up per-process readings.
}

TEST_F(NvmlProbeTest, OldDriversUseTheFirstMemoryCall) {
  nvml_.memory_v2 = false;
  auto probe = NvmlLoadProbe::CreateWithFunctions(&FakeFunctions(), Options());
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ((*probe)->Sample()->free_bytes, 50 * kGiB);
}

TEST_F(NvmlProbeTest, InitFailureAndUnknownBusIdAreUnavailable) {
  nvml_.init = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  auto probe = NvmlLoadProbe::CreateWithFunctions(&FakeFunctions(), Options());
  EXPECT_EQ(probe.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(probe.status().message(), HasSubstr("nvmlInit_v2"));

  nvml_.init = abi::kSuccess;
  NvmlProbeOptions o = Options();
  o.pci_bus_id = "0000:99:00.0";
  probe = NvmlLoadProbe::CreateWithFunctions(&FakeFunctions(), o);
  EXPECT_EQ(probe.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(probe.status().message(), HasSubstr("0000:99:00.0"));
  EXPECT_EQ(nvml_.shutdowns, 1);  // The initialized one let NVML go.
}

// CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER for one test, restored after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST_F(NvmlProbeTest, ByIndexTheNameMustMatch) {
  ScopedEnv visible("CUDA_VISIBLE_DEVICES", "3,2");
  ScopedEnv order("CUDA_DEVICE_ORDER", nullptr);
  NvmlProbeOptions o = Options();
  o.pci_bus_id = "";
  o.cuda_ordinal = 1;
  o.expected_name = "NVIDIA H200";
  auto probe = NvmlLoadProbe::CreateWithFunctions(&FakeFunctions(), o);
  ASSERT_TRUE(probe.ok()) << probe.status();
  EXPECT_EQ(nvml_.index_asked, 2u);
  EXPECT_THAT((*probe)->Describe(), HasSubstr("matched by index"));

  o.expected_name = "NVIDIA A100-SXM4-80GB";
  probe = NvmlLoadProbe::CreateWithFunctions(&FakeFunctions(), o);
  EXPECT_EQ(probe.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(probe.status().message(),
              HasSubstr("is NVIDIA H200 but CUDA device 1 is NVIDIA A100"));
}

TEST(NvmlLoadProbeTest, MissingLibraryIsUnavailableWithTheReason) {
  NvmlProbeOptions o;
  o.library = "libkfuse-absent-nvml.so.1";
  absl::StatusOr<std::unique_ptr<NvmlLoadProbe>> probe = NvmlLoadProbe::Create(o);
  EXPECT_EQ(probe.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(probe.status().message(), HasSubstr("NVML not available"));
  EXPECT_THAT(probe.status().message(), HasSubstr("libkfuse-absent-nvml.so.1"));
}

}  // namespace
}  // namespace kfuse
