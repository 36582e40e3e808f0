// Element-wise typing: PyTorch's type promotion with its three operand
// priorities (dimensioned tensors, zero-dim tensors, wrapped Python scalars),
// constants, casts and where.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codegen/numeric.h"
#include "codegen/validate.h"
#include "codegen/validate_internal.h"
#include "core/decimal.h"
#include "core/status.h"

namespace kfuse {
namespace {

using namespace validate_internal;  // NOLINT: this file implements them.

// PyTorch's priority groups: 2 dimensioned tensor, 1 zero-dim tensor,
// 0 wrapped number (weak scalar).
int Priority(const Chain& c, int32_t id) {
  if (IsWeakScalar(c, id)) return 0;
  return c.nodes[id].type.rank() > 0 ? 2 : 1;
}

// at::native::combine_categories without complex types.
DType Combine(DType higher, DType lower) {
  if (higher == DType::kInvalid) return lower;
  if (lower == DType::kInvalid) return higher;
  if (IsFloat(higher)) return higher;
  if (higher == DType::kBool || IsFloat(lower)) return Promote(higher, lower);
  return higher;
}

// at::result_type over some operands of a node.
DType ResultType(const Chain& c, const std::vector<int32_t>& operands) {
  DType group[3] = {DType::kInvalid, DType::kInvalid, DType::kInvalid};
  for (int32_t a : operands) {
    DType& g = group[Priority(c, a)];
    DType t = c.nodes[a].type.dtype;
    g = g == DType::kInvalid ? t : Promote(g, t);
  }
  return Combine(Combine(group[2], group[1]), group[0]);
}

bool IsFloatFunction(OpKind k) {
  switch (k) {
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kRelu:
    case OpKind::kSquare:
    case OpKind::kFloor:
    case OpKind::kCeil:
    case OpKind::kLogicalNot:
      return false;
    default:
      return IsUnary(k);
  }
}

absl::Status TypeConstant(Chain& c, int32_t id) {
  Node& n = c.nodes[id];
  n.type.shape.clear();
  if (n.dtype != DType::kInvalid) {
    if (!IsKnownDType(n.dtype)) {
      return Bad(c, id, "dtype", absl::StrCat("unknown dtype ", static_cast<int>(n.dtype)));
    }
    if (!IsComputeDType(n.dtype)) {
      return Unsupported(c, id, "dtype",
                         absl::StrCat("dtype ", std::string(DTypeName(n.dtype)),
                                      " not supported by element-wise ops"));
    }
    if (!IsExactIn(n.dtype, n.value)) {
      return Bad(c, id, "value",
                 absl::StrCat(ShortestDecimal(n.value), " is not exactly representable in ",
                              std::string(DTypeName(n.dtype))));
    }
    // The wire holds a double: past 2^53 its neighbours are not i64's, and
    // folding (in doubles) would not be exact.
    if (n.dtype == DType::kI64 && std::fabs(n.value) > 9007199254740992.0) {
      return Bad(c, id, "value",
                 absl::StrCat(ShortestDecimal(n.value), " is past 2^53, beyond which an i64 constant is not "
                              "sent exactly"));
    }
    n.type.dtype = n.dtype;
    return absl::OkStatus();
  }
  // A weak scalar. Canonicalize() may have typed it already (a folded f32 3.0
  // must stay a float scalar).
  if (n.type.dtype != DType::kI32 && n.type.dtype != DType::kF32) {
    const bool whole = std::isfinite(n.value) && std::trunc(n.value) == n.value &&
                       !(n.value == 0 && std::signbit(n.value));
    const bool in_i32 = n.value >= -2147483648.0 && n.value < 2147483648.0;
    n.type.dtype = whole && in_i32 ? DType::kI32 : DType::kF32;
    if (whole && !in_i32) n.wide_whole = n.value;
  }
  if (n.type.dtype == DType::kI32 && !IsExactIn(DType::kI32, n.value)) {
    return Bad(c, id, "value", absl::StrCat(n.value, " is not an i32 scalar"));
  }
  // Eager PyTorch holds a Python float in the op's compute type, f32 here
  // (one past f32's range becomes inf, as there: f32 + 1e300 is inf).
  if (n.type.dtype == DType::kF32) n.value = RoundTo(DType::kF32, n.value);
  return absl::OkStatus();
}

}  // namespace

// Iterative with a visited set: a recursive walk would be exponential on a
// DAG of shared scalar subexpressions (a hostile chain of 512 of them).
bool IsWeakScalar(const Chain& c, int32_t id) {
  if (c.nodes[id].type.rank() > 0) return false;
  std::vector<bool> seen(id + 1, false);
  std::vector<int32_t> stack = {id};
  seen[id] = true;
  while (!stack.empty()) {
    const Node& n = c.nodes[stack.back()];
    stack.pop_back();
    if (n.kind == OpKind::kConstant) {
      if (n.dtype != DType::kInvalid) return false;
      continue;
    }
    if (!IsElementwise(n.kind) || n.kind == OpKind::kCast || n.args.empty()) return false;
    for (int32_t a : n.args) {
      if (!seen[a]) {
        seen[a] = true;
        stack.push_back(a);
      }
    }
  }
  return true;
}

DType ComputeDType(const Chain& c, int32_t id) {
  const Node& n = c.nodes[id];
  switch (n.kind) {
    case OpKind::kConstant:
    case OpKind::kInput:
      return n.type.dtype;
    case OpKind::kCast:
      return c.nodes[n.args[0]].type.dtype;
    case OpKind::kWhere:
      return n.type.dtype;
    case OpKind::kLogicalAnd:
    case OpKind::kLogicalOr:
    case OpKind::kLogicalNot:
      return DType::kBool;
    default:
      break;
  }
  if (IsUnary(n.kind)) {
    DType t = c.nodes[n.args[0]].type.dtype;
    return IsFloatFunction(n.kind) && !IsFloat(t) ? DType::kF32 : t;
  }
  if (IsBinary(n.kind)) {
    DType t = ResultType(c, n.args);
    if (n.kind == OpKind::kDiv && !IsFloat(t)) return DType::kF32;
    return t;
  }
  return n.type.dtype;
}

namespace {

// OK unless one of `operands` is a whole constant outside i32 and the others
// make the op compute in integers (or bool), where PyTorch keeps the scalar
// an integer and fails to fit it; the constant is held as f32 and would
// silently make the op a float one. Beside i64 values it fits: such a
// constant becomes an i64 of its exact value (within 2^53, where the
// wire's double is exact; a float beside it reads the same f32 as before).
absl::Status CheckWideWholeScalars(Chain& c, int32_t id, const std::vector<int32_t>& operands, size_t first_arg) {
  std::vector<int32_t> others;
  for (int32_t a : operands) {
    if (!c.nodes[a].wide_whole.has_value()) others.push_back(a);
  }
  if (others.size() == operands.size()) return absl::OkStatus();
  const DType rest = others.empty() ? DType::kInvalid : ResultType(c, others);
  for (size_t i = 0; i < operands.size(); ++i) {
    Node& k = c.nodes[operands[i]];
    if (!k.wide_whole.has_value()) continue;
    if (IsFloat(rest)) continue;
    const std::string whole = absl::StrFormat("%.17g", *k.wide_whole);
    const std::string field = absl::StrCat("args[", first_arg + i, "]");
    if (rest == DType::kI64) {
      if (std::fabs(*k.wide_whole) > 9007199254740992.0) {
        return Bad(c, id, field,
                   absl::StrCat(whole, " is past 2^53, beyond which an integer scalar is not sent exactly"));
      }
      k.type.dtype = DType::kI64;
      k.value = *k.wide_whole;
      continue;
    }
    // PyTorch keeps it an integer: beside i32 the op computes in i32, which
    // cannot hold it; beside bool (or alone) in i64, which kfuse computes in
    // only beside i64 values.
    const std::string where = rest == DType::kI32 ? "in i32, which cannot hold it"
                                                  : "in i64 (an integer scalar alone, or beside bool or other "
                                                    "scalars), which kfuse computes in only beside i64 values";
    return Bad(c, id, field,
               absl::StrCat(whole, " is a whole number outside i32, so the op would compute ", where,
                            "; give it a float value (weak_float) or a dtype"));
  }
  return absl::OkStatus();
}

// The value of weak scalar `id` (element-wise ops on untyped constants) as
// Python computes it: integers exact, never wrapped; floats held in their
// type; bools 0 and 1. nullopt for an op it does not model (sqrt, exp and
// the other functions, which folding leaves alone too): IntegerRanges then
// bounds the ops above one (a comparison of it is 0 or 1).
// `memo` holds each node's value once (a weak scalar may be a DAG).
using WeakValues = std::map<int32_t, std::optional<double>>;
std::optional<double> ExactWeakValue(const Chain& c, int32_t id, WeakValues& memo);

std::optional<double> EvaluateWeakValue(const Chain& c, int32_t id, WeakValues& memo) {
  const Node& n = c.nodes[id];
  if (n.kind == OpKind::kConstant) return n.wide_whole.value_or(n.value);
  std::vector<double> v;
  for (int32_t a : n.args) {
    std::optional<double> x = ExactWeakValue(c, a, memo);
    if (!x.has_value()) return std::nullopt;
    v.push_back(*x);
  }
  // A comparison compares as the kernel does, in its operands' math type
  // (f32 for a float beside integers: 16777217 == 16777216.5 there).
  if (IsComparison(n.kind)) {
    DType math = ComputeDType(c, id);
    if (math == DType::kF16 || math == DType::kBF16) math = DType::kF32;  // Eager's opmath.
    if (IsFloat(math)) {
      for (double& x : v) x = RoundTo(math, x);
    }
  }
  switch (n.kind) {
    case OpKind::kNeg: return -v[0];
    case OpKind::kAbs: return std::fabs(v[0]);
    case OpKind::kRelu: return std::max(v[0], 0.0);
    case OpKind::kSquare: return v[0] * v[0];
    case OpKind::kFloor: return std::floor(v[0]);
    case OpKind::kCeil: return std::ceil(v[0]);
    case OpKind::kAdd: return v[0] + v[1];
    case OpKind::kSub: return v[0] - v[1];
    case OpKind::kMul: return v[0] * v[1];
    case OpKind::kDiv:  // True division: a float, as folding computes it.
      if (v[1] == 0) return std::nullopt;
      return v[0] / v[1];
    case OpKind::kMaximum: return std::max(v[0], v[1]);
    case OpKind::kMinimum: return std::min(v[0], v[1]);
    case OpKind::kPow:
      if (v[1] < 0) return std::nullopt;  // A float in Python: refused where it computes in i32.
      return std::pow(v[0], v[1]);
    // Bools as Python's: 0 and 1.
    case OpKind::kEq: return v[0] == v[1] ? 1.0 : 0.0;
    case OpKind::kNe: return v[0] != v[1] ? 1.0 : 0.0;
    case OpKind::kLt: return v[0] < v[1] ? 1.0 : 0.0;
    case OpKind::kLe: return v[0] <= v[1] ? 1.0 : 0.0;
    case OpKind::kGt: return v[0] > v[1] ? 1.0 : 0.0;
    case OpKind::kGe: return v[0] >= v[1] ? 1.0 : 0.0;
    case OpKind::kLogicalNot: return v[0] == 0 ? 1.0 : 0.0;
    case OpKind::kLogicalAnd: return v[0] != 0 && v[1] != 0 ? 1.0 : 0.0;
    case OpKind::kLogicalOr: return v[0] != 0 || v[1] != 0 ? 1.0 : 0.0;
    case OpKind::kWhere: return v[0] != 0 ? v[1] : v[2];
    default: return std::nullopt;
  }
}

std::optional<double> ExactWeakValue(const Chain& c, int32_t id, WeakValues& memo) {
  if (auto it = memo.find(id); it != memo.end()) return it->second;
  std::optional<double> v = EvaluateWeakValue(c, id, memo);
  // A float value is held in its type (typed already: operands come first);
  // a Python int outside i32 is exact.
  if (v.has_value() && IsFloat(c.nodes[id].type.dtype) && !c.nodes[id].wide_whole.has_value()) {
    v = RoundTo(c.nodes[id].type.dtype, *v);
  }
  memo.emplace(id, v);
  return v;
}

// Whether `id` is weak arithmetic on a Python int outside i32 (neg(2**40),
// 2**40 + 1) whose exact value is such an int too, within 2^53 (where
// doubles are exact): then it becomes the constant of that value, checked
// where a tensor takes it as a constant the client sent would be. Other
// such arithmetic (2**40 - 2**40, or past 2^53) is checked where it is.
bool WideWholeArithmetic(Chain& c, int32_t id) {
  constexpr double kExact = 9007199254740992.0;  // 2^53: doubles hold every integer to here.
  bool wide = false;
  for (int32_t a : c.nodes[id].args) {
    const Node& x = c.nodes[a];
    // A Python float beside it makes the op's value a float.
    if (IsFloat(x.type.dtype) && !x.wide_whole.has_value()) return false;
    if (x.wide_whole.has_value() && std::fabs(*x.wide_whole) > kExact) return false;
    wide = wide || x.wide_whole.has_value();
  }
  if (!wide || !IsWeakScalar(c, id)) return false;
  WeakValues memo;
  const std::optional<double> v = EvaluateWeakValue(c, id, memo);  // Exact: the op's own is not rounded.
  if (!v.has_value() || !std::isfinite(*v) || std::trunc(*v) != *v || std::fabs(*v) > kExact ||
      (*v >= -2147483648.0 && *v < 2147483648.0)) {
    return false;
  }
  // The constant of that value, as a client would send it (TypeConstant):
  // every consumer takes it as it takes one, whatever the nodes' order.
  Node& n = c.nodes[id];
  n.kind = OpKind::kConstant;
  n.args.clear();
  n.dtype = DType::kInvalid;
  n.type = TensorType{DType::kF32, {}};
  n.value = RoundTo(DType::kF32, *v);
  n.wide_whole = *v;
  return true;
}

}  // namespace

namespace validate_internal {

absl::Status InferElementwise(Chain& c, int32_t id) {
  Node& n = c.nodes[id];
  if (n.kind == OpKind::kConstant) return TypeConstant(c, id);
  // Shapes: numpy broadcasting of all operands.
  std::vector<Dim> shape;
  for (size_t i = 0; i < n.args.size(); ++i) {
    const TensorType& t = c.nodes[n.args[i]].type;
    std::string field = absl::StrCat("args[", i, "]");
    if (!IsComputeDType(t.dtype)) {
      return Unsupported(c, id, field,
                         absl::StrCat("dtype ", std::string(DTypeName(t.dtype)),
                                      " not supported by element-wise ops"));
    }
    std::vector<Dim> next;
    if (!Broadcast(shape, t.shape, &next)) {
      return Bad(c, id, field,
                 absl::StrCat("shapes ", ShapeString(c, shape), " and ", ShapeString(c, t.shape),
                              " do not broadcast"));
    }
    shape = std::move(next);
  }
  n.type.shape = shape;
  DType first = c.nodes[n.args[0]].type.dtype;

  if (n.kind == OpKind::kCast) {
    if (!IsKnownDType(n.dtype)) {
      return Bad(c, id, "dtype",
                 n.dtype == DType::kInvalid
                     ? std::string("cast needs a target dtype")
                     : absl::StrCat("unknown dtype ", static_cast<int>(n.dtype)));
    }
    if (!IsComputeDType(n.dtype)) {
      return Unsupported(c, id, "dtype",
                         absl::StrCat("dtype ", std::string(DTypeName(n.dtype)),
                                      " not supported by element-wise ops"));
    }
    n.type.dtype = n.dtype;
    return absl::OkStatus();
  }
  if (n.kind == OpKind::kWhere) {
    if (first != DType::kBool) {
      return Bad(c, id, "args[0]",
                 absl::StrCat("condition must be bool, got ", std::string(DTypeName(first))));
    }
    KFUSE_RETURN_IF_ERROR(CheckWideWholeScalars(c, id, {n.args[1], n.args[2]}, 1));
    n.type.dtype = ResultType(c, {n.args[1], n.args[2]});
    return absl::OkStatus();
  }
  // A quotient computes in floats whatever its operands; so does a float
  // function (exp, sqrt, ...). An integer function of one (neg, abs, floor,
  // ...) is an integer, which its f32 value would make a float.
  if ((IsBinary(n.kind) && n.kind != OpKind::kLogicalAnd && n.kind != OpKind::kLogicalOr &&
       n.kind != OpKind::kDiv) ||
      (IsUnary(n.kind) && !IsFloatFunction(n.kind) && n.kind != OpKind::kLogicalNot)) {
    if (WideWholeArithmetic(c, id)) return absl::OkStatus();  // Now the constant of its value.
    KFUSE_RETURN_IF_ERROR(CheckWideWholeScalars(c, id, n.args, 0));
  }
  if (n.kind == OpKind::kLogicalNot || n.kind == OpKind::kLogicalAnd ||
      n.kind == OpKind::kLogicalOr || IsComparison(n.kind)) {
    n.type.dtype = DType::kBool;
    return absl::OkStatus();
  }
  DType compute = ComputeDType(c, id);
  if (compute == DType::kBool) {
    switch (n.kind) {
      case OpKind::kNeg:
      case OpKind::kAbs:
      case OpKind::kRelu:
      case OpKind::kSquare:
      case OpKind::kFloor:
      case OpKind::kCeil:
      case OpKind::kSub:
      case OpKind::kPow:
        return Bad(c, id, "args",
                   absl::StrCat(std::string(OpName(n.kind)),
                                " of bool is not supported; cast to a number first"));
      default:
        break;
    }
  }
  // Integers to a negative Python int (a weak scalar, or weak arithmetic on
  // them: the value folding gives): a float in Python, where this op
  // computes in an integer type, and refused by PyTorch for an integer
  // tensor (the kernel's integer power would give 0 where the caller meant
  // a fraction). A typed exponent is a tensor's, computed as torch does.
  if (n.kind == OpKind::kPow && (compute == DType::kI32 || compute == DType::kI64) &&
      IsWeakScalar(c, n.args[1])) {
    WeakValues memo;
    std::optional<double> e = ExactWeakValue(c, n.args[1], memo);
    if (e.has_value() && *e < 0) {
      const std::string power = ShortestDecimal(*e);
      return Bad(c, id, "args[1]",
                 IsWeakScalar(c, id)
                     ? absl::StrCat("a weak integer to the power ", power, " is a float in Python, where this op ",
                                    "computes in i32; send the result as one constant (weak_float)")
                     : absl::StrCat("an integer to the power ", power, " is refused, as PyTorch refuses integers ",
                                    "to negative Python ints; cast the base to a float first"));
    }
  }
  n.type.dtype = compute;
  return absl::OkStatus();
}

IntegerRanges::IntegerRanges(const Chain& c) : c_(c), ranges_(c.nodes.size()) {}

std::optional<IntegerRanges::Interval> IntegerRanges::Of(int32_t id) {
  const Node& n = c_.nodes[id];
  const DType dtype = n.type.dtype;
  // Exact where Python's value is known (weak scalars as folding computes
  // them), else a bound from the operands'.
  if (IsWeakScalar(c_, id)) {
    if (std::optional<double> v = ExactWeakValue(c_, id, weak_)) {
      if (dtype == DType::kBool || dtype == DType::kI32) return Interval{*v, *v};
      return std::nullopt;
    }
  }
  if (dtype == DType::kBool) {
    if (n.kind == OpKind::kConstant) return Interval{n.value, n.value};
    return Interval{0, 1};
  }
  // An i32 input, a typed i32 constant, a cast to i32, an iota: a value
  // PyTorch holds in i32 too, so ops on it wrap there as here.
  if (dtype != DType::kI32 || n.kind == OpKind::kInput || n.kind == OpKind::kConstant ||
      n.kind == OpKind::kCast || n.kind == OpKind::kIota || n.kind == OpKind::kMatmul) {
    return std::nullopt;
  }
  std::vector<Interval> a;
  for (size_t i = n.kind == OpKind::kWhere ? 1 : 0; i < n.args.size(); ++i) {
    if (!ranges_[n.args[i]].has_value()) return std::nullopt;
    a.push_back(*ranges_[n.args[i]]);
  }
  auto hull = [](const std::vector<double>& v) {
    return Interval{*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
  };
  if (IsLayout(n.kind) || n.kind == OpKind::kWhere || n.kind == OpKind::kReduceMax ||
      n.kind == OpKind::kReduceMin || n.kind == OpKind::kFloor || n.kind == OpKind::kCeil) {
    std::vector<double> ends;
    for (const Interval& x : a) ends.insert(ends.end(), {x.lo, x.hi});
    return hull(ends);
  }
  switch (n.kind) {
    case OpKind::kReduceSum: {
      // n values in [lo, hi] sum to [n lo, n hi]; any n from 1 to the most
      // elements reduced.
      double count = 1;
      const std::vector<Dim>& shape = c_.nodes[n.args[0]].type.shape;
      for (int64_t axis : n.axes) {
        const Dim& d = shape[axis];
        const int64_t size = d.is_static() ? d.size : c_.symbols[d.symbol].max;
        if (size <= 0) return std::nullopt;  // A runtime size without a bound.
        count *= static_cast<double>(size);
      }
      return hull({a[0].lo, a[0].hi, count * a[0].lo, count * a[0].hi});
    }
    case OpKind::kNeg: return Interval{-a[0].hi, -a[0].lo};
    case OpKind::kRelu: return Interval{std::max(a[0].lo, 0.0), std::max(a[0].hi, 0.0)};
    case OpKind::kAbs:
    case OpKind::kSquare: {
      const double top = std::max(std::fabs(a[0].lo), std::fabs(a[0].hi));
      const double bottom = a[0].lo <= 0 && a[0].hi >= 0 ? 0 : std::min(std::fabs(a[0].lo), std::fabs(a[0].hi));
      return n.kind == OpKind::kAbs ? Interval{bottom, top} : Interval{bottom * bottom, top * top};
    }
    case OpKind::kAdd: return Interval{a[0].lo + a[1].lo, a[0].hi + a[1].hi};
    case OpKind::kSub: return Interval{a[0].lo - a[1].hi, a[0].hi - a[1].lo};
    case OpKind::kMul:
      return hull({a[0].lo * a[1].lo, a[0].lo * a[1].hi, a[0].hi * a[1].lo, a[0].hi * a[1].hi});
    case OpKind::kMaximum: return Interval{std::max(a[0].lo, a[1].lo), std::max(a[0].hi, a[1].hi)};
    case OpKind::kMinimum: return Interval{std::min(a[0].lo, a[1].lo), std::min(a[0].hi, a[1].hi)};
    case OpKind::kPow: {
      // A bound, not the hull: |b^e| <= max(|b|, 1)^e for e >= 0.
      if (a[1].lo < 0) return std::nullopt;
      const double top = std::pow(std::max({std::fabs(a[0].lo), std::fabs(a[0].hi), 1.0}), a[1].hi);
      return Interval{a[0].lo < 0 ? -top : 0, top};
    }
    default:
      return std::nullopt;
  }
}

absl::Status IntegerRanges::Check(int32_t id) {
  std::optional<Interval> r = Of(id);
  ranges_[id] = r;
  const Node& n = c_.nodes[id];
  if (!r.has_value() || n.type.dtype != DType::kI32 || n.kind == OpKind::kConstant ||
      (r->lo >= -2147483648.0 && r->hi <= 2147483647.0)) {
    return absl::OkStatus();
  }
  const double past = r->hi > 2147483647.0 ? r->hi : r->lo;
  // Weak integers alone: Python's exact arithmetic, which the kernel would wrap.
  if (r->lo == r->hi && IsWeakScalar(c_, id)) {
    return Bad(c_, id, "args",
               absl::StrCat("its weak integers make ", ShortestDecimal(past), ", outside i32, where this op computes ",
                            "(Python's ints do not wrap); send the result as one constant (weak_float or a ",
                            "dtype for a float)"));
  }
  return Bad(c_, id, n.kind == OpKind::kReduceSum ? "args[0]" : "args",
             absl::StrCat("can reach ", ShortestDecimal(past), " (bools taken as 0 and 1, Python ints as sent), ",
                          "outside i32, where this op computes; PyTorch computes it in i64, as kfuse does ",
                          "beside an i64 value, so it would wrap: cast an operand to i64 (or f32) first"));
}

}  // namespace validate_internal
}  // namespace kfuse
