#include "tuner/check.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"

namespace kfuse {
namespace {

template <typename T>
T Load(const void* data, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(data) + i * sizeof(T), sizeof(T));
  return v;
}

bool AllPoison(const void* data, int64_t i, int bytes) {
  const auto* p = static_cast<const unsigned char*>(data) + i * bytes;
  for (int b = 0; b < bytes; ++b) {
    if (p[b] != kPoisonByte) return false;
  }
  return true;
}

}  // namespace

uint16_t FloatToHalf(float x) {
  uint32_t f;
  std::memcpy(&f, &x, 4);
  uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000);
  f &= 0x7fffffff;
  if (f >= 0x7f800000) return sign | (f > 0x7f800000 ? 0x7e00 : 0x7c00);
  if (f >= 0x477ff000) return sign | 0x7c00;  // >= 65520 rounds to inf.
  if (f < 0x38800000) {                       // Below 2^-14: subnormal or zero.
    float a;
    std::memcpy(&a, &f, 4);
    // Exact scaling by 2^24, then round-to-nearest-even (the default mode).
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  uint32_t r = f + 0xfff + ((f >> 13) & 1);
  return sign | static_cast<uint16_t>((r >> 13) - (112u << 10));
}

uint16_t FloatToBF16(float x) {
  uint32_t f;
  std::memcpy(&f, &x, 4);
  if ((f & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((f >> 16) | 0x40);
  return static_cast<uint16_t>((f + 0x7fff + ((f >> 16) & 1)) >> 16);
}

float HalfToFloat(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  int mant = h & 0x3ff;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);
  } else if (exp == 31) {
    v = mant ? std::nanf("") : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(1024 + mant), exp - 25);
  }
  return (h & 0x8000) ? -v : v;
}

float BF16ToFloat(uint16_t b) {
  uint32_t f = static_cast<uint32_t>(b) << 16;
  float v;
  std::memcpy(&v, &f, 4);
  return v;
}

std::vector<double> ToDouble(DType dtype, const void* data, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    switch (dtype) {
      case DType::kF32:
        v = Load<float>(data, i);
        break;
      case DType::kF64:
        v = Load<double>(data, i);
        break;
      case DType::kF16:
        v = HalfToFloat(Load<uint16_t>(data, i));
        break;
      case DType::kBF16:
        v = BF16ToFloat(Load<uint16_t>(data, i));
        break;
      case DType::kI32:
        v = Load<int32_t>(data, i);
        break;
      case DType::kI64:
        v = static_cast<double>(Load<int64_t>(data, i));
        break;
      case DType::kBool:
        v = Load<uint8_t>(data, i);
        break;
      case DType::kInvalid:
        KFUSE_CHECK(false && "ToDouble of kInvalid");
    }
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

double DTypeEpsilon(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return std::ldexp(1.0, -23);
    case DType::kF16:
      return std::ldexp(1.0, -10);
    case DType::kBF16:
      return std::ldexp(1.0, -7);
    case DType::kF64:
      return std::ldexp(1.0, -52);
    default:
      return 0;
  }
}

ErrorStats CompareToReference(DType dtype, const void* data, absl::Span<const double> ref) {
  std::vector<double> got = ToDouble(dtype, data, static_cast<int64_t>(ref.size()));
  ErrorStats s;
  for (size_t i = 0; i < ref.size(); ++i) {
    double r = ref[i], c = got[i];
    bool r_finite = std::isfinite(r), c_finite = std::isfinite(c);
    if (r_finite) s.max_abs_ref = std::max(s.max_abs_ref, std::fabs(r));
    if (r_finite && c_finite) {
      double e = std::fabs(c - r);
      if (e > s.max_abs_err || s.worst_index < 0) {
        if (e > s.max_abs_err) s.max_abs_err = e;
        s.worst_index = static_cast<int64_t>(i);
      }
      continue;
    }
    // At least one is NaN or inf: both NaN, or the same infinity, is a match.
    bool match = (std::isnan(r) && std::isnan(c)) || (!std::isnan(r) && r == c);
    if (!match) {
      if (s.special_mismatches++ == 0) s.first_special_mismatch = static_cast<int64_t>(i);
    }
  }
  return s;
}

double Tolerance(DType dtype, double eager_max_err, double max_abs_ref, double slack) {
  return slack * eager_max_err + 4 * DTypeEpsilon(dtype) * max_abs_ref;
}

int64_t CountUnwritten(DType dtype, const void* data, absl::Span<const double> ref,
                       int64_t* first) {
  int64_t count = 0;
  if (first) *first = -1;
  int bytes = DTypeBytes(dtype);
  for (size_t i = 0; i < ref.size(); ++i) {
    bool unwritten = false;
    auto idx = static_cast<int64_t>(i);
    if (dtype == DType::kBool) {
      unwritten = Load<uint8_t>(data, idx) > 1;
    } else if (IsFloat(dtype)) {
      unwritten = !std::isnan(ref[i]) && AllPoison(data, idx, bytes);
    }
    if (unwritten && count++ == 0 && first) *first = idx;
  }
  return count;
}

OutputCheck CheckOutput(DType dtype, const void* data, absl::Span<const double> ref,
                        double eager_max_err, double slack, const std::string& name) {
  OutputCheck c;
  int64_t first = -1;
  int64_t unwritten = CountUnwritten(dtype, data, ref, &first);
  std::vector<double> got = ToDouble(dtype, data, static_cast<int64_t>(ref.size()));
  if (unwritten > 0) {
    c.message = absl::StrCat(name, ": ", unwritten, " of ", ref.size(),
                             " elements not written (first at ", first, ")");
    return c;
  }
  ErrorStats s = CompareToReference(dtype, data, ref);
  c.max_abs_err = s.max_abs_err;
  if (s.special_mismatches > 0) {
    size_t i = static_cast<size_t>(s.first_special_mismatch);
    c.message = absl::StrFormat(
        "%s: NaN/inf positions differ at %d elements (first at %d: got %g, want %g)", name,
        s.special_mismatches, s.first_special_mismatch, got[i], ref[i]);
    return c;
  }
  double tol = Tolerance(dtype, eager_max_err, s.max_abs_ref, slack);
  if (s.max_abs_err > tol) {
    size_t i = static_cast<size_t>(s.worst_index);
    c.message = absl::StrFormat(
        "%s: max abs error %.3g at element %d (got %.8g, want %.8g) exceeds tolerance %.3g "
        "(eager error %.3g x slack %g + 4 eps x max|ref| %.3g)",
        name, s.max_abs_err, s.worst_index, got[i], ref[i], tol, eager_max_err, slack,
        s.max_abs_ref);
    return c;
  }
  c.ok = true;
  c.message = absl::StrFormat("%s: max abs error %.3g (tolerance %.3g)", name, s.max_abs_err, tol);
  return c;
}

}  // namespace kfuse
