#include "codegen/numeric.h"

#include <cmath>
#include <cstdint>
#include <limits>

namespace kfuse {
namespace {

// Rounds to a binary float format with `precision` significand bits (the
// implicit bit included), smallest normal 2^(min_exp-1) and largest finite
// `max_finite`, to nearest even. The scaling by powers of two is exact.
double RoundFloat(double x, int precision, int min_exp, double max_finite) {
  if (!std::isfinite(x) || x == 0) return x;
  int e = 0;
  std::frexp(x, &e);  // x = m * 2^e, 0.5 <= |m| < 1.
  if (e < min_exp) e = min_exp;
  double quantum = std::ldexp(1.0, e - precision);
  double r = std::nearbyint(x / quantum) * quantum;  // FE_TONEAREST: ties to even.
  if (std::fabs(r) > max_finite) return std::copysign(HUGE_VAL, x);
  return r;
}

double Truncate(double x, double lo, double hi) {
  if (std::isnan(x)) return 0;
  double t = std::trunc(x);
  if (t < lo) return lo;
  if (t > hi) return hi;
  return t;
}

}  // namespace

double RoundTo(DType t, double x) {
  switch (t) {
    case DType::kF32:
      return RoundFloat(x, 24, -125, static_cast<double>(std::numeric_limits<float>::max()));
    case DType::kF16:
      return RoundFloat(x, 11, -13, 65504.0);
    case DType::kBF16:
      return RoundFloat(x, 8, -125, std::ldexp(255.0, 120));
    case DType::kI32:
      return Truncate(x, -2147483648.0, 2147483647.0);
    case DType::kI64:
      // Doubles at or above 2^63 saturate to the largest double below it.
      return Truncate(x, -9223372036854775808.0, 9223372036854774784.0);
    case DType::kBool:
      return x != 0 ? 1.0 : 0.0;
    case DType::kF64:
    case DType::kInvalid:
      break;
  }
  return x;
}

bool IsExactIn(DType t, double x) {
  if (std::isnan(x) || std::isinf(x)) return IsFloat(t);
  switch (t) {
    case DType::kBool:
      return x == 0 || x == 1;
    case DType::kF64:
      return true;
    case DType::kInvalid:
      return false;
    default:
      return RoundTo(t, x) == x;
  }
}

int32_t WrapI32(int64_t v) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
}

}  // namespace kfuse
