#include "tuner/check.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status.h"
#include "tuner/worker_shared_code.h"

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

double ElementToDouble(DType dtype, const void* data, int64_t i) {
  switch (dtype) {
    case DType::kF32:
      return Load<float>(data, i);
    case DType::kF64:
      return Load<double>(data, i);
    case DType::kF16:
      return HalfToFloat(Load<uint16_t>(data, i));
    case DType::kBF16:
      return BF16ToFloat(Load<uint16_t>(data, i));
    case DType::kI32:
      return Load<int32_t>(data, i);
    case DType::kI64:
      return static_cast<double>(Load<int64_t>(data, i));
    case DType::kBool:
      return Load<uint8_t>(data, i);
    case DType::kInvalid:
      break;
  }
  KFUSE_CHECK(false && "ElementToDouble of kInvalid");
  return 0;
}

std::vector<double> ToDouble(DType dtype, const void* data, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = ElementToDouble(dtype, data, i);
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
  for (double r : ref) {
    if (std::isfinite(r)) s.max_abs_ref = std::max(s.max_abs_ref, std::fabs(r));
  }
  const int dt = static_cast<int>(dtype);
  const double floor = shared_code::kf_far_floor(dt, s.max_abs_ref);
  for (size_t i = 0; i < ref.size(); ++i) {
    double r = ref[i], c = shared_code::kf_judged(static_cast<int>(dtype), ref[i], got[i]);
    bool r_finite = std::isfinite(r), c_finite = std::isfinite(c);
    if (r_finite && c_finite) {
      double e = std::fabs(c - r);
      if (e > 0) ++s.mismatched;
      if (shared_code::kf_far(dt, r, c, floor) && s.far++ == 0) s.first_far = static_cast<int64_t>(i);
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

CompareStats CompareOnHost(DType dtype, const void* data, absl::Span<const double> ref) {
  CompareStats s;
  s.unwritten = CountUnwritten(dtype, data, ref, &s.first_unwritten);
  s.err = CompareToReference(dtype, data, ref);
  return s;
}

OutputCheck JudgeOutput(DType dtype, const CompareStats& stats, int64_t n, const ErrorStats& eager, double slack,
                        const std::string& name, const ValuesAt& at) {
  const double eager_max_err = eager.max_abs_err;
  OutputCheck c;
  const ErrorStats& s = stats.err;
  if (stats.unwritten > 0) {
    c.message = absl::StrCat(name, ": ", stats.unwritten, " of ", n,
                             " elements not written (first at ", stats.first_unwritten, ")");
    return c;
  }
  c.max_abs_err = s.max_abs_err;
  if (s.special_mismatches > 0) {
    auto [got, want] = at(s.first_special_mismatch);
    c.message = absl::StrFormat(
        "%s: NaN/inf positions differ at %d elements (first at %d: got %g, want %g)", name,
        s.special_mismatches, s.first_special_mismatch, got, want);
    return c;
  }
  if (!IsFloat(dtype)) {
    const double allowed = slack * static_cast<double>(eager.mismatched) + kFewMismatches;
    if (static_cast<double>(s.mismatched) > allowed) {
      auto [got, want] = at(s.worst_index);
      c.message = absl::StrFormat(
          "%s: %d of %d elements differ from the reference (eager: %d; at most %.0f), worst at element %d "
          "(got %.8g, want %.8g)",
          name, s.mismatched, n, eager.mismatched, allowed, s.worst_index, got, want);
      return c;
    }
  }
  double tol = Tolerance(dtype, eager_max_err, s.max_abs_ref, slack);
  if (s.max_abs_err > tol) {
    auto [got, want] = at(s.worst_index);
    c.message = absl::StrFormat(
        "%s: max abs error %.3g at element %d (got %.8g, want %.8g) exceeds tolerance %.3g "
        "(eager error %.3g x slack %g + 4 eps x max|ref| %.3g)",
        name, s.max_abs_err, s.worst_index, got, want, tol, eager_max_err, slack, s.max_abs_ref);
    return c;
  }
  const double far_allowed = slack * static_cast<double>(eager.far) + static_cast<double>(FewFar(n));
  if (static_cast<double>(s.far) > far_allowed) {
    auto [got, want] = at(s.first_far);
    c.message = absl::StrFormat(
        "%s: %d of %d elements are off by more than %g of their reference value (eager: %d; at most %.0f), "
        "first at element %d (got %.8g, want %.8g)",
        name, s.far, n, DTypeEpsilon(dtype), eager.far, far_allowed, s.first_far, got, want);
    return c;
  }
  c.ok = true;
  c.message = absl::StrFormat("%s: max abs error %.3g (tolerance %.3g)", name, s.max_abs_err, tol);
  return c;
}

OutputCheck CheckOutput(DType dtype, const void* data, absl::Span<const double> ref, const ErrorStats& eager,
                        double slack, const std::string& name) {
  CompareStats s = CompareOnHost(dtype, data, ref);
  return JudgeOutput(dtype, s, static_cast<int64_t>(ref.size()), eager, slack, name,
                     [&](int64_t i) {
                       return std::make_pair(ElementToDouble(dtype, data, i),
                                             ref[static_cast<size_t>(i)]);
                     });
}

PrepStats PrepareReference(DType eager_dtype, const void* eager, absl::Span<double> ref) {
  PrepStats p;
  for (size_t i = 0; i < ref.size(); ++i) {
    unsigned char bytes[8];
    std::memcpy(bytes, &ref[i], 8);
    bool all = true;
    for (unsigned char b : bytes) all = all && b == kPoisonByte;
    if (all && p.ref_unwritten++ == 0) p.first_ref_unwritten = static_cast<int64_t>(i);
  }
  p.eager_unwritten = CountUnwritten(eager_dtype, eager, ref, &p.first_eager_unwritten);
  std::vector<double> e = ToDouble(eager_dtype, eager, static_cast<int64_t>(ref.size()));
  for (size_t i = 0; i < ref.size(); ++i) {
    bool special = !std::isfinite(ref[i]) || !std::isfinite(e[i]);
    bool same = (std::isnan(ref[i]) && std::isnan(e[i])) || ref[i] == e[i];
    if (special && !same) ref[i] = e[i];
  }
  return p;
}

}  // namespace kfuse
