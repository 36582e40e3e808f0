#include "tuner/check.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

ErrorStats Eager(double max_abs_err, int64_t mismatched = 0) {
  ErrorStats s;
  s.max_abs_err = max_abs_err;
  s.mismatched = mismatched;
  return s;
}

std::vector<float> Poisoned(size_t n) {
  std::vector<float> v(n);
  std::memset(v.data(), kPoisonByte, n * sizeof(float));
  return v;
}

TEST(CheckTest, HalfAndBF16RoundTrip) {
  struct Case {
    float in;
    float half;
    float bf16;
  };
  const Case cases[] = {
      {1.0f, 1.0f, 1.0f},
      {-2.5f, -2.5f, -2.5f},
      {65504.0f, 65504.0f, 65536.0f},
      {1e-7f, std::ldexp(2.0f, -24), 1e-7f},       // Half subnormal: rounds to 2 x 2^-24.
      {1.0f + std::ldexp(1.0f, -11), 1.0f, 1.0f},  // Tie: rounds to even.
      {70000.0f, INFINITY, 70144.0f},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(c.in)), c.half) << c.in;
    EXPECT_NEAR(BF16ToFloat(FloatToBF16(c.in)), c.bf16, std::fabs(c.bf16) * 1e-2) << c.in;
  }
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(NAN))));
  EXPECT_TRUE(std::isnan(BF16ToFloat(FloatToBF16(NAN))));
  EXPECT_EQ(FloatToBF16(1.0f + std::ldexp(1.0f, -8)), FloatToBF16(1.0f));  // Tie to even.
  // The poison pattern decodes as NaN in every float type.
  EXPECT_TRUE(std::isnan(HalfToFloat(0xFFFF)));
  EXPECT_TRUE(std::isnan(BF16ToFloat(0xFFFF)));
}

TEST(CheckTest, WithinTolerancePasses) {
  std::vector<double> ref = {1.0, -2.0, 3.0, kNaN, kInf};
  std::vector<float> got = {1.0f + 1e-6f, -2.0f, 3.0f - 2e-6f, NAN, INFINITY};
  OutputCheck c = CheckOutput(DType::kF32, got.data(), ref, Eager(/*eager_max_err=*/1.5e-6), 2.0);
  EXPECT_TRUE(c.ok) << c.message;
  EXPECT_NEAR(c.max_abs_err, 2e-6, 1e-7);
}

TEST(CheckTest, ErrorAboveToleranceFails) {
  std::vector<double> ref = {1.0, 2.0, 3.0};
  std::vector<float> got = {1.0f, 2.01f, 3.0f};
  OutputCheck c = CheckOutput(DType::kF32, got.data(), ref, Eager(1e-6), 2.0, "output 1");
  EXPECT_FALSE(c.ok);
  EXPECT_THAT(c.message, HasSubstr("output 1"));
  EXPECT_THAT(c.message, HasSubstr("element 1"));
}

TEST(CheckTest, FloorAllowsAFewRoundingsWhenEagerIsExact) {
  // Eager exact (err 0), candidate one bf16 ulp off at magnitude 2: within
  // 4 eps x max|ref| = 4 * 2^-7 * 2.
  std::vector<double> ref = {2.0, 1.0};
  std::vector<uint16_t> got = {FloatToBF16(2.0f + 2 * std::ldexp(1.0f, -7)), FloatToBF16(1.0f)};
  EXPECT_TRUE(CheckOutput(DType::kBF16, got.data(), ref, Eager(0.0), 2.0).ok);
  got[0] = FloatToBF16(2.25f);  // 8 ulps: too far.
  EXPECT_FALSE(CheckOutput(DType::kBF16, got.data(), ref, Eager(0.0), 2.0).ok);
}

TEST(CheckTest, NaNPositionMismatchFails) {
  struct Case {
    const char* name;
    double ref;
    float got;
  };
  const Case cases[] = {
      {"NaN expected, finite got", kNaN, 1.0f},    {"finite expected, NaN got", 1.0, NAN},
      {"inf expected, finite got", kInf, 1e30f},   {"inf sign differs", kInf, -INFINITY},
      {"finite expected, inf got", 1.0, INFINITY},
  };
  for (const Case& c : cases) {
    std::vector<double> ref = {0.5, c.ref};
    std::vector<float> got = {0.5f, c.got};
    OutputCheck r = CheckOutput(DType::kF32, got.data(), ref, Eager(/*eager_max_err=*/1e9), 2.0);
    EXPECT_FALSE(r.ok) << c.name;
    EXPECT_THAT(r.message, HasSubstr("NaN/inf positions differ")) << c.name;
  }
}

