// The worker's GPU helpers without a GPU: their source compiles with NVRTC,
// and their element code (tuner/worker_shared_code.h, the very text NVRTC
// compiles), run here block by block as the kernels run it, computes what
// the host reference functions (tuner/check.h) compute.
#include "tuner/worker_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tuner/check.h"
#include "tuner/check_test_data.h"
#include "tuner/runner.h"
#include "tuner/worker_nvrtc.h"
#include "tuner/worker_shared_code.h"

namespace kfuse {
namespace {

namespace sc = shared_code;
using ::testing::HasSubstr;
using testing_check::AllOutputDTypes;
using testing_check::CheckCase;
using testing_check::MakeCheckCase;

static_assert(sc::kDtF32 == static_cast<int>(DType::kF32) &&
                  sc::kDtF16 == static_cast<int>(DType::kF16) &&
                  sc::kDtBF16 == static_cast<int>(DType::kBF16) &&
                  sc::kDtI32 == static_cast<int>(DType::kI32) &&
                  sc::kDtBool == static_cast<int>(DType::kBool) &&
                  sc::kDtI64 == static_cast<int>(DType::kI64) &&
                  sc::kDtF64 == static_cast<int>(DType::kF64),
              "shared code's dtype numbers follow core/dtype.h");
static_assert(sc::kDomainAny == static_cast<int>(InputDomain::kAny) &&
                  sc::kDomainPositive == static_cast<int>(InputDomain::kPositive) &&
                  sc::kDomainUnit == static_cast<int>(InputDomain::kUnit),
              "shared code's domain numbers follow tuner/runner.h");

TEST(WorkerKernelsTest, SourceCompilesForHopperAndAmpere) {
  // What the worker compiles at start-up for its device; every entry it
  // looks up must be in the cubin.
  for (const char* arch : {"sm_90", "sm_90a", "sm_80"}) {
    absl::StatusOr<std::string> c = CompileToCubin(WorkerKernelSource(), arch);
    ASSERT_TRUE(c.ok()) << arch << ": " << c.status();
    for (const char* entry : {"kf_rand", "kf_cmp", "kf_prep"}) {
      EXPECT_NE(c->find(entry + std::string(1, '\0')), std::string::npos) << arch << ": " << entry;
    }
  }
}

TEST(WorkerKernelsTest, HelperBlocks) {
  EXPECT_EQ(HelperBlocks(0), 1);
  EXPECT_EQ(HelperBlocks(1), 1);
  EXPECT_EQ(HelperBlocks(256), 1);
  EXPECT_EQ(HelperBlocks(257), 2);
  EXPECT_EQ(HelperBlocks(int64_t{1} << 27), kHelperMaxBlocks);
}

// The shared 16-bit conversions are the host ones, bit for bit.
TEST(WorkerKernelsTest, SharedConversionsMatchTheHostOnes) {
  std::mt19937 rng(1);
  std::vector<uint32_t> bits = {0u,          0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                0x33000000u, 0x33000001u, 0x337fffffu, 0x38800000u, 0x387fffffu,
                                0x477fefffu, 0x477ff000u, 0x3f800000u, 0x3f801000u, 0x3f803000u};
  for (int i = 0; i < 200000; ++i) bits.push_back(rng());
  // Dense over the half subnormal and normal range, where rounding is subtle.
  for (uint32_t b = 0x33000000u; b < 0x47800000u; b += 0x1237u) bits.push_back(b);
  for (uint32_t b : bits) {
    float f;
    std::memcpy(&f, &b, 4);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(static_cast<uint16_t>(sc::kf_f32_to_f16(f)))));
      EXPECT_TRUE(std::isnan(BF16ToFloat(static_cast<uint16_t>(sc::kf_f32_to_bf16(f)))));
      continue;
    }
    ASSERT_EQ(sc::kf_f32_to_f16(f), FloatToHalf(f)) << std::hex << b;
    ASSERT_EQ(sc::kf_f32_to_bf16(f), FloatToBF16(f)) << std::hex << b;
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    double got = sc::kf_f16_to_f64(h);
    double want = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(got, want) << h;
    }
  }
}

