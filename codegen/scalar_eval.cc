#include "codegen/scalar_eval.h"

#include <cmath>
#include <limits>

#include "codegen/numeric.h"
#include "core/status.h"

namespace kfuse {
namespace {

template <typename T>
T FloatUnary(OpKind k, T x) {
  const T one = 1, half = 0.5;
  switch (k) {
    case OpKind::kNeg:
      return -x;
    case OpKind::kAbs:
      return std::fabs(x);
    case OpKind::kExp:
      return std::exp(x);
    case OpKind::kExp2:
      return std::exp2(x);
    case OpKind::kLog:
      return std::log(x);
    case OpKind::kLog2:
      return std::log2(x);
    case OpKind::kSqrt:
      return std::sqrt(x);
    case OpKind::kRsqrt:
      return one / std::sqrt(x);
    case OpKind::kReciprocal:
      return one / x;
    case OpKind::kSin:
      return std::sin(x);
    case OpKind::kCos:
      return std::cos(x);
    case OpKind::kTanh:
      return std::tanh(x);
    case OpKind::kSigmoid:
      return one / (one + std::exp(-x));
    case OpKind::kRelu:
      return std::isnan(x) ? x : (x > 0 ? x : T(0));
    case OpKind::kGeluErf:
      return half * x * (one + std::erf(x * T(0.70710678118654752440)));
    case OpKind::kGeluTanh:
      return half * x *
             (one + std::tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x)));
    case OpKind::kSilu:
      return x / (one + std::exp(-x));
    case OpKind::kSoftplus:
      return x > T(20) ? x : std::log1p(std::exp(x));
    case OpKind::kSquare:
      return x * x;
    case OpKind::kErf:
      return std::erf(x);
    case OpKind::kFloor:
      return std::floor(x);
    case OpKind::kCeil:
      return std::ceil(x);
    default:
      break;
  }
  KFUSE_CHECK(false);
  return 0;
}

template <typename T>
T FloatBinary(OpKind k, T a, T b) {
  switch (k) {
    case OpKind::kAdd:
      return a + b;
    case OpKind::kSub:
      return a - b;
    case OpKind::kMul:
      return a * b;
    case OpKind::kDiv:
      return a / b;
    case OpKind::kMaximum:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : (a > b ? a : b);
    case OpKind::kMinimum:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : (a < b ? a : b);
    case OpKind::kPow:
      return std::pow(a, b);
    default:
      break;
  }
  KFUSE_CHECK(false);
  return 0;
}

// Integer power wrapping at the compute type's width (`wide`: i64).
int64_t IntPow(int64_t base, int64_t e, bool wide) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? (e % 2 ? -1 : 1) : 0;
  // Products modulo 2^64; an i32 power keeps its low 32 bits, sign-extended.
  const auto narrow = [wide](uint64_t v) {
    return wide ? v : static_cast<uint64_t>(static_cast<int64_t>(WrapI32(static_cast<int64_t>(v))));
  };
  uint64_t r = 1, x = static_cast<uint64_t>(base);
  for (; e > 0; e >>= 1) {
    if (e & 1) r = narrow(r * x);
    x = narrow(x * x);
  }
  return static_cast<int64_t>(r);
}

// Integer (or bool) arithmetic in 64 bits, wrapping as two's complement
// (unsigned, so no overflow is undefined); an i32 result is wrapped to 32
// bits by the caller. `wide`: the op computes in i64.
int64_t IntOp(OpKind k, int64_t a, int64_t b, bool wide) {
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (k) {
    case OpKind::kNeg:
      return static_cast<int64_t>(0 - ua);
    case OpKind::kAbs:
      return a < 0 ? static_cast<int64_t>(0 - ua) : a;
    case OpKind::kRelu:
      return a > 0 ? a : 0;
    case OpKind::kSquare:
      return static_cast<int64_t>(ua * ua);
    case OpKind::kFloor:
    case OpKind::kCeil:
      return a;
    case OpKind::kAdd:
      return static_cast<int64_t>(ua + ub);
    case OpKind::kSub:
      return static_cast<int64_t>(ua - ub);
    case OpKind::kMul:
      return static_cast<int64_t>(ua * ub);
    case OpKind::kMaximum:
      return a > b ? a : b;
    case OpKind::kMinimum:
      return a < b ? a : b;
    case OpKind::kPow:
      return IntPow(a, b, wide);
    default:
      break;
  }
  KFUSE_CHECK(false);
  return 0;
}

bool Compare(OpKind k, double a, double b) {
  switch (k) {
    case OpKind::kEq:
      return a == b;
    case OpKind::kNe:
      return a != b;
    case OpKind::kLt:
      return a < b;
    case OpKind::kLe:
      return a <= b;
    case OpKind::kGt:
      return a > b;
    case OpKind::kGe:
      return a >= b;
    default:
      break;
  }
  KFUSE_CHECK(false);
  return false;
}