// Where the reference is past the output dtype's range, the dtype's
// infinity of its sign is exact (a kernel keeping its product in f32 may
// overflow where eager's rounded product did not); elsewhere, or of the
// other sign, infinity is wrong; a finite value there is judged by its error.
TEST(CheckTest, AReferenceBeyondTheDTypesRangeIsInfinity) {
  std::vector<double> ref = {0.5, 3.48e38};  // Above bf16's largest finite value.
  std::vector<uint16_t> got = {FloatToBF16(0.5f), FloatToBF16(INFINITY)};
  OutputCheck r = CheckOutput(DType::kBF16, got.data(), ref, Eager(1e-3), 2.0);
  EXPECT_TRUE(r.ok) << r.message;
  for (double bad : {3.3e38, -3.48e38}) {  // Within range; the other sign.
    ref[1] = bad;
    r = CheckOutput(DType::kBF16, got.data(), ref, Eager(1e-3), 2.0);
    EXPECT_FALSE(r.ok) << bad;
    EXPECT_THAT(r.message, HasSubstr("NaN/inf positions differ")) << bad;
  }
  // f32 and f16 by their own ranges.
  std::vector<float> f = {0.5f, INFINITY};
  EXPECT_TRUE(CheckOutput(DType::kF32, f.data(), std::vector<double>{0.5, 3.5e38}, Eager(1e-3), 2.0).ok);
  EXPECT_FALSE(CheckOutput(DType::kF32, f.data(), std::vector<double>{0.5, 3.4e38}, Eager(1e-3), 2.0).ok);
  std::vector<uint16_t> h = {0x3800, 0x7c00};  // f16 0.5, inf.
  EXPECT_TRUE(CheckOutput(DType::kF16, h.data(), std::vector<double>{0.5, 65520.0}, Eager(1e-3), 2.0).ok);
  EXPECT_FALSE(CheckOutput(DType::kF16, h.data(), std::vector<double>{0.5, 65519.0}, Eager(1e-3), 2.0).ok);
}

TEST(CheckTest, PoisonLeftBehindIsUnwritten) {
  std::vector<double> ref = {1.0, 2.0, kNaN, 4.0};
  std::vector<float> got = Poisoned(4);
  got[0] = 1.0f;
  got[3] = 4.0f;
  // Element 1 still holds poison where the reference is 2: unwritten.
  // Element 2 holds poison where the reference is NaN: cannot tell, allowed.
  int64_t first = -2;
  EXPECT_EQ(CountUnwritten(DType::kF32, got.data(), ref, &first), 1);
  EXPECT_EQ(first, 1);
  OutputCheck c = CheckOutput(DType::kF32, got.data(), ref, Eager(1.0), 2.0);
  EXPECT_FALSE(c.ok);
  EXPECT_THAT(c.message, HasSubstr("1 of 4 elements not written (first at 1)"));
  got[1] = 2.0f;
  EXPECT_TRUE(CheckOutput(DType::kF32, got.data(), ref, Eager(0.0), 2.0).ok);
}

TEST(CheckTest, BoolPoisonAndExactness) {
  std::vector<double> ref = {0, 1, 1};
  std::vector<uint8_t> got = {0, 1, 0xFF};
  EXPECT_EQ(CountUnwritten(DType::kBool, got.data(), ref), 1);
  got[2] = 0;
  OutputCheck c = CheckOutput(DType::kBool, got.data(), ref, Eager(0.0), 2.0);
  EXPECT_FALSE(c.ok);  // Integers and bools must match exactly when eager does.
  got[2] = 1;
  EXPECT_TRUE(CheckOutput(DType::kBool, got.data(), ref, Eager(0.0), 2.0).ok);
}

// Eager decides one comparison otherwise than the exact reference: its
// error is 1, which as a tolerance would pass any bool output. The count of
// differing elements keeps the check: a few flips pass, a wrong mask fails.
TEST(CheckTest, ABoolOutputIsHeldToEagersCountOfFlips) {
  std::vector<double> ref(100);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = i % 3 == 0;
  std::vector<uint8_t> eager_out(ref.begin(), ref.end());
  eager_out[7] ^= 1;
  const ErrorStats eager = CompareToReference(DType::kBool, eager_out.data(), ref);
  EXPECT_EQ(eager.mismatched, 1);
  EXPECT_EQ(eager.max_abs_err, 1.0);

  std::vector<uint8_t> few(ref.begin(), ref.end());
  for (int i : {1, 2, 4, 5, 8, 10}) few[i] ^= 1;  // 6 = 2 x 1 + kFewMismatches.
  OutputCheck c = CheckOutput(DType::kBool, few.data(), ref, eager, 2.0);
  EXPECT_TRUE(c.ok) << c.message;

  few[11] ^= 1;
  c = CheckOutput(DType::kBool, few.data(), ref, eager, 2.0);
  EXPECT_FALSE(c.ok);
  EXPECT_THAT(c.message, HasSubstr("7 of 100 elements differ from the reference (eager: 1; at most 6)"));

  std::vector<uint8_t> zeros(ref.size(), 0);
  EXPECT_FALSE(CheckOutput(DType::kBool, zeros.data(), ref, eager, 2.0).ok);
  // Floats keep the error rule alone: every element of a float output differs.
  EXPECT_EQ(CompareToReference(DType::kF64, std::vector<double>(100, 0.5).data(), ref).mismatched, 100);
}

