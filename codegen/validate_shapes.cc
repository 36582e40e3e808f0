// Shape inference for reductions, layout views and matmul.
#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/validate_internal.h"
#include "core/status.h"

namespace kfuse::validate_internal {
namespace {

// Python-style axis in [-rank, rank) to [0, rank).
absl::Status NormalizeAxis(const Chain& c, int32_t id, absl::string_view field, int64_t rank,
                           int64_t* axis) {
  if (*axis < -rank || *axis >= rank) {
    return Bad(c, id, field, absl::StrCat("axis ", *axis, " out of range for rank ", rank));
  }
  if (*axis < 0) *axis += rank;
  return absl::OkStatus();
}

std::string DTypeString(DType t) { return std::string(DTypeName(t)); }

// Reductions and views: of the compute dtypes.
absl::Status CheckOperandDType(const Chain& c, int32_t id) {
  for (size_t i = 0; i < c.nodes[id].args.size(); ++i) {
    DType t = c.nodes[c.nodes[id].args[i]].type.dtype;
    if (!IsComputeDType(t)) {
      return Unsupported(c, id, absl::StrCat("args[", i, "]"),
                         absl::StrCat("dtype ", DTypeString(t), " not supported"));
    }
  }
  return absl::OkStatus();
}

absl::Status InferReshape(Chain& c, int32_t id) {
  Node& n = c.nodes[id];
  const TensorType& in = c.nodes[n.args[0]].type;
  KFUSE_RETURN_IF_ERROR(CheckDims(c, id, "shape", n.shape));
  // Same static product and the same symbols (as a multiset) on both sides.
  // Products saturate at 2^100, far above any tensor's element limit (a
  // saturated side then differs from the other, which passed that limit);
  // the bound is checked before the multiply, which would overflow past it.
  auto summarize = [](const std::vector<Dim>& dims, std::map<int32_t, int>* syms) {
    constexpr __int128 kCap = __int128{1} << 100;
    __int128 product = 1;
    for (const Dim& d : dims) {
      if (d.is_static()) {
        product = product > kCap / d.size ? kCap : product * d.size;
      } else {
        ++(*syms)[d.symbol];
      }
    }
    return product;
  };
  std::map<int32_t, int> a, b;
  if (summarize(in.shape, &a) != summarize(n.shape, &b) || a != b) {
    return Bad(c, id, "shape",
               absl::StrCat("cannot reshape ", ShapeString(c, in.shape), " to ",
                            ShapeString(c, n.shape), ": element counts differ"));
  }
  n.type = TensorType{in.dtype, n.shape};
  return absl::OkStatus();
}

absl::Status InferPermute(Chain& c, int32_t id) {
  Node& n = c.nodes[id];
  const TensorType& in = c.nodes[n.args[0]].type;
  if (static_cast<int>(n.axes.size()) != in.rank()) {
    return Bad(c, id, "perm", absl::StrCat("has ", n.axes.size(), n.axes.size() == 1 ? " entry" : " entries", " for rank ", in.rank()));
  }
  std::vector<bool> seen(in.rank(), false);
  TensorType out{in.dtype, {}};
  for (size_t i = 0; i < n.axes.size(); ++i) {
    KFUSE_RETURN_IF_ERROR(
        NormalizeAxis(c, id, absl::StrCat("perm[", i, "]"), in.rank(), &n.axes[i]));
    if (seen[n.axes[i]]) {
      return Bad(c, id, absl::StrCat("perm[", i, "]"),
                 absl::StrCat("axis ", n.axes[i], " repeated; not a permutation"));
    }
    seen[n.axes[i]] = true;
    out.shape.push_back(in.shape[n.axes[i]]);
  }
  n.type = std::move(out);
  return absl::OkStatus();
}

absl::Status InferExpand(Chain& c, int32_t id) {
  Node& n = c.nodes[id];
  const TensorType& in = c.nodes[n.args[0]].type;
  KFUSE_RETURN_IF_ERROR(CheckDims(c, id, "shape", n.shape));
  size_t offset = n.shape.size() - std::min(n.shape.size(), in.shape.size());
  bool ok = n.shape.size() >= in.shape.size();
  for (size_t i = 0; ok && i < in.shape.size(); ++i) {
    const Dim& d = in.shape[i];
    ok = d == n.shape[offset + i] || d == Dim::Static(1);
  }
  if (!ok) {
    return Bad(
        c, id, "shape",
        absl::StrCat("cannot expand ", ShapeString(c, in.shape), " to ", ShapeString(c, n.shape)));
  }
  n.type = TensorType{in.dtype, n.shape};
  return absl::OkStatus();
}

absl::Status InferSlice(Chain& c, int32_t id) {
  Node& n = c.nodes[id];
  const TensorType& in = c.nodes[n.args[0]].type;
  KFUSE_RETURN_IF_ERROR(NormalizeAxis(c, id, "axis", in.rank(), &n.axis));
  if (n.step <= 0) return Bad(c, id, "step", absl::StrCat("must be positive, got ", n.step));
  const Dim& d = in.shape[n.axis];
  if (!d.is_static()) return Unsupported(c, id, "axis", "slicing a symbolic dim is not generated yet");
  auto clamp = [&d](int64_t v) {
    if (v < 0) v = std::max<int64_t>(v, -d.size) + d.size;
    return std::min(v, d.size);
  };
  n.start = clamp(n.start);
  n.stop = std::max(clamp(n.stop), n.start);
  // Written so that a huge step cannot overflow.
  int64_t len = n.stop == n.start ? 0 : 1 + (n.stop - n.start - 1) / n.step;
  if (len == 0) return Bad(c, id, "start", "the slice is empty");
  n.type = in;
  n.type.shape[n.axis] = Dim::Static(len);
  return absl::OkStatus();
}

absl::Status InferConcat(Chain& c, int32_t id) {
  Node& n = c.nodes[id];
  TensorType out = c.nodes[n.args[0]].type;
  KFUSE_RETURN_IF_ERROR(NormalizeAxis(c, id, "axis", out.rank(), &n.axis));
  int64_t total = 0;
  for (size_t i = 0; i < n.args.size(); ++i) {
    const TensorType& t = c.nodes[n.args[i]].type;
    std::string field = absl::StrCat("args[", i, "]");
    if (t.dtype != out.dtype) {
      return Bad(
          c, id, field,
          absl::StrCat("dtype ", DTypeString(t.dtype), " differs from ", DTypeString(out.dtype)));
    }
    if (t.rank() != out.rank()) {
      return Bad(c, id, field, absl::StrCat("rank ", t.rank(), " differs from ", out.rank()));
    }
    for (int a = 0; a < t.rank(); ++a) {
      if (a == n.axis) continue;
      if (t.shape[a] != out.shape[a]) {
        return Bad(c, id, field,
                   absl::StrCat("shape ", ShapeString(c, t.shape), " differs from ",
                                ShapeString(c, out.shape), " outside axis ", n.axis));
      }
    }
    if (!t.shape[n.axis].is_static()) {
      return Unsupported(c, id, field, "concatenating along a symbolic dim is not generated yet");
    }
    total += t.shape[n.axis].size;
  }
  out.shape[n.axis] = Dim::Static(total);
  n.type = std::move(out);
  return absl::OkStatus();
}

absl::Status InferIota(Chain& c, int32_t id) {
  Node& n = c.nodes[id];
  KFUSE_RETURN_IF_ERROR(CheckDims(c, id, "shape", n.shape));
  if (n.shape.empty()) return Bad(c, id, "shape", "iota needs rank >= 1");
  KFUSE_RETURN_IF_ERROR(NormalizeAxis(c, id, "axis", n.shape.size(), &n.axis));
  if (!IsKnownDType(n.dtype)) return Bad(c, id, "dtype", "iota needs a known dtype");
  if (!IsComputeDType(n.dtype)) {
    return Unsupported(c, id, "dtype",
                       absl::StrCat("dtype ", DTypeString(n.dtype), " not supported"));
  }
  if (n.dtype == DType::kBool) return Bad(c, id, "dtype", "an iota of bool is not a range (torch has none)");
  n.type = TensorType{n.dtype, n.shape};
  return absl::OkStatus();
}

}  // namespace

absl::Status InferReduction(Chain& c, int32_t id) {
  KFUSE_RETURN_IF_ERROR(CheckOperandDType(c, id));
  Node& n = c.nodes[id];
  const TensorType& in = c.nodes[n.args[0]].type;
  if (n.axes.empty()) {
    for (int a = 0; a < in.rank(); ++a) n.axes.push_back(a);
  }
  std::vector<bool> reduced(in.rank(), false);
  for (size_t i = 0; i < n.axes.size(); ++i) {
    std::string field = absl::StrCat("axes[", i, "]");
    KFUSE_RETURN_IF_ERROR(NormalizeAxis(c, id, field, in.rank(), &n.axes[i]));
    if (reduced[n.axes[i]]) {
      return Bad(c, id, field, absl::StrCat("axis ", n.axes[i], " repeated"));
    }
    reduced[n.axes[i]] = true;
  }
  std::sort(n.axes.begin(), n.axes.end());
  DType t = in.dtype;
  if (n.kind == OpKind::kReduceMean && !IsFloat(t)) {
    return Bad(c, id, "args[0]",
               absl::StrCat("reduce_mean needs a float operand, got ", DTypeString(t)));
  }
  // Integer sums: i64 stays i64; bools and i32 count in i32 (torch sums
  // every integer into i64: its clients cast to i64 first).
  if (n.kind == OpKind::kReduceSum && !IsFloat(t) && t != DType::kI64) t = DType::kI32;
  TensorType out{t, {}};
  for (int a = 0; a < in.rank(); ++a) {
    if (!reduced[a]) {
      out.shape.push_back(in.shape[a]);
    } else if (n.keepdim) {
      out.shape.push_back(Dim::Static(1));
    }
  }
  n.type = std::move(out);
  return absl::OkStatus();
}

absl::Status InferLayout(Chain& c, int32_t id) {
  KFUSE_RETURN_IF_ERROR(CheckOperandDType(c, id));
  switch (c.nodes[id].kind) {
    case OpKind::kReshape:
      return InferReshape(c, id);
    case OpKind::kPermute:
      return InferPermute(c, id);
    case OpKind::kExpand:
      return InferExpand(c, id);
    case OpKind::kSlice:
      return InferSlice(c, id);
    case OpKind::kConcat:
      return InferConcat(c, id);
    case OpKind::kIota:
      return InferIota(c, id);
    default:
      break;
  }
  return Bad(c, id, "kind", "not a layout op");
}

absl::Status InferMatmul(Chain& c, int32_t id) {
  Node& n = c.nodes[id];
  const TensorType& a = c.nodes[n.args[0]].type;
  const TensorType& b = c.nodes[n.args[1]].type;
  for (int i = 0; i < 2; ++i) {
    const TensorType& t = i == 0 ? a : b;
    std::string field = absl::StrCat("args[", i, "]");
    if (t.rank() < 2) {
      return Bad(c, id, field, absl::StrCat("matmul needs rank >= 2, got ", t.rank()));
    }
    if (t.dtype != DType::kF16 && t.dtype != DType::kBF16 && t.dtype != DType::kF32) {
      return Bad(c, id, field,
                 absl::StrCat("matmul needs f16, bf16 or f32, got ", DTypeString(t.dtype)));
    }
  }
  if (a.dtype != b.dtype) {
    return Bad(
        c, id, "args[1]",
        absl::StrCat("dtype ", DTypeString(b.dtype), " differs from ", DTypeString(a.dtype)));
  }
  const Dim& k1 = a.shape[a.rank() - 1];
  const Dim& k2 = b.shape[b.rank() - 2];
  if (k1 != k2) {
    return Bad(c, id, "args[1]",
               absl::StrCat("inner dims differ: ", ShapeString(c, a.shape), " @ ",
                            ShapeString(c, b.shape)));
  }
  std::vector<Dim> batch_a(a.shape.begin(), a.shape.end() - 2);
  std::vector<Dim> batch_b(b.shape.begin(), b.shape.end() - 2);
  std::vector<Dim> out;
  if (!Broadcast(batch_a, batch_b, &out)) {
    return Bad(c, id, "args[1]",
               absl::StrCat("batch dims of ", ShapeString(c, a.shape), " and ",
                            ShapeString(c, b.shape), " do not broadcast"));
  }
  out.push_back(a.shape[a.rank() - 2]);
  out.push_back(b.shape[b.rank() - 1]);
  n.type = TensorType{a.dtype, std::move(out)};
  return absl::OkStatus();
}

}  // namespace kfuse::validate_internal
