#include "codegen/ir.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kfuse {

std::string_view OpName(OpKind k) {
  switch (k) {
    case OpKind::kInvalid:
      return "invalid";
    case OpKind::kConstant:
      return "constant";
    case OpKind::kInput:
      return "input";
    case OpKind::kNeg:
      return "neg";
    case OpKind::kAbs:
      return "abs";
    case OpKind::kExp:
      return "exp";
    case OpKind::kExp2:
      return "exp2";
    case OpKind::kLog:
      return "log";
    case OpKind::kLog2:
      return "log2";
    case OpKind::kSqrt:
      return "sqrt";
    case OpKind::kRsqrt:
      return "rsqrt";
    case OpKind::kReciprocal:
      return "reciprocal";
    case OpKind::kSin:
      return "sin";
    case OpKind::kCos:
      return "cos";
    case OpKind::kTanh:
      return "tanh";
    case OpKind::kSigmoid:
      return "sigmoid";
    case OpKind::kRelu:
      return "relu";
    case OpKind::kGeluErf:
      return "gelu_erf";
    case OpKind::kGeluTanh:
      return "gelu_tanh";
    case OpKind::kSilu:
      return "silu";
    case OpKind::kSoftplus:
      return "softplus";
    case OpKind::kSquare:
      return "square";
    case OpKind::kErf:
      return "erf";
    case OpKind::kFloor:
      return "floor";
    case OpKind::kCeil:
      return "ceil";
    case OpKind::kLogicalNot:
      return "logical_not";
    case OpKind::kAdd:
      return "add";
    case OpKind::kSub:
      return "sub";
    case OpKind::kMul:
      return "mul";
    case OpKind::kDiv:
      return "div";
    case OpKind::kMaximum:
      return "maximum";
    case OpKind::kMinimum:
      return "minimum";
    case OpKind::kPow:
      return "pow";
    case OpKind::kEq:
      return "eq";
    case OpKind::kNe:
      return "ne";
    case OpKind::kLt:
      return "lt";
    case OpKind::kLe:
      return "le";
    case OpKind::kGt:
      return "gt";
    case OpKind::kGe:
      return "ge";
    case OpKind::kLogicalAnd:
      return "logical_and";
    case OpKind::kLogicalOr:
      return "logical_or";
    case OpKind::kWhere:
      return "where";
    case OpKind::kCast:
      return "cast";
    case OpKind::kReduceSum:
      return "reduce_sum";
    case OpKind::kReduceMax:
      return "reduce_max";
    case OpKind::kReduceMin:
      return "reduce_min";
    case OpKind::kReduceMean:
      return "reduce_mean";
    case OpKind::kReshape:
      return "reshape";
    case OpKind::kPermute:
      return "permute";
    case OpKind::kExpand:
      return "expand";
    case OpKind::kSlice:
      return "slice";
    case OpKind::kConcat:
      return "concat";
    case OpKind::kIota:
      return "iota";
    case OpKind::kMatmul:
      return "matmul";
  }
  return "unknown";
}

bool IsKnownOp(OpKind k) { return k != OpKind::kInvalid && OpName(k) != "unknown"; }

bool IsUnary(OpKind k) { return k >= OpKind::kNeg && k <= OpKind::kLogicalNot; }

bool IsBinary(OpKind k) { return k >= OpKind::kAdd && k <= OpKind::kLogicalOr; }

bool IsElementwise(OpKind k) {
  return IsUnary(k) || IsBinary(k) || k == OpKind::kWhere || k == OpKind::kCast ||
         k == OpKind::kConstant;
}

bool IsReduction(OpKind k) { return k >= OpKind::kReduceSum && k <= OpKind::kReduceMean; }

bool IsLayout(OpKind k) { return k >= OpKind::kReshape && k <= OpKind::kIota; }

bool IsCommutative(OpKind k) {
  switch (k) {
    case OpKind::kAdd:
    case OpKind::kMul:
    case OpKind::kMaximum:
    case OpKind::kMinimum:
    case OpKind::kEq:
    case OpKind::kNe:
    case OpKind::kLogicalAnd:
    case OpKind::kLogicalOr:
      return true;
    default:
      return false;
  }
}

bool IsComparison(OpKind k) { return k >= OpKind::kEq && k <= OpKind::kGe; }

int Arity(OpKind k) {
  if (IsUnary(k)) return 1;
  if (IsBinary(k)) return 2;
  switch (k) {
    case OpKind::kConstant:
    case OpKind::kInput:
    case OpKind::kIota:
      return 0;
    case OpKind::kWhere:
      return 3;
    case OpKind::kCast:
      return 1;
    case OpKind::kReduceSum:
    case OpKind::kReduceMax:
    case OpKind::kReduceMin:
    case OpKind::kReduceMean:
    case OpKind::kReshape:
    case OpKind::kPermute:
    case OpKind::kExpand:
    case OpKind::kSlice:
      return 1;
    case OpKind::kConcat:
      return -1;
    case OpKind::kMatmul:
      return 2;
    default:
      return 0;
  }
}

int Chain::num_inputs() const {
  int n = 0;
  for (const Node& node : nodes) n += node.kind == OpKind::kInput;
  return n;
}