// A bf16 softmax-like output: one large value and many small ones. The
// max-abs tolerance scales with the largest, so small values wrong by a few
// percent pass it; the count of elements far from their own reference does
// not, while eager's own roundings (within half a unit in the last place) do.
TEST(CheckTest, SmallValuesOfA16BitOutputAreHeldToTheirOwnScale) {
  const int n = 4096;
  std::vector<double> ref(n);
  ref[0] = 1.0;
  for (int i = 1; i < n; ++i) ref[i] = 0.01 * (1.0 + static_cast<double>(i % 97) / 97.0);
  auto bf16 = [&](double scale) {
    std::vector<uint16_t> out(n);
    for (int i = 0; i < n; ++i) out[i] = FloatToBF16(static_cast<float>(i == 0 ? ref[i] : ref[i] * scale));
    return out;
  };
  const std::vector<uint16_t> eager_out = bf16(1.0);  // Rounded once.
  const ErrorStats eager = CompareToReference(DType::kBF16, eager_out.data(), ref);
  EXPECT_EQ(eager.far, 0);
  EXPECT_TRUE(CheckOutput(DType::kBF16, eager_out.data(), ref, eager, 2.0).ok);

  const std::vector<uint16_t> off = bf16(1.036);  // 3.6% on every small value.
  const ErrorStats off_stats = CompareToReference(DType::kBF16, off.data(), ref);
  EXPECT_LT(off_stats.max_abs_err, Tolerance(DType::kBF16, eager.max_abs_err, 1.0, 2.0));
  OutputCheck c = CheckOutput(DType::kBF16, off.data(), ref, eager, 2.0);
  EXPECT_FALSE(c.ok);
  EXPECT_THAT(c.message, HasSubstr("of 4096 elements are off by more than 0.0078125 of their reference value "
                                   "(eager: 0; at most 4), first at element 1"));

  // A few far elements (a cancellation) pass: FewFar(4096) = 4.
  std::vector<uint16_t> few = eager_out;
  for (int i : {5, 6, 7, 8}) few[i] = FloatToBF16(static_cast<float>(ref[i] * 1.05));
  EXPECT_TRUE(CheckOutput(DType::kBF16, few.data(), ref, eager, 2.0).ok);
  few[9] = FloatToBF16(static_cast<float>(ref[9] * 1.05));
  EXPECT_FALSE(CheckOutput(DType::kBF16, few.data(), ref, eager, 2.0).ok);

  // Values far below the output's scale (below 2^-10 of its largest) are
  // judged at that scale: flushed to zero, they are not far.
  std::vector<double> tiny_ref = ref;
  for (int i = 1; i < 100; ++i) tiny_ref[i] = 1e-24 * i;
  std::vector<uint16_t> flushed = eager_out;
  for (int i = 1; i < 100; ++i) flushed[i] = 0;
  EXPECT_EQ(CompareToReference(DType::kBF16, flushed.data(), tiny_ref).far, 0);
}

TEST(CheckTest, EagerErrorStats) {
  std::vector<double> ref = {1.0, kNaN, -3.0, kInf};
  std::vector<double> got = {1.5, kNaN, -3.25, 7.0};
  ErrorStats s = CompareToReference(DType::kF64, got.data(), ref);
  EXPECT_DOUBLE_EQ(s.max_abs_err, 0.5);
  EXPECT_EQ(s.worst_index, 0);
  EXPECT_DOUBLE_EQ(s.max_abs_ref, 3.0);
  EXPECT_EQ(s.special_mismatches, 1);
  EXPECT_EQ(s.first_special_mismatch, 3);
}

TEST(CheckTest, ToDoubleDecodesEveryType) {
  int32_t i32[] = {-7, 9};
  int64_t i64[] = {int64_t{1} << 40, -1};
  uint16_t h[] = {FloatToHalf(0.5f), FloatToHalf(-3.0f)};
  EXPECT_EQ(ToDouble(DType::kI32, i32, 2), (std::vector<double>{-7, 9}));
  EXPECT_EQ(ToDouble(DType::kI64, i64, 2), (std::vector<double>{1099511627776.0, -1}));
  EXPECT_EQ(ToDouble(DType::kF16, h, 2), (std::vector<double>{0.5, -3.0}));
  EXPECT_EQ(DTypeEpsilon(DType::kI32), 0);
  EXPECT_EQ(DTypeEpsilon(DType::kBF16), 1.0 / 128);
}

}  // namespace
}  // namespace kfuse
