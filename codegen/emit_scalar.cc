#include "codegen/emit_scalar.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codegen/validate.h"
#include "core/status.h"

namespace kfuse {
namespace {

bool IsFloatKind(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16;
}

bool IsDouble(Numerics n) { return n == Numerics::kReference64; }

// A float literal in float (kFast, kEager) or double (kReference64).
std::string FloatLiteral(double v, Numerics n) {
  const bool dbl = IsDouble(n);
  if (std::isnan(v)) {
    return dbl ? "__longlong_as_double(0x7ff8000000000000LL)" : "__int_as_float(0x7fc00000)";
  }
  if (std::isinf(v)) {
    std::string inf =
        dbl ? "__longlong_as_double(0x7ff0000000000000LL)" : "__int_as_float(0x7f800000)";
    return v < 0 ? absl::StrCat("(-", inf, ")") : inf;
  }
  std::string s = dbl ? absl::StrFormat("%a", v)
                      : absl::StrFormat("%af", static_cast<double>(static_cast<float>(v)));
  return s[0] == '-' ? absl::StrCat("(", s, ")") : s;
}

std::string IntLiteral(double v) {
  // Validation guarantees i32 constants are exact; saturate defensively.
  double c = std::fmin(std::fmax(v, -2147483648.0), 2147483647.0);
  int64_t i = std::isnan(c) ? 0 : static_cast<int64_t>(c);
  if (i == std::numeric_limits<int32_t>::min()) return "(-2147483647 - 1)";
  return i < 0 ? absl::StrCat("(", i, ")") : absl::StrCat(i);
}

// An i64 literal (validation keeps i64 constants within 2^53, exact).
std::string LongLiteral(double v) {
  double c = std::fmin(std::fmax(v, -9007199254740992.0), 9007199254740992.0);
  int64_t i = std::isnan(c) ? 0 : static_cast<int64_t>(c);
  return i < 0 ? absl::StrCat("(", i, "LL)") : absl::StrCat(i, "LL");
}

// libm name for the compute type: "expf" for float, "exp" for double.
std::string Fn(const char* name, Numerics n) {
  return IsDouble(n) ? std::string(name) : absl::StrCat(name, "f");
}

std::string Call(const std::string& f, const std::string& x) {
  return absl::StrCat(f, "(", x, ")");
}

// Chains with more accurate sin, cos and pow calls than this call them out
// of line (kOutlinedMath): NVRTC's time grows with each inlined slow path.
constexpr int kInlineHeavyCalls = 8;

bool IsHeavyCall(OpKind k) { return k == OpKind::kSin || k == OpKind::kCos || k == OpKind::kPow; }

bool OutlinesHeavyCalls(const Chain& chain) {
  int heavy = 0;
  for (const Node& nd : chain.nodes) heavy += IsHeavyCall(nd.kind);
  return heavy > kInlineHeavyCalls;
}

// The accurate sin, cos or pow of numerics `n`: "sinf" or "sin", or the
// out-of-line wrapper of it when `outline`.
std::string HeavyFn(const char* name, Numerics n, bool outline, PreludeNeeds* needs) {
  if (!outline) return Fn(name, n);
  needs->outlined_math = true;
  return absl::StrCat("kf_", Fn(name, n), "_ol");
}

// Int arithmetic wraps like PyTorch's: done in unsigned to avoid UB. `t`
// is the operands' type, int or long long.
std::string Wrap(const std::string& a, const char* op, const std::string& b, const std::string& t) {
  return absl::StrCat("((", t, ")((unsigned ", t, ")", a, " ", op, " (unsigned ", t, ")", b, "))");
}

absl::Status NoSupport(int32_t node, OpKind k, DType t) {
  return absl::UnimplementedError(absl::StrCat("node ", node, ": ", std::string(OpName(k)),
                                               " on ", std::string(DTypeName(t)),
                                               " is not supported by the generator"));
}

// i32 (`cd`) or i64 arithmetic.
absl::StatusOr<std::string> IntOp(int32_t node, OpKind k, DType cd, const std::vector<std::string>& a,
                                  PreludeNeeds* needs) {
  const std::string t = cd == DType::kI64 ? "long long" : "int";
  const std::string zero = cd == DType::kI64 ? "0LL" : "0";
  switch (k) {
    case OpKind::kNeg: return Wrap(zero, "-", a[0], t);
    case OpKind::kAbs: return absl::StrCat("(", a[0], " < 0 ? ", Wrap(zero, "-", a[0], t), " : ", a[0], ")");
    case OpKind::kSquare: return Wrap(a[0], "*", a[0], t);
    case OpKind::kRelu: return absl::StrCat("(", a[0], " < 0 ? ", zero, " : ", a[0], ")");
    case OpKind::kFloor:
    case OpKind::kCeil: return a[0];
    case OpKind::kAdd: return Wrap(a[0], "+", a[1], t);
    case OpKind::kSub: return Wrap(a[0], "-", a[1], t);
    case OpKind::kMul: return Wrap(a[0], "*", a[1], t);
    case OpKind::kMaximum:
      (cd == DType::kI64 ? needs->minmax64 : needs->minmax) = true;
      return absl::StrCat("kf_max(", a[0], ", ", a[1], ")");
    case OpKind::kMinimum:
      (cd == DType::kI64 ? needs->minmax64 : needs->minmax) = true;
      return absl::StrCat("kf_min(", a[0], ", ", a[1], ")");
    case OpKind::kPow:
      (cd == DType::kI64 ? needs->ipow64 : needs->ipow) = true;
      return absl::StrCat("kf_ipow(", a[0], ", ", a[1], ")");
    default: return NoSupport(node, k, cd);
  }
}

absl::StatusOr<std::string> BoolOp(int32_t node, OpKind k, const std::vector<std::string>& a) {
  switch (k) {
    case OpKind::kAdd:
    case OpKind::kMaximum: return absl::StrCat("(", a[0], " || ", a[1], ")");
    case OpKind::kMul:
    case OpKind::kMinimum: return absl::StrCat("(", a[0], " && ", a[1], ")");
    case OpKind::kAbs:
    case OpKind::kRelu:
    case OpKind::kFloor:
    case OpKind::kCeil:
    case OpKind::kSquare: return a[0];
    default: return NoSupport(node, k, DType::kBool);
  }
}

// Float ops in the compute type. `fast`: the node is f16/bf16 under kFast,
// so kf_exp_fast (ex2.approx as __expf: relative error ~2^-21 for moderate
// arguments, f32 subnormal results flushed to zero), MUFU sin/cos for
// |x| <= 1024 and, for bf16 only, tanh.approx (~2^-11) stay well under the
// dtype's rounding; f32 nodes and the reference use the accurate functions.
absl::StatusOr<std::string> FloatOp(int32_t node, OpKind k, DType result,
                                    const std::vector<std::string>& a, Numerics n, bool outline,
                                    PreludeNeeds* needs) {
  const bool fast = n == Numerics::kFast && (result == DType::kF16 || result == DType::kBF16);
  auto lit = [n](double v) { return FloatLiteral(v, n); };
  auto exp = [&](const std::string& x) {
    if (!fast) return Call(Fn("exp", n), x);
    needs->exp_fast = true;
    return Call("kf_exp_fast", x);
  };
  const std::string one = lit(1.0);
  const std::string& x = a[0];
  switch (k) {
    case OpKind::kNeg: return absl::StrCat("(-", x, ")");
    case OpKind::kAbs: return Call(Fn("fabs", n), x);
    case OpKind::kExp: return exp(x);
    case OpKind::kExp2: return Call(Fn("exp2", n), x);
    case OpKind::kLog: return Call(Fn("log", n), x);
    case OpKind::kLog2: return Call(Fn("log2", n), x);
    case OpKind::kSqrt: return Call(Fn("sqrt", n), x);
    case OpKind::kRsqrt:
      return IsDouble(n) ? absl::StrCat("(", one, " / sqrt(", x, "))") : Call("rsqrtf", x);
    case OpKind::kReciprocal: return absl::StrCat("(", one, " / ", x, ")");
    case OpKind::kSin:
    case OpKind::kCos:
      if (fast) {
        needs->sincos_fast = true;
        return Call(k == OpKind::kSin ? "kf_sin" : "kf_cos", x);
      }
      return Call(HeavyFn(k == OpKind::kSin ? "sin" : "cos", n, outline, needs), x);
    case OpKind::kTanh:
      if (fast && result == DType::kBF16) {
        needs->tanh_approx = true;
        return Call("kf_tanh_approx", x);
      }
      return Call(Fn("tanh", n), x);
    case OpKind::kSigmoid: return absl::StrCat("(", one, " / (", one, " + ", exp("-" + x), "))");
    // NaN < 0 is false, so relu(NaN) is NaN.
    case OpKind::kRelu: return absl::StrCat("(", x, " < ", lit(0.0), " ? ", lit(0.0), " : ", x, ")");
    case OpKind::kGeluErf:
      return absl::StrCat("(", x, " * ", lit(0.5), " * (", one, " + ", Fn("erf", n), "(", x, " * ",
                          lit(0.70710678118654752440), ")))");
    case OpKind::kGeluTanh: {
      // PyTorch: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))).
      std::string inner = absl::StrCat(lit(0.79788456080286535588), " * (", x, " + ",
                                       lit(0.044715), " * (", x, " * ", x, " * ", x, "))");
      std::string t;
      if (fast && result == DType::kBF16) {
        needs->tanh_approx = true;
        t = Call("kf_tanh_approx", inner);
      } else {
        t = Call(Fn("tanh", n), inner);
      }
      return absl::StrCat("(", lit(0.5), " * ", x, " * (", one, " + ", t, "))");
    }
    case OpKind::kSilu: return absl::StrCat("(", x, " / (", one, " + ", exp("-" + x), "))");
    // PyTorch's threshold: softplus(x) = x above 20.
    case OpKind::kSoftplus:
      return absl::StrCat("(", x, " > ", lit(20.0), " ? ", x, " : ", Fn("log1p", n), "(", exp(x),
                          "))");
    case OpKind::kSquare: return absl::StrCat("(", x, " * ", x, ")");
    case OpKind::kErf: return Call(Fn("erf", n), x);
    case OpKind::kFloor: return Call(Fn("floor", n), x);
    case OpKind::kCeil: return Call(Fn("ceil", n), x);
    // Eager rounds every f32 product before the add: no FMA contraction.
    case OpKind::kAdd:
      return n == Numerics::kEager ? absl::StrCat("__fadd_rn(", x, ", ", a[1], ")")
                                   : absl::StrCat("(", x, " + ", a[1], ")");
    case OpKind::kSub:
      return n == Numerics::kEager ? absl::StrCat("__fsub_rn(", x, ", ", a[1], ")")
                                   : absl::StrCat("(", x, " - ", a[1], ")");
    case OpKind::kMul:
      return n == Numerics::kEager ? absl::StrCat("__fmul_rn(", x, ", ", a[1], ")")
                                   : absl::StrCat("(", x, " * ", a[1], ")");
    case OpKind::kDiv: return absl::StrCat("(", x, " / ", a[1], ")");
    case OpKind::kMaximum:
      needs->minmax = true;
      return absl::StrCat("kf_max(", x, ", ", a[1], ")");
    case OpKind::kMinimum:
      needs->minmax = true;
      return absl::StrCat("kf_min(", x, ", ", a[1], ")");
    case OpKind::kPow: return absl::StrCat(HeavyFn("pow", n, outline, needs), "(", x, ", ", a[1], ")");
    default: return NoSupport(node, k, result);
  }
}

const char* CompareOp(OpKind k) {
  switch (k) {
    case OpKind::kEq: return "==";
    case OpKind::kNe: return "!=";
    case OpKind::kLt: return "<";
    case OpKind::kLe: return "<=";
    case OpKind::kGt: return ">";
    case OpKind::kGe: return ">=";
    default: return nullptr;
  }
}

}  // namespace

std::string ComputeType(DType t, Numerics n) {
  if (IsFloatKind(t)) return IsDouble(n) ? "double" : "float";
  if (t == DType::kI32) return "int";
  if (t == DType::kBool) return "bool";
  if (t == DType::kI64) return "long long";
  KFUSE_CHECK(false);
  return "";
}

std::string ConstantLiteral(double v, DType t, Numerics n) {
  if (IsFloatKind(t)) return FloatLiteral(v, n);
  if (t == DType::kI32) return IntLiteral(v);
  if (t == DType::kI64) return LongLiteral(v);
  if (t == DType::kBool) return v != 0 ? "true" : "false";
  KFUSE_CHECK(false);
  return "";
}

std::string PromoteExpr(const std::string& v, DType from, DType to, Numerics n) {
  const std::string ct_from = ComputeType(from, n), ct_to = ComputeType(to, n);
  if (ct_from == ct_to) return v;
  if (to == DType::kBool) {
    return absl::StrCat("(", v, " != ", IsFloatKind(from) ? FloatLiteral(0, n) : "0", ")");
  }
  if (IsFloatKind(to) && from == DType::kBool) {
    return absl::StrCat("(", v, " ? ", FloatLiteral(1, n), " : ", FloatLiteral(0, n), ")");
  }
  // int -> float, bool -> int, float -> int (explicit casts only: truncates).
  return absl::StrCat("((", ct_to, ")", v, ")");
}

std::string CastExpr(const std::string& v, DType from, DType to, Numerics n,
                     PreludeNeeds* needs) {
  std::string p = PromoteExpr(v, from, to, n);
  // A float cast to its own dtype rounds in the fp64 yardstick as in the
  // CPU evaluator (its value there is exact, not yet of that dtype); the
  // product kernels hold it in that dtype already.
  if (from == to && !(IsDouble(n) && IsFloatKind(to))) return p;
  if (IsDouble(n)) needs->round_f64 = true;
  switch (to) {
    case DType::kBF16:
      needs->bf16 = true;
      return Call("kf_rbf", p);
    case DType::kF16:
      needs->half = true;
      return Call("kf_rh", p);
    case DType::kF32:
      return IsDouble(n) ? absl::StrCat("((double)(float)", p, ")") : p;
    default: return p;
  }
}

std::string LoadDoubleExpr(const std::string& storage, DType t) {
  switch (t) {
    case DType::kI32: return absl::StrCat("((int)", storage, ")");
    case DType::kI64: return absl::StrCat("((long long)", storage, ")");
    case DType::kBool: return absl::StrCat("(", storage, " != 0.0)");
    default: return storage;
  }
}

std::string LoadExpr(const std::string& s, DType t, Numerics n, PreludeNeeds* needs) {
  std::string f;
  switch (t) {
    case DType::kF32: f = s; break;
    case DType::kBF16:
      needs->bf16 = true;
      f = Call("kf_bf2f", s);
      break;
    case DType::kF16:
      needs->half = true;
      f = Call("kf_h2f", s);
      break;
    case DType::kI32:
    case DType::kI64: return s;
    case DType::kBool: return absl::StrCat("(", s, " != 0)");
    default: KFUSE_CHECK(false);
  }
  return IsDouble(n) ? absl::StrCat("((double)", f, ")") : f;
}

std::string StoreExpr(const std::string& v, DType t, Numerics n, PreludeNeeds* needs) {
  if (IsDouble(n)) return absl::StrCat("((double)", v, ")");
  switch (t) {
    case DType::kF32:
    case DType::kI32:
    case DType::kI64: return v;
    case DType::kBF16:
      needs->bf16 = true;
      return Call("kf_f2bf", v);
    case DType::kF16:
      needs->half = true;
      return Call("kf_f2h", v);
    case DType::kBool: return absl::StrCat("((unsigned char)", v, ")");
    default: KFUSE_CHECK(false);
  }
  return "";
}

std::string OutputStorage(DType t, Numerics n) {
  return IsDouble(n) ? "double" : std::string(DTypeStorage(t));
}

absl::StatusOr<std::string> EmitOpExpr(const Chain& chain, int32_t node,
                                       const std::vector<std::string>& args, Numerics n,
                                       PreludeNeeds* needs) {
  const Node& nd = chain.nodes[node];
  const DType result = nd.type.dtype;
  KFUSE_CHECK(args.size() == nd.args.size());
  if (!IsFloatKind(result) && result != DType::kI32 && result != DType::kI64 && result != DType::kBool) {
    return NoSupport(node, nd.kind, result);
  }
  auto arg_dtype = [&](size_t i) { return chain.nodes[nd.args[i]].type.dtype; };
  switch (nd.kind) {
    case OpKind::kConstant: return ConstantLiteral(nd.value, result, n);
    case OpKind::kExpand: return args[0];
    case OpKind::kCast: return CastExpr(args[0], arg_dtype(0), result, n, needs);
    default: break;
  }
  if (!IsElementwise(nd.kind)) {
    return absl::UnimplementedError(absl::StrCat("node ", node, ": ", std::string(OpName(nd.kind)),
                                                 " is not element-wise"));
  }
  const DType cd = ComputeDType(chain, node);
  std::vector<std::string> a(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    DType to = cd;
    if (nd.kind == OpKind::kWhere && i == 0) to = DType::kBool;
    a[i] = PromoteExpr(args[i], arg_dtype(i), to, n);
  }
  std::string e;
  if (const char* cmp = CompareOp(nd.kind)) {
    e = absl::StrCat("(", a[0], " ", cmp, " ", a[1], ")");
  } else if (nd.kind == OpKind::kLogicalAnd) {
    e = absl::StrCat("(", a[0], " && ", a[1], ")");
  } else if (nd.kind == OpKind::kLogicalOr) {
    e = absl::StrCat("(", a[0], " || ", a[1], ")");
  } else if (nd.kind == OpKind::kLogicalNot) {
    e = absl::StrCat("(!", a[0], ")");
  } else if (nd.kind == OpKind::kWhere) {
    e = absl::StrCat("(", a[0], " ? ", a[1], " : ", a[2], ")");
  } else if (IsFloatKind(cd)) {
    const bool outline = IsHeavyCall(nd.kind) && OutlinesHeavyCalls(chain);
    KFUSE_ASSIGN_OR_RETURN(e, FloatOp(node, nd.kind, result, a, n, outline, needs));
  } else if (cd == DType::kI32 || cd == DType::kI64) {
    KFUSE_ASSIGN_OR_RETURN(e, IntOp(node, nd.kind, cd, a, needs));
  } else {
    KFUSE_ASSIGN_OR_RETURN(e, BoolOp(node, nd.kind, a));
  }
  // The op's value is in cd's compute type; the node holds `result`.
  const DType produced = IsComparison(nd.kind) || nd.kind == OpKind::kLogicalAnd ||
                                 nd.kind == OpKind::kLogicalOr ||
                                 nd.kind == OpKind::kLogicalNot
                             ? DType::kBool
                             : cd;
  e = PromoteExpr(e, produced, result, n);
  if (n == Numerics::kEager && (result == DType::kBF16 || result == DType::kF16)) {
    // Eager PyTorch stores every intermediate in its dtype.
    if (result == DType::kBF16) {
      needs->bf16 = true;
      e = Call("kf_rbf", e);
    } else {
      needs->half = true;
      e = Call("kf_rh", e);
    }
  }
  return e;
}

bool ElementFnOutOfLine(int ops) { return ops > 64; }

const char* ElementFnQualifier(int ops) { return ElementFnOutOfLine(ops) ? "__noinline__" : "__forceinline__"; }

std::string NumericsName(Numerics n) {
  switch (n) {
    case Numerics::kFast: return "fast";
    case Numerics::kReference64: return "reference64";
    case Numerics::kEager: return "eager";
  }
  return "";
}

uint64_t SourceHash(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string DimCode(const Dim& d) {
  return d.is_static() ? absl::StrCat(d.size, "LL") : absl::StrCat("s", d.symbol);
}

}  // namespace kfuse