int32_t Chain::AddInput(TensorType type, std::vector<int64_t> strides) {
  Node n;
  n.kind = OpKind::kInput;
  n.input_index = num_inputs();
  n.type = std::move(type);
  n.strides = std::move(strides);
  nodes.push_back(std::move(n));
  return static_cast<int32_t>(nodes.size() - 1);
}

int32_t Chain::AddOp(OpKind kind, std::vector<int32_t> args) {
  Node n;
  n.kind = kind;
  n.args = std::move(args);
  nodes.push_back(std::move(n));
  return static_cast<int32_t>(nodes.size() - 1);
}

int32_t Chain::AddConstant(double value, DType dtype) {
  Node n;
  n.kind = OpKind::kConstant;
  n.value = value;
  n.dtype = dtype;
  nodes.push_back(std::move(n));
  return static_cast<int32_t>(nodes.size() - 1);
}

int32_t Chain::AddCast(int32_t arg, DType to) {
  Node n;
  n.kind = OpKind::kCast;
  n.args = {arg};
  n.dtype = to;
  nodes.push_back(std::move(n));
  return static_cast<int32_t>(nodes.size() - 1);
}

namespace {

// Shortest decimal that reads back as the same double.
std::string ExactDecimal(double v) {
  char buf[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v || std::isnan(v)) break;
  }
  return buf;
}

std::string DimsString(const Chain& c, const std::vector<Dim>& dims) {
  return absl::StrCat(
      "[",
      absl::StrJoin(dims, ",",
                    [&c](std::string* out, const Dim& d) {
                      if (d.is_static()) {
                        absl::StrAppend(out, d.size);
                      } else if (d.symbol < static_cast<int32_t>(c.symbols.size()) &&
                                 !c.symbols[d.symbol].name.empty()) {
                        absl::StrAppend(out, c.symbols[d.symbol].name);
                      } else {
                        absl::StrAppend(out, "s", d.symbol);
                      }
                    }),
      "]");
}

std::string AttrString(const Chain& c, const Node& n) {
  switch (n.kind) {
    case OpKind::kInput:
      return absl::StrCat(
          "#", n.input_index,
          n.strides.empty() ? "" : absl::StrCat(" strides=[", absl::StrJoin(n.strides, ","), "]"));
    case OpKind::kConstant:
      return absl::StrCat(ExactDecimal(n.value), n.dtype == DType::kInvalid ? " weak" : "");
    case OpKind::kCast:
      return std::string(DTypeName(n.dtype));
    case OpKind::kReduceSum:
    case OpKind::kReduceMax:
    case OpKind::kReduceMin:
    case OpKind::kReduceMean:
      return absl::StrCat("axes=[", absl::StrJoin(n.axes, ","), "]", n.keepdim ? " keepdim" : "");
    case OpKind::kPermute:
      return absl::StrCat("perm=[", absl::StrJoin(n.axes, ","), "]");
    case OpKind::kReshape:
    case OpKind::kExpand:
      return absl::StrCat("shape=", DimsString(c, n.shape));
    case OpKind::kIota:
      return absl::StrCat("shape=", DimsString(c, n.shape), " axis=", n.axis);
    case OpKind::kSlice:
      return absl::StrCat("axis=", n.axis, " ", n.start, ":", n.stop, ":", n.step);
    case OpKind::kConcat:
      return absl::StrCat("axis=", n.axis);
    default:
      return "";
  }
}

}  // namespace

bool IsViewOfInput(const Chain& c, int32_t id) {
  for (;;) {
    const Node& n = c.nodes[id];
    if (n.kind == OpKind::kInput) return true;
    if (n.kind != OpKind::kPermute && n.kind != OpKind::kExpand && n.kind != OpKind::kReshape) {
      return false;
    }
    id = n.args[0];
  }
}

std::string OpLabel(const Chain& c, int32_t id) {
  const Node& n = c.nodes[id];
  if (n.kind == OpKind::kInput) return absl::StrCat("inputs[", n.input_index, "]");
  int32_t index = n.wire_index >= 0 ? n.wire_index : id - c.num_inputs();
  return absl::StrCat("op ", index, " (", std::string(OpName(n.kind)), ")");
}

std::string ToString(const Chain& c) {
  std::string out;
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    const Node& n = c.nodes[i];
    std::vector<std::string> parts;
    for (int32_t a : n.args) parts.push_back(absl::StrCat("%", a));
    std::string attrs = AttrString(c, n);
    if (!attrs.empty()) parts.push_back(attrs);
    absl::StrAppend(&out, "%", i, " = ", std::string(OpName(n.kind)), "(",
                    absl::StrJoin(parts, ", "), ")");
    if (n.type.dtype != DType::kInvalid) {
      absl::StrAppend(&out, " : ", std::string(DTypeName(n.type.dtype)),
                      DimsString(c, n.type.shape));
    }
    out += "\n";
  }
  absl::StrAppend(&out, "outputs(",
                  absl::StrJoin(c.outputs, ", ",
                                [](std::string* o, int32_t id) { absl::StrAppend(o, "%", id); }),
                  ")\n");
  return out;
}

}  // namespace kfuse
