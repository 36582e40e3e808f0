// The worker's GPU helpers on a real GPU, in this process: the generator
// makes RandomInput's bytes, and the comparison and reference preparation
// return what the host functions compute, over grids that stride. Every
// test skips without a GPU (the source's compilation and the element logic
// are checked everywhere by worker_kernels_test.cc).
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tuner/check.h"
#include "tuner/check_test_data.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"
#include "tuner/worker_buffers.h"
#include "tuner/worker_kernels.h"

namespace kfuse {
namespace {

using testing_check::AllOutputDTypes;
using testing_check::CheckCase;
using testing_check::MakeCheckCase;

class WorkerKernelsGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    absl::StatusOr<DeviceFingerprint> fp = QueryDevice(0);
    ASSERT_TRUE(fp.ok()) << fp.status();
    absl::StatusOr<ScopedPrimaryContext> ctx = ScopedPrimaryContext::Create(0);
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    ctx_.emplace(*std::move(ctx));
    cu_ = *LoadDriver();
    ASSERT_EQ(cu_->cuStreamCreate(&stream_, 0), CUDA_SUCCESS);
    absl::StatusOr<std::unique_ptr<WorkerKernels>> k = WorkerKernels::Create(ArchForDevice(*fp));
    ASSERT_TRUE(k.ok()) << k.status();
    kernels_ = *std::move(k);
  }
  void TearDown() override {
    kernels_.reset();
    if (stream_ != nullptr) cu_->cuStreamDestroy(stream_);
  }

  DeviceBuffer Upload(const void* data, size_t bytes) {
    absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Alloc(bytes);
    EXPECT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(b->Upload(std::string(static_cast<const char*>(data), bytes)).ok());
    return *std::move(b);
  }

  std::optional<ScopedPrimaryContext> ctx_;
  const DriverApi* cu_ = nullptr;
  CUstream stream_ = nullptr;
  std::unique_ptr<WorkerKernels> kernels_;
};

TEST_F(WorkerKernelsGpuTest, RandomInputsMatchTheHost) {
  for (DType t : AllOutputDTypes()) {
    for (InputDomain d : {InputDomain::kAny, InputDomain::kPositive, InputDomain::kUnit}) {
      // Odd sizes; one past 65536 blocks of 256, so the generator's grid strides.
      std::vector<int64_t> sizes = {1, 100003};
      if (d == InputDomain::kAny && (t == DType::kBF16 || t == DType::kF64)) {
        sizes.push_back((int64_t{1} << 24) + 5);
      }
      for (int64_t n : sizes) {
        BufferSpec spec{t, n, d};
        absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Alloc(n * DTypeBytes(t));
        ASSERT_TRUE(b.ok());
        ASSERT_TRUE(kernels_->FillRandom(*b, spec, /*seed=*/42, /*index=*/3, stream_).ok());
        ASSERT_EQ(cu_->cuStreamSynchronize(stream_), CUDA_SUCCESS);
        absl::StatusOr<std::string> got = b->Download();
        ASSERT_TRUE(got.ok());
        std::string want = RandomInput(spec, 42, 3);
        ASSERT_EQ(got->size(), want.size());
        size_t first = 0;
        while (first < want.size() && (*got)[first] == want[first]) ++first;
        EXPECT_EQ(first, want.size()) << DTypeName(t) << " domain " << static_cast<int>(d)
                                      << " n=" << n << ": first differing byte " << first;
      }
    }
  }
  // Class labels.
  for (DType t : {DType::kI32, DType::kI64}) {
    BufferSpec spec{t, 100003, InputDomain::kAny};
    spec.index_extent = 50257;
    spec.index_other = -100;
    absl::StatusOr<DeviceBuffer> b = DeviceBuffer::Alloc(spec.elements * DTypeBytes(t));
    ASSERT_TRUE(b.ok());
    ASSERT_TRUE(kernels_->FillRandom(*b, spec, /*seed=*/42, /*index=*/3, stream_).ok());
    ASSERT_EQ(cu_->cuStreamSynchronize(stream_), CUDA_SUCCESS);
    absl::StatusOr<std::string> got = b->Download();
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(*got == RandomInput(spec, 42, 3)) << DTypeName(t) << " labels";
  }
}

// An intermediate's widened copy for the float64 reference: each element
// as kf_decode reads it, bit for bit (NaN payloads included).
TEST_F(WorkerKernelsGpuTest, WidenDecodesEveryDtype) {
  for (DType t : AllOutputDTypes()) {
    const int64_t n = 100003;
    BufferSpec spec{t, n, InputDomain::kAny};
    absl::StatusOr<DeviceBuffer> in = DeviceBuffer::Alloc(n * DTypeBytes(t));
    absl::StatusOr<DeviceBuffer> out = DeviceBuffer::Alloc(n * 8);
    ASSERT_TRUE(in.ok() && out.ok());
    ASSERT_TRUE(kernels_->FillRandom(*in, spec, /*seed=*/7, /*index=*/1, stream_).ok());
    ASSERT_TRUE(kernels_->Widen(*in, t, n, *out, stream_).ok());
    ASSERT_EQ(cu_->cuStreamSynchronize(stream_), CUDA_SUCCESS);
    const std::string raw = RandomInput(spec, 7, 1);
    absl::StatusOr<std::string> got = out->Download();
    ASSERT_TRUE(got.ok());
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      unsigned long long bits = 0;
      std::memcpy(&bits, raw.data() + i * DTypeBytes(t), DTypeBytes(t));
      const double want = shared_code::kf_decode(static_cast<int>(t), bits);
      bad += std::memcmp(&want, got->data() + i * 8, 8) != 0;
    }
    EXPECT_EQ(bad, 0) << DTypeName(t);
  }
}

