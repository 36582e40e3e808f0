// Test data for comparing outputs against a reference: every case the check
// distinguishes (errors, NaN and inf matches and mismatches, poison where the
// reference is and is not NaN, bool bytes above 1), in any output dtype.
// Shared by the host tests of the GPU helpers' logic and their GPU tests.
//
//   CheckCase c = MakeCheckCase(DType::kBF16, 3000, /*seed=*/1);
//   CompareStats want = CompareOnHost(c.dtype, c.got.data(), c.ref);
#ifndef KFUSE_TUNER_CHECK_TEST_DATA_H_
#define KFUSE_TUNER_CHECK_TEST_DATA_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "tuner/check.h"

namespace kfuse::testing_check {

struct CheckCase {
  DType dtype;
  std::string got;          // n elements of dtype, raw.
  std::vector<double> ref;  // n f64 (some all-0xFF, for the reference's own check).
};

inline void Store(DType t, double v, char* p) {
  switch (t) {
    case DType::kF32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case DType::kF64:
      std::memcpy(p, &v, 8);
      return;
    case DType::kF16: {
      uint16_t h = FloatToHalf(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      return;
    }
    case DType::kBF16: {
      uint16_t h = FloatToBF16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      return;
    }
    default:
      break;
  }
  double w = std::isfinite(v) ? v : 0;
  if (t == DType::kI32) {
    auto x = static_cast<int32_t>(w);
    std::memcpy(p, &x, 4);
  } else if (t == DType::kI64) {
    auto x = static_cast<int64_t>(w);
    std::memcpy(p, &x, 8);
  } else if (t == DType::kBool) {
    *p = static_cast<char>(w != 0);
  }
}

// Element i cycles through the cases; values and errors vary with seed.
inline CheckCase MakeCheckCase(DType t, int64_t n, uint64_t seed) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const int bytes = DTypeBytes(t);
  CheckCase c{t, std::string(static_cast<size_t>(n) * bytes, '\0'), std::vector<double>(n)};
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 12345;
  auto next = [&] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<double>(s % 100000) / 1000.0 - 50.0;  // [-50, 50)
  };
  for (int64_t i = 0; i < n; ++i) {
    char* p = c.got.data() + i * bytes;
    double v = next();
    if (t == DType::kBool) v = v > 0;
    if (t == DType::kI32 || t == DType::kI64) v = std::floor(v);
    double r = v, g = v;
    bool poison = false;
    switch (i % 11) {
      case 0:
        g = v + 1e-3 * next();
        break;
      case 1:
        r = g = nan;
        break;
      case 2:
        r = nan;
        g = 1;
        break;
      case 3:
        r = g = inf;
        break;
      case 4:
        r = -inf;
        g = inf;
        break;
      case 5:
        poison = true;
        break;
      case 6:
        r = nan;
        poison = true;
        break;
      case 7:
        break;
      case 8:
        r = 1e30;
        g = inf;
        break;
      case 9:  // A reference element its kernel never wrote.
        std::memset(&r, 0xFF, 8);
        break;
      case 10:
        g = v + 0.5 * next();
        break;
    }
    c.ref[i] = r;
    if (poison) {
      std::memset(p, kPoisonByte, bytes);
    } else {
      Store(t, g, p);
    }
  }
  return c;
}

// A 16-bit float output of a softmax's shape: one value near 1, the others
// 1e-3 to 2e-2 with one in 7 of them 5% off (far: kf_far), and one in 13 set
// to 1e-7 (far below 2^-10 of the largest) and written as 0 (not far). No
// element matches MakeCheckCase's huge values, so the far count is not
// hidden under a floor they set.
inline CheckCase MakeFarCase(DType t, int64_t n, uint64_t seed) {
  CheckCase c{t, std::string(static_cast<size_t>(n) * DTypeBytes(t), '\0'), std::vector<double>(n)};
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 777;
  for (int64_t i = 0; i < n; ++i) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    double r = i == 0 ? 0.999 : 1e-3 + 1.9e-2 * static_cast<double>(s % 1000) / 1000.0;
    double g = r;
    if (i % 7 == 3) g = r * 1.05;
    if (i % 13 == 5) {
      r = 1e-7;
      g = 0;
    }
    c.ref[static_cast<size_t>(i)] = r;
    Store(t, g, c.got.data() + i * DTypeBytes(t));
  }
  return c;
}

inline std::vector<DType> AllOutputDTypes() {
  return {DType::kF32, DType::kF16, DType::kBF16, DType::kI32,
          DType::kBool, DType::kI64, DType::kF64};
}

}  // namespace kfuse::testing_check

#endif  // KFUSE_TUNER_CHECK_TEST_DATA_H_