// The kernels' structure on the host: grid-stride per thread, a shared
// memory tree per block of 256, one partial per block.
template <typename Part, typename Init, typename Elem, typename Merge>
std::vector<Part> EmulateBlocks(int64_t n, int blocks, Init init, Elem elem, Merge merge) {
  std::vector<Part> out(blocks);
  const int64_t stride = int64_t{blocks} * kHelperBlock;
  for (int b = 0; b < blocks; ++b) {
    std::vector<Part> s(kHelperBlock);
    for (int t = 0; t < kHelperBlock; ++t) {
      init(&s[t]);
      for (int64_t i = int64_t{b} * kHelperBlock + t; i < n; i += stride) elem(&s[t], i);
    }
    for (int w = kHelperBlock / 2; w > 0; w >>= 1)
      for (int t = 0; t < w; ++t) merge(&s[t], &s[t + w]);
    out[b] = s[0];
  }
  return out;
}

std::vector<sc::KfPart> EmulateCompare(const CheckCase& c, int blocks) {
  const int dt = static_cast<int>(c.dtype);
  const int bytes = DTypeBytes(c.dtype);
  // As WorkerKernels::Compare: the far count's floor from the largest reference.
  double max_ref = 0;
  for (double r : c.ref) {
    if (std::isfinite(r)) max_ref = std::max(max_ref, std::fabs(r));
  }
  const double floor = sc::kf_far_eps(dt) == 0 ? -1 : sc::kf_far_floor(dt, max_ref);
  return EmulateBlocks<sc::KfPart>(
      static_cast<int64_t>(c.ref.size()), blocks, sc::kf_part_init,
      [&](sc::KfPart* p, int64_t i) {
        unsigned long long raw = 0;
        std::memcpy(&raw, c.got.data() + i * bytes, bytes);
        double r = c.ref[i];
        sc::kf_part_add(p, i, r, sc::kf_judged(dt, r, sc::kf_decode(dt, raw)),
                       sc::kf_unwritten(dt, raw, r), dt, floor);
      },
      sc::kf_part_merge);
}

void ExpectSameStats(const CompareStats& got, const CompareStats& want, const std::string& what) {
  EXPECT_EQ(got.err.max_abs_err, want.err.max_abs_err) << what;
  EXPECT_EQ(got.err.max_abs_ref, want.err.max_abs_ref) << what;
  EXPECT_EQ(got.err.worst_index, want.err.worst_index) << what;
  EXPECT_EQ(got.err.special_mismatches, want.err.special_mismatches) << what;
  EXPECT_EQ(got.err.far, want.err.far) << what;
  EXPECT_EQ(got.err.first_far, want.err.first_far) << what;
  EXPECT_EQ(got.err.first_special_mismatch, want.err.first_special_mismatch) << what;
  EXPECT_EQ(got.err.mismatched, want.err.mismatched) << what;
  EXPECT_EQ(got.unwritten, want.unwritten) << what;
  EXPECT_EQ(got.first_unwritten, want.first_unwritten) << what;
}

// The far count of 16-bit outputs, on data where it is not zero.
TEST(WorkerKernelsTest, GpuFarCountLogicEqualsHostCompare) {
  for (DType t : {DType::kBF16, DType::kF16}) {
    for (int64_t n : {int64_t{3001}, int64_t{70001}}) {
      CheckCase c = testing_check::MakeFarCase(t, n, n);
      CompareStats want = CompareOnHost(t, c.got.data(), c.ref);
      std::string what = absl::StrCat(std::string(DTypeName(t)), " n=", n);
      int64_t off = 0;  // The 5% ones; the flushed are not far.
      for (int64_t i = 1; i < n; ++i) off += i % 7 == 3 && i % 13 != 5;
      EXPECT_EQ(want.err.far, off) << what;
      for (int blocks : {HelperBlocks(n), 2}) {
        ExpectSameStats(ReduceCompareParts(EmulateCompare(c, blocks)), want, what);
      }
    }
  }
}

TEST(WorkerKernelsTest, GpuCompareLogicEqualsHostCompare) {
  for (DType t : AllOutputDTypes()) {
    for (int64_t n : {1, 5, 11, 3000, 70001}) {
      CheckCase c = MakeCheckCase(t, n, /*seed=*/n);
      CompareStats want = CompareOnHost(t, c.got.data(), c.ref);
      // The launch grid, and a tiny one so threads stride over many elements.
      for (int blocks : {HelperBlocks(n), 2}) {
        std::string what = absl::StrCat(std::string(DTypeName(t)), " n=", n, " blocks=", blocks);
        ExpectSameStats(ReduceCompareParts(EmulateCompare(c, blocks)), want, what);
      }
    }
  }
}

