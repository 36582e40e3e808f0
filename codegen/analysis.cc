#include "codegen/analysis.h"

#include <algorithm>
#include <cmath>

#include "codegen/validate.h"
#include "core/dtype.h"

namespace kfuse {
namespace {

struct Cost {
  double fma = 0;      // Adds, multiplies, compares, selects: 1 each (an FMA is 2).
  double special = 0;  // MUFU instructions: ex2, lg2, rcp, rsqrt, sqrt, sin, cos.
};

// FLOPs per output element of an element-wise op, as the generators lower it
// on the GPU (fp32 math; f16/bf16 converted in and out at no charge):
//   add sub mul neg abs maximum minimum compare where relu square cast floor
//   ceil logical_*                                  1 fma
//   div        rcp + mul                            1 special + 1 fma
//   reciprocal rcp                                  1 special
//   exp        mul by log2(e), ex2, scale           1 special + 2 fma
//   exp2 log2 sqrt rsqrt                            1 special
//   log        lg2, mul by ln(2)                    1 special + 1 fma
//   sin cos    range reduction + sin/cos.approx     1 special + 2 fma
//   tanh       via ex2 and rcp                      2 special + 4 fma
//   sigmoid    ex2, add, rcp                        2 special + 3 fma
//   erf        polynomial with one ex2              1 special + 12 fma
//   gelu_erf   erf + 4                              1 special + 16 fma
//   gelu_tanh  tanh + x^3 and 6 more                2 special + 12 fma
//   silu       sigmoid + mul                        2 special + 4 fma
//   softplus   exp + log1p + threshold              2 special + 5 fma
//   pow        lg2, mul, ex2                        2 special + 2 fma
Cost ElementwiseCost(OpKind k) {
  switch (k) {
    case OpKind::kConstant:
      return {0, 0};
    case OpKind::kDiv:
      return {1, 1};
    case OpKind::kReciprocal:
      return {0, 1};
    case OpKind::kExp:
      return {2, 1};
    case OpKind::kExp2:
    case OpKind::kLog2:
    case OpKind::kSqrt:
    case OpKind::kRsqrt:
      return {0, 1};
    case OpKind::kLog:
      return {1, 1};
    case OpKind::kSin:
    case OpKind::kCos:
      return {2, 1};
    case OpKind::kTanh:
      return {4, 2};
    case OpKind::kSigmoid:
      return {3, 2};
    case OpKind::kErf:
      return {12, 1};
    case OpKind::kGeluErf:
      return {16, 1};
    case OpKind::kGeluTanh:
      return {12, 2};
    case OpKind::kSilu:
      return {4, 2};
    case OpKind::kSoftplus:
      return {5, 2};
    case OpKind::kPow:
      return {2, 2};
    default:
      return {1, 0};
  }
}

double Bytes(const TensorType& t, absl::Span<const int64_t> values) {
  return Elements(t, values) * DTypeBytes(t.dtype);
}

}  // namespace

double Elements(const TensorType& t, absl::Span<const int64_t> values) {
  double n = 1;
  for (const Dim& d : t.shape) {
    if (d.is_static()) {
      n *= static_cast<double>(d.size);
    } else if (d.symbol < static_cast<int32_t>(values.size())) {
      n *= static_cast<double>(values[d.symbol]);
    }
  }
  return n;
}

double BufferElements(const Node& input, absl::Span<const int64_t> values) {
  if (input.strides.empty()) return Elements(input.type, values);
  double last = 0;
  for (size_t d = 0; d < input.strides.size(); ++d) {
    const Dim& dim = input.type.shape[d];
    const int64_t n = dim.is_static()                                    ? dim.size
                      : dim.symbol < static_cast<int32_t>(values.size()) ? values[dim.symbol]
                                                                         : 1;
    if (n == 0) return 0;
    last += static_cast<double>(n - 1) * static_cast<double>(input.strides[d]);
  }
  return last + 1;
}

Work AnalyzeWork(const Chain& c, const std::vector<int32_t>& nodes,
                 absl::Span<const int64_t> values) {
  std::vector<bool> in_kernel(c.nodes.size(), nodes.empty());
  for (int32_t id : nodes) in_kernel[id] = true;
  std::vector<bool> read(c.nodes.size(), false);
  Work w;
  for (size_t id = 0; id < c.nodes.size(); ++id) {
    if (!in_kernel[id]) continue;
    const Node& n = c.nodes[id];
    for (int32_t a : n.args) {
      const OpKind k = c.nodes[a].kind;
      if ((k == OpKind::kInput || !in_kernel[a]) && k != OpKind::kConstant) read[a] = true;
    }
    double out = Elements(n.type, values);
    if (n.kind == OpKind::kInput || IsLayout(n.kind)) continue;
    if (IsElementwise(n.kind)) {
      Cost cost = ElementwiseCost(n.kind);
      w.flops.fma += cost.fma * out;
      w.flops.special += cost.special * out;
    } else if (IsReduction(n.kind)) {
      w.flops.fma += Elements(c.nodes[n.args[0]].type, values);
      if (n.kind == OpKind::kReduceMean) w.flops.fma += out;
    } else if (n.kind == OpKind::kMatmul) {
      const TensorType& a = c.nodes[n.args[0]].type;
      w.flops.tensor += 2 * out * Elements(TensorType{a.dtype, {a.shape.back()}}, values);
    }
  }
  for (int32_t o : c.outputs) {
    const Node& n = c.nodes[o];
    bool source = n.kind == OpKind::kInput || n.kind == OpKind::kConstant;
    if (!in_kernel[o] && !source) continue;
    if (n.kind == OpKind::kInput) read[o] = true;  // A copy reads it.
    w.bytes += Bytes(n.type, values);
  }
  // An input the kernel reads through slices alone (slices of slices
  // counted as the last) is read as far as they reach (one of a fused
  // projection's parts, say), at most whole.
  std::vector<double> sliced(c.nodes.size(), 0);
  std::vector<bool> whole(c.nodes.size(), false), counted(c.nodes.size(), false);
  for (size_t id = 0; id < c.nodes.size(); ++id) {
    if (!in_kernel[id] || c.nodes[id].kind == OpKind::kSlice) continue;
    for (int32_t a : c.nodes[id].args) {
      int32_t root = a;
      while (c.nodes[root].kind == OpKind::kSlice && in_kernel[root]) root = c.nodes[root].args[0];
      if (c.nodes[root].kind != OpKind::kInput) continue;
      if (root == a) {
        whole[root] = true;
      } else if (!counted[a]) {
        counted[a] = true;
        sliced[root] += Bytes(c.nodes[a].type, values);
      }
    }
  }
  for (size_t id = 0; id < c.nodes.size(); ++id) {
    if (!read[id]) continue;
    const double all = Bytes(c.nodes[id].type, values);
    w.bytes += c.nodes[id].kind == OpKind::kInput && !whole[id] && sliced[id] > 0 ? std::min(all, sliced[id])
                                                                                   : all;
  }
  return w;
}

std::vector<Domain> NodeDomains(const Chain& c) {
  const int n = static_cast<int>(c.nodes.size());
  std::vector<bool> positive(n, false);
  for (int32_t id = n - 1; id >= 0; --id) {
    const Node& node = c.nodes[id];
    auto need = [&positive, &node](size_t i) {
      if (i < node.args.size()) positive[node.args[i]] = true;
    };
    switch (node.kind) {
      case OpKind::kLog:
      case OpKind::kLog2:
      case OpKind::kSqrt:
      case OpKind::kRsqrt:
      case OpKind::kReciprocal:
      case OpKind::kPow:
        need(0);
        break;
      case OpKind::kDiv:
        need(1);
        break;
      default:
        break;
    }
    if (!positive[id]) continue;
    // A positive result is wanted: pass it on through ops that keep the sign
    // of positive operands. exp, sigmoid, softplus are positive anyway.
    switch (node.kind) {
      case OpKind::kAdd:
      case OpKind::kMul:
      case OpKind::kMaximum:
      case OpKind::kMinimum:
      case OpKind::kCast:
      case OpKind::kRelu:
      case OpKind::kCeil:
      case OpKind::kTanh:
      case OpKind::kErf:
      case OpKind::kGeluErf:
      case OpKind::kGeluTanh:
      case OpKind::kSilu:
      case OpKind::kMatmul:
      case OpKind::kConcat:
        for (size_t i = 0; i < node.args.size(); ++i) need(i);
        break;
      case OpKind::kDiv:
      case OpKind::kSub:
        need(0);
        break;
      case OpKind::kWhere:
        need(1);
        need(2);
        break;
      default:
        if (IsReduction(node.kind) || IsLayout(node.kind)) need(0);
        break;
    }
  }
  std::vector<Domain> out(n);
  for (int32_t id = 0; id < n; ++id) out[id] = positive[id] ? Domain::kPositive : Domain::kAny;
  return out;
}

std::vector<IndexDomain> NodeIndexDomains(const Chain& c, absl::Span<const int64_t> symbol_values) {
  std::vector<IndexDomain> out(c.nodes.size());
  // The nodes an integer value passes through unchanged (casts between
  // integer types, views), from `id` down to where it comes from.
  auto path = [&c](int32_t id) {
    std::vector<int32_t> p = {id};
    for (;;) {
      const Node& n = c.nodes[p.back()];
      const bool keeps = (n.kind == OpKind::kCast && !IsFloat(n.type.dtype)) || n.kind == OpKind::kReshape ||
                         n.kind == OpKind::kExpand || n.kind == OpKind::kPermute;
      if (!keeps || n.args.empty() || IsFloat(c.nodes[n.args[0]].type.dtype)) return p;
      p.push_back(n.args[0]);
    }
  };
  auto integral = [](const Node& n) {
    return !IsFloat(n.type.dtype) && n.type.dtype != DType::kBool;
  };
  // Iotas first, so a constant compared with the node finds its extent set.
  for (int pass = 0; pass < 2; ++pass) {
    for (const Node& n : c.nodes) {
      if ((n.kind != OpKind::kEq && n.kind != OpKind::kNe) || n.args.size() != 2) continue;
      for (int side = 0; side < 2; ++side) {
        const std::vector<int32_t> value = path(n.args[side]);
        const Node& other = c.nodes[path(n.args[1 - side]).back()];
        if (!integral(c.nodes[value.back()]) || !integral(c.nodes[n.args[side]])) continue;
        for (int32_t id : value) {
          if (pass == 0 && other.kind == OpKind::kIota && other.axis < other.type.rank()) {
            const Dim& d = other.type.shape[static_cast<size_t>(other.axis)];
            const auto extent = static_cast<int64_t>(Elements(TensorType{other.type.dtype, {d}}, symbol_values));
            // Compared with several iotas: in range for each.
            out[id].extent = out[id].extent == 0 ? extent : std::min(out[id].extent, extent);
          } else if (pass == 1 && other.kind == OpKind::kConstant && out[id].extent > 0 &&
                     std::abs(other.value) < 2147483648.0 && other.value == std::trunc(other.value)) {
            // A whole number an i32 holds (what labels are compared in); others
            // are left to the -1 default rather than drawn as what they are not.
            out[id].other = static_cast<int64_t>(other.value);
          }
        }
      }
    }
  }
  // Every view of the value takes the constant its source is compared with.
  for (size_t id = 0; id < out.size(); ++id) {
    const IndexDomain& root = out[path(static_cast<int32_t>(id)).back()];
    if (out[id].extent > 0 && root.other != -1) out[id].other = root.other;
  }
  return out;
}

std::vector<Domain> InputDomains(const Chain& c) {
  const std::vector<Domain> nodes = NodeDomains(c);
  std::vector<Domain> out;
  for (size_t id = 0; id < c.nodes.size(); ++id) {
    if (c.nodes[id].kind == OpKind::kInput) out.push_back(nodes[id]);
  }
  return out;
}

std::vector<int64_t> SymbolValuesForTuning(const Chain& c) {
  std::vector<int64_t> out;
  for (const SymbolInfo& s : c.symbols) {
    int64_t v = int64_t{1} << 20;
    if (s.hint > 0) {
      v = 1;
      while (v < s.hint && v < (int64_t{1} << 62)) v <<= 1;
    }
    if (s.max > 0) v = std::min(v, s.max);
    out.push_back(v);
  }
  // Validation holds every tensor within the element limit at the hints
  // (a symbol without one counting 1); 1 << 20 where there is no hint, or a
  // hint rounded up, can take one past it: no task with such a buffer can
  // run, and no kernel should index such a tensor, materialised or not. A
  // symbol of such a tensor is halved until it fits: those without a hint
  // first (down to 1, where validation counted them), then the largest
  // (one halving takes a rounded hint below the hint). Halving never takes
  // another tensor past the limit.
  const int64_t limit = Limits{}.max_elements;
  auto before = [&](int32_t a, int32_t b) {  // Whether to halve a before b.
    const bool a_free = c.symbols[a].hint <= 0, b_free = c.symbols[b].hint <= 0;
    return a_free != b_free ? a_free : out[a] > out[b];
  };
  // A strided input's buffer spans its gaps: held to the limit too, by
  // halving the symbols its strides step over.
  auto span_past = [&](const Node& n) {
    return !n.strides.empty() && BufferElements(n, out) > static_cast<double>(limit);
  };
  for (const Node& n : c.nodes) {
    for (bool span = false; (span = span_past(n)) || CountElementsAt(n.type.shape, out, limit) > limit;) {
      int32_t next = -1;
      for (size_t i = 0; i < n.type.shape.size(); ++i) {
        const Dim& d = n.type.shape[i];
        if (d.is_static() || out[d.symbol] <= 1 || (span && n.strides[i] == 0)) continue;
        if (next < 0 || before(d.symbol, next)) next = d.symbol;
      }
      if (next < 0) break;
      out[next] /= 2;
    }
  }
  return out;
}

std::vector<std::vector<int64_t>> SymbolValuesForCheck(absl::Span<const int64_t> tuned) {
  std::vector<int64_t> ragged, few;
  for (int64_t v : tuned) {
    ragged.push_back(v >= 8 ? (v - v / 4) | 1 : std::max<int64_t>(1, v - 1));
    few.push_back(std::min<int64_t>(v, 3));
  }
  std::vector<std::vector<int64_t>> out;
  for (std::vector<int64_t>* s : {&ragged, &few}) {
    const bool same = std::equal(s->begin(), s->end(), tuned.begin(), tuned.end());
    if (!same && std::find(out.begin(), out.end(), *s) == out.end()) out.push_back(*s);
  }
  return out;
}

}  // namespace kfuse