TEST_F(WorkerKernelsGpuTest, CompareMatchesTheHost) {
  for (DType t : AllOutputDTypes()) {
    // 1M + 7 elements: more than 1024 blocks x 256 threads, so threads stride.
    for (int64_t n : {int64_t{1}, int64_t{3001}, int64_t{(1 << 20) + 7}}) {
      CheckCase c = MakeCheckCase(t, n, n);
      DeviceBuffer got = Upload(c.got.data(), c.got.size());
      DeviceBuffer ref = Upload(c.ref.data(), c.ref.size() * 8);
      absl::StatusOr<CompareStats> s = kernels_->Compare(got.ptr(), t, ref.ptr(), n, stream_);
      ASSERT_TRUE(s.ok()) << s.status();
      CompareStats want = CompareOnHost(t, c.got.data(), c.ref);
      std::string what = absl::StrCat(std::string(DTypeName(t)), " n=", n);
      EXPECT_EQ(s->err.max_abs_err, want.err.max_abs_err) << what;
      EXPECT_EQ(s->err.max_abs_ref, want.err.max_abs_ref) << what;
      EXPECT_EQ(s->err.worst_index, want.err.worst_index) << what;
      EXPECT_EQ(s->err.special_mismatches, want.err.special_mismatches) << what;
      EXPECT_EQ(s->err.first_special_mismatch, want.err.first_special_mismatch) << what;
      EXPECT_EQ(s->err.mismatched, want.err.mismatched) << what;
      EXPECT_EQ(s->err.far, want.err.far) << what;
      EXPECT_EQ(s->err.first_far, want.err.first_far) << what;
      EXPECT_EQ(s->unwritten, want.unwritten) << what;
      EXPECT_EQ(s->first_unwritten, want.first_unwritten) << what;
      if (want.err.worst_index >= 0) {
        absl::StatusOr<double> v = ElementAt(got.ptr(), t, want.err.worst_index);
        ASSERT_TRUE(v.ok());
        EXPECT_EQ(*v, ElementToDouble(t, c.got.data(), want.err.worst_index)) << what;
      }
    }
  }
}

// The far count (two passes on the GPU) where it is not zero.
TEST_F(WorkerKernelsGpuTest, FarCountMatchesTheHost) {
  for (DType t : {DType::kBF16, DType::kF16}) {
    for (int64_t n : {int64_t{3001}, int64_t{(1 << 20) + 7}}) {
      CheckCase c = testing_check::MakeFarCase(t, n, n);
      DeviceBuffer got = Upload(c.got.data(), c.got.size());
      DeviceBuffer ref = Upload(c.ref.data(), c.ref.size() * 8);
      absl::StatusOr<CompareStats> s = kernels_->Compare(got.ptr(), t, ref.ptr(), n, stream_);
      ASSERT_TRUE(s.ok()) << s.status();
      CompareStats want = CompareOnHost(t, c.got.data(), c.ref);
      std::string what = absl::StrCat(std::string(DTypeName(t)), " n=", n);
      ASSERT_GT(want.err.far, n / 8) << what;
      EXPECT_EQ(s->err.far, want.err.far) << what;
      EXPECT_EQ(s->err.first_far, want.err.first_far) << what;
      EXPECT_EQ(s->err.max_abs_ref, want.err.max_abs_ref) << what;
    }
  }
}

TEST_F(WorkerKernelsGpuTest, PrepareMatchesTheHost) {
  for (DType t : AllOutputDTypes()) {
    const int64_t n = (1 << 20) + 7;
    CheckCase c = MakeCheckCase(t, n, 5);
    DeviceBuffer eager = Upload(c.got.data(), c.got.size());
    DeviceBuffer ref = Upload(c.ref.data(), c.ref.size() * 8);
    absl::StatusOr<PrepStats> p = kernels_->Prepare(ref.ptr(), eager.ptr(), t, n, stream_);
    ASSERT_TRUE(p.ok()) << p.status();
    std::vector<double> want_ref = c.ref;
    PrepStats want = PrepareReference(t, c.got.data(), absl::MakeSpan(want_ref));
    const std::string what(DTypeName(t));
    EXPECT_EQ(p->ref_unwritten, want.ref_unwritten) << what;
    EXPECT_EQ(p->first_ref_unwritten, want.first_ref_unwritten) << what;
    EXPECT_EQ(p->eager_unwritten, want.eager_unwritten) << what;
    EXPECT_EQ(p->first_eager_unwritten, want.first_eager_unwritten) << what;
    absl::StatusOr<std::string> adjusted = ref.Download();
    ASSERT_TRUE(adjusted.ok());
    std::vector<double> got_ref = ToDouble(DType::kF64, adjusted->data(), n);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) {
      bool same = std::isnan(want_ref[i]) ? std::isnan(got_ref[i]) : got_ref[i] == want_ref[i];
      differ += !same;
    }
    EXPECT_EQ(differ, 0) << what;
  }
}

}  // namespace
}  // namespace kfuse