// The type eager PyTorch computes in: f32 for the half types ("opmath").
DType OpMath(DType compute) {
  return compute == DType::kF16 || compute == DType::kBF16 ? DType::kF32 : compute;
}

}  // namespace

double EvalScalar(const Node& n, DType compute, absl::Span<const double> args, bool eager) {
  const OpKind k = n.kind;
  const DType out = n.type.dtype;
  if (k == OpKind::kCast) {
    // i64 to i32 keeps the low 32 bits, as torch's .to(torch.int32) and
    // the kernels' (int) conversion do; other casts truncate or round.
    if (compute == DType::kI64 && n.dtype == DType::kI32) {
      return WrapI32(static_cast<int64_t>(args[0]));
    }
    return RoundTo(n.dtype, args[0]);
  }
  if (k == OpKind::kWhere) {
    double v = args[0] != 0 ? args[1] : args[2];
    return eager || !IsFloat(out) ? RoundTo(out, v) : v;
  }
  if (k == OpKind::kLogicalNot) return args[0] != 0 ? 0.0 : 1.0;
  if (k == OpKind::kLogicalAnd) return (args[0] != 0 && args[1] != 0) ? 1.0 : 0.0;
  if (k == OpKind::kLogicalOr) return (args[0] != 0 || args[1] != 0) ? 1.0 : 0.0;

  const DType math = OpMath(compute);
  double a = args[0], b = args.size() > 1 ? args[1] : 0;
  if (eager) {
    a = RoundTo(math, a);
    b = RoundTo(math, b);
  }
  if (IsComparison(k)) return Compare(k, a, b) ? 1.0 : 0.0;

  double r;
  if (!IsFloat(compute)) {
    r = static_cast<double>(IntOp(k, static_cast<int64_t>(a), static_cast<int64_t>(b), compute == DType::kI64));
    if (compute == DType::kI32) r = WrapI32(static_cast<int64_t>(r));
  } else if (eager && math == DType::kF32) {
    float fa = static_cast<float>(a), fb = static_cast<float>(b);
    r = IsUnary(k) ? FloatUnary<float>(k, fa) : FloatBinary<float>(k, fa, fb);
  } else {
    r = IsUnary(k) ? FloatUnary<double>(k, a) : FloatBinary<double>(k, a, b);
  }
  return eager || !IsFloat(out) ? RoundTo(out, r) : r;
}

bool FoldExactly(const Node& n, DType compute, absl::Span<const double> args, double* result) {
  switch (n.kind) {
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kRelu:
    case OpKind::kSquare:
    case OpKind::kFloor:
    case OpKind::kCeil:
    case OpKind::kLogicalNot:
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kMaximum:
    case OpKind::kMinimum:
    case OpKind::kEq:
    case OpKind::kNe:
    case OpKind::kLt:
    case OpKind::kLe:
    case OpKind::kGt:
    case OpKind::kGe:
    case OpKind::kLogicalAnd:
    case OpKind::kLogicalOr:
    case OpKind::kWhere:
      break;
    default:
      return false;
  }
  DType math = OpMath(compute);
  for (double a : args) {
    if (!std::isfinite(a)) return false;
    // Eager code would round an operand on conversion: not exact.
    if (n.kind != OpKind::kWhere && IsFloat(math) && !IsExactIn(math, a)) return false;
  }
  double r = EvalScalar(n, compute, args, /*eager=*/false);
  if (!std::isfinite(r)) return false;
  double a = args[0], b = args.size() > 1 ? args[1] : 0;
  switch (n.kind) {
    case OpKind::kAdd:
    case OpKind::kSub: {
      double bb = n.kind == OpKind::kAdd ? b : -b;
      double s = a + bb, v = s - a;
      if ((a - (s - v)) + (bb - v) != 0) return false;  // TwoSum error term.
      break;
    }
    case OpKind::kMul:
      if (std::fma(a, b, -(a * b)) != 0) return false;
      break;
    case OpKind::kSquare:
      if (std::fma(a, a, -(a * a)) != 0) return false;
      break;
    case OpKind::kDiv:
      if (b == 0 || std::fma(r, b, -a) != 0) return false;
      break;
    default:
      break;
  }
  // Integer arithmetic must not have wrapped.
  if (!IsFloat(compute) && (IsUnary(n.kind) || IsBinary(n.kind)) && !IsComparison(n.kind) &&
      n.kind != OpKind::kLogicalAnd && n.kind != OpKind::kLogicalOr &&
      n.kind != OpKind::kLogicalNot) {
    double unwrapped =
        IsUnary(n.kind) ? FloatUnary<double>(n.kind, a) : FloatBinary<double>(n.kind, a, b);
    if (compute == DType::kBool) unwrapped = unwrapped != 0;
    if (unwrapped != r && compute != DType::kBool) return false;
  }
  if (!IsExactIn(n.type.dtype, r)) return false;
  *result = r;
  return true;
}

}  // namespace kfuse