TEST(WorkerKernelsTest, CompareSpecialCases) {
  // Every error zero: the worst index is the first finite pair, as on the host.
  std::vector<double> ref = {NAN, 1, 2, 3};
  std::vector<float> got = {NAN, 1, 2, 3};
  CheckCase c{DType::kF32, std::string(reinterpret_cast<char*>(got.data()), 16), ref};
  CompareStats s = ReduceCompareParts(EmulateCompare(c, 1));
  EXPECT_EQ(s.err.worst_index, 1);
  EXPECT_EQ(s.err.max_abs_err, 0);
  ExpectSameStats(s, CompareOnHost(DType::kF32, got.data(), ref), "all exact");
  // Ties between blocks: the smallest index wins, whatever the merge order.
  std::vector<double> ref2(2000, 1.0);
  std::vector<float> got2(2000, 1.0f);
  got2[1500] = got2[700] = 2.0f;
  CheckCase c2{DType::kF32, std::string(reinterpret_cast<char*>(got2.data()), 8000), ref2};
  std::vector<sc::KfPart> parts = EmulateCompare(c2, 8);
  std::reverse(parts.begin(), parts.end());
  EXPECT_EQ(ReduceCompareParts(parts).err.worst_index, 700);
  EXPECT_EQ(ReduceCompareParts({}).err.worst_index, -1);
}

TEST(WorkerKernelsTest, JudgeOnGpuStatsGivesTheHostVerdict) {
  for (DType t : AllOutputDTypes()) {
    CheckCase c = MakeCheckCase(t, 3000, 9);
    CompareStats s = ReduceCompareParts(EmulateCompare(c, HelperBlocks(3000)));
    auto at = [&](int64_t i) {
      return std::make_pair(ElementToDouble(t, c.got.data(), i), c.ref[i]);
    };
    ErrorStats eager;
    eager.max_abs_err = 1e-3;
    OutputCheck gpu = JudgeOutput(t, s, 3000, eager, 2.0, "output 1", at);
    OutputCheck host = CheckOutput(t, c.got.data(), c.ref, eager, 2.0, "output 1");
    EXPECT_EQ(gpu.ok, host.ok) << DTypeName(t);
    EXPECT_EQ(gpu.message, host.message) << DTypeName(t);
  }
}

TEST(WorkerKernelsTest, GpuPrepareLogicEqualsHostPrepare) {
  for (DType t : AllOutputDTypes()) {
    for (int64_t n : {1, 11, 5000}) {
      CheckCase c = MakeCheckCase(t, n, 3 * n);
      std::vector<double> host_ref = c.ref;
      PrepStats want = PrepareReference(t, c.got.data(), absl::MakeSpan(host_ref));
      for (int blocks : {HelperBlocks(n), 3}) {
        std::vector<double> dev_ref = c.ref;
        const int dt = static_cast<int>(t), bytes = DTypeBytes(t);
        std::vector<sc::KfPrep> parts = EmulateBlocks<sc::KfPrep>(
            n, blocks, sc::kf_prep_init,
            [&](sc::KfPrep* p, int64_t i) {
              unsigned long long raw = 0;
              std::memcpy(&raw, c.got.data() + i * bytes, bytes);
              dev_ref[i] = sc::kf_prep_add(p, i, dev_ref[i], dt, raw);
            },
            sc::kf_prep_merge);
        PrepStats got = ReducePrepParts(parts);
        std::string what = absl::StrCat(std::string(DTypeName(t)), " n=", n, " blocks=", blocks);
        EXPECT_EQ(got.ref_unwritten, want.ref_unwritten) << what;
        EXPECT_EQ(got.first_ref_unwritten, want.first_ref_unwritten) << what;
        EXPECT_EQ(got.eager_unwritten, want.eager_unwritten) << what;
        EXPECT_EQ(got.first_eager_unwritten, want.first_eager_unwritten) << what;
        for (int64_t i = 0; i < n; ++i) {
          if (std::isnan(host_ref[i])) {
            ASSERT_TRUE(std::isnan(dev_ref[i])) << what << " at " << i;
          } else {
            ASSERT_EQ(dev_ref[i], host_ref[i]) << what << " at " << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kfuse
